"""The commands: parse options, call the library, format the result."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from ..errors import GradcliError, UsageError
from ..lang.functions import FUNCTIONS
from . import commands, graphing
from .inputs import COMMANDS, JSON, Declared, Given, dash_expression, json_requested
from .options import checked_number
from .report import errors_as_json, one_line, reported, say_error
from .version import version_text


class GradcliGroup(TyperGroup):
    """The command group, with click's own errors (an unknown option or command, a bad value)
    said as gradcli's: one ``error:`` line with click's suggestion, no usage block, exit 2 (and
    with ``--json`` also as JSON on stdout); an expression starting with '-' is taken as EXPR."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        click = _click()
        args = self._expression_first(list(sys.argv[1:] if args is None else args))
        self._completions()
        errors_as_json(self._json_errors(args))
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.ClickException as exc:
            code = exc.exit_code
            say_error(f"error: {click_message(exc)}", code)
        except GradcliError as exc:  # an option's value refused by its callback (a number out of range)
            code = exc.exit_code
            say_error(exc.render(), code)
        except _aborts(click):
            code = 1
            say_error("error: aborted", code)
        finally:
            errors_as_json(False)
        if standalone_mode:
            sys.exit(code if isinstance(code, int) else 0)
        return code

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command's summary whole (its help's first sentence), wrapped at the help's width as
        ``git`` and ``gh`` show theirs: click cuts it to the width left on the line, with "..."."""
        rows = []
        for name in self.list_commands(ctx):
            found = self.get_command(ctx, name)
            if found is not None and not found.hidden:
                rows.append((name, found.get_short_help_str(limit=sys.maxsize)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Click's, with an unknown command's nearest name (``digg`` -> ``diff``, see ``nearest_command``)."""
        click = _click()
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.UsageError as exc:
            if args and self.get_command(ctx, args[0]) is None and exc.message.startswith("No such command"):
                exc.message = f"No such command '{args[0]}'{nearest_command(args[0], list(self.commands))}"
            raise

    def _completions(self) -> None:
        """Shell completion (``--install-completion``) of what the commands take: function names in
        EXPR, an option's values from its metavar (``tree|text|dot|...``), command names after help."""
        for command in self.commands.values():
            for p in command.params:
                if p._custom_shell_complete is not None:
                    continue
                if p.name == "expression":
                    p._custom_shell_complete = _complete_expression
                elif p.param_type_name == "option" and _CHOICES(p.metavar or ""):
                    p._custom_shell_complete = _complete_choice
                elif command.name == "help" and p.name == "command":
                    p._custom_shell_complete = lambda ctx, param, incomplete: [
                        name for name in self.commands if name.startswith(incomplete)
                    ]

    def _command_of(self, args: list[str]) -> tuple[int, Any]:
        """The position of the command's name in ``args`` and the command (None if unknown)."""
        for i, arg in enumerate(args):
            if not arg.startswith("-"):
                return i, self.commands.get(arg)
        return len(args), None

    def _json_errors(self, args: list[str]) -> bool:
        at, command = self._command_of(args)
        if not json_requested(args):
            return False
        return command is None or any("--json" in p.opts for p in command.params)

    def _expression_first(self, args: list[str]) -> list[str]:
        """``eval "-x^2" --at x=3`` as ``eval --at x=3 -- "-x^2"``: a lone argument starting with '-'
        that is no option of the command is its EXPR (a mistyped long option stays an error)."""
        at, command = self._command_of(args)
        if command is None or "--" in args or not any(p.param_type_name == "argument" for p in command.params):
            return args
        options = _takes_value(command)
        found, positional = [], False
        i = at + 1
        while i < len(args):
            arg = args[i]
            if not arg.startswith("-") or arg == "-":
                positional = True
            elif dash_expression(arg, options):
                found.append(i)
            elif "=" not in arg and options.get(arg):
                i += 1  # the option's value, whatever it starts with
            elif arg.startswith("--") and arg.partition("=")[0] not in options and "=" not in arg:
                # a mistyped option (--att x=3): its value is no EXPR, and click is to name the option
                i += 1 if i + 1 < len(args) and not args[i + 1].startswith("-") else 0
            i += 1
        if len(found) != 1 or positional:
            return args
        return [*args[: found[0]], *args[found[0] + 1 :], "--", args[found[0]]]


def nearest_command(word: str, names: list[str]) -> str:
    """``; did you mean 'diff'?`` for ``digg``: the command the fewest edits away (a letter added,
    dropped, changed or two neighbours swapped), two at most (one for a word of three letters), or
    the one command ``word`` begins (``jac``); "" when none is that near (``gradcli x^2``, ``gradcli
    cos``: an expression given without its command)."""
    starting = [name for name in names if len(word) >= 2 and name.startswith(word)]
    if len(starting) == 1:
        return f"; did you mean '{starting[0]}'?"
    near = sorted((_edits(word, name), name) for name in names)
    if near and near[0][0] <= (1 if len(word) <= 3 else 2):
        return f"; did you mean '{near[0][1]}'?"
    return ""


def _edits(a: str, b: str) -> int:
    """The optimal string alignment distance: insertions, deletions, substitutions, swaps of neighbours."""
    before, row = None, list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (x != y))
            if before is not None and i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                current[j] = min(current[j], before[j - 2] + 1)
        before, row = row, current
    return row[-1]


def _takes_value(command: Any) -> dict[str, bool]:
    """Every option name of ``command`` (and -h, --help) -> whether it takes a value."""
    options = {"-h": False, "--help": False}
    for p in command.params:
        if p.param_type_name == "option":
            for name in (*p.opts, *p.secondary_opts):
                options[name] = not p.is_flag
    return options


_CHOICES = re.compile(r"[a-z0-9]+(\|[a-z0-9]+)+").fullmatch  # a metavar that lists an option's values


def _complete_choice(ctx: Any, param: Any, incomplete: str) -> list[str]:
    return [value for value in param.metavar.split("|") if value.startswith(incomplete)]


def _complete_expression(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The language's function names for the name being typed at the end of EXPR (``x*si`` -> ``x*sin``...)."""
    word = re.search(r"[A-Za-z_][A-Za-z0-9_]*$", incomplete)
    if word is None and incomplete:
        return []
    start = word.start() if word else 0
    return [incomplete[:start] + name for name in FUNCTIONS if name.startswith(incomplete[start:])]


def _click() -> Any:
    """Click as typer uses it: vendored as ``typer._click`` since typer 0.2x, the package before."""
    try:
        from typer import _click as click
    except ImportError:  # pragma: no cover - an older typer
        import click
    return click


def _aborts(click: Any) -> tuple[type[BaseException], ...]:
    found = [click.exceptions.Abort] if hasattr(click.exceptions, "Abort") else []
    try:
        from typer.exceptions import Abort

        found.append(Abort)
    except ImportError:  # pragma: no cover - an older typer
        pass
    return tuple(found)


def click_message(exc: Any) -> str:
    """Click's message in gradcli's voice: one line, lower case, its suggestion kept."""
    if isinstance(exc, _click().exceptions.NoSuchOption):
        text = f"no such option: {exc.option_name}"
        if exc.possibilities:
            import difflib

            best = difflib.get_close_matches(exc.option_name, exc.possibilities, n=1, cutoff=0) or sorted(
                exc.possibilities
            )
            text += f"; did you mean {best[0]}?"
        return one_line(text)
    text = one_line(exc.format_message()).rstrip(".")
    text = text.replace(". Did you mean", "; did you mean")
    if text[:1].isupper() and not text[1:2].isupper():
        text = text[0].lower() + text[1:]
    return text


def _in_range(option: str) -> Any:
    """The callback that checks a numeric option's value (``options.checked_number``, which eval's
    fast path calls too): out of range, nan or infinite is one error line, exit 2, before any work."""

    def callback(ctx: typer.Context, value: Any) -> Any:
        return value if ctx.resilient_parsing else checked_number(option, value)

    return callback


app = typer.Typer(
    name="gradcli",
    cls=GradcliGroup,
    help="Compute, check and see derivatives. Run `gradcli COMMAND --help` for a command's options and an example.",
    add_completion=True,
    invoke_without_command=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    # up to 120 columns where the terminal has them (click stops at 80), each command summary on its line
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)


@app.callback()
def _entry(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", "-V", help="print gradcli's version and exit"),
    verbose: bool = typer.Option(
        False, "--verbose", help="with --version: also Python's, NumPy's, SymPy's and Graphviz dot's versions"
    ),
) -> None:
    if version:
        typer.echo(version_text(verbose))
        raise typer.Exit(0)
    if verbose:
        say_error("error: --verbose goes with --version (gradcli --version --verbose)", 2)
        raise typer.Exit(2)
    if ctx.invoked_subcommand is None:  # `gradcli` alone: the help, which is not an error
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


#: a parameter's name as click knows it, where it is not the body's (``json`` is a module there)
CLICK_NAMES = {"as_json": "json"}
KINDS: dict[type, Any] = {list: list[str]}  # a repeatable option's annotation


def _typer_parameter(row: Declared) -> inspect.Parameter:
    """A row of ``inputs`` as the typer parameter it declares (with its range check)."""
    if not row.names:
        declared = typer.Argument(row.default, metavar=row.metavar, help=row.help, show_default=False)
    else:
        checked = {"callback": _in_range(row.names[-1])} if row.ranged else {}
        declared = typer.Option(row.default, *row.names, metavar=row.metavar, help=row.help, **checked)
    name = CLICK_NAMES.get(row.parameter, row.parameter)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=declared, annotation=KINDS.get(row.kind, row.kind)
    )


def command(name: str, body: Callable[[Given], None], text: str) -> None:
    """Register ``body(given)`` as command ``name``, with the options ``inputs.COMMANDS[name]`` declares
    (in that order) and ``text`` as its help: the command line's values reach it as one :class:`Given`."""
    rows = COMMANDS[name]

    def run(**values: Any) -> None:
        body(Given.of(rows, {row.parameter: values[CLICK_NAMES.get(row.parameter, row.parameter)] for row in rows}))

    parameters = [_typer_parameter(row) for row in rows]
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    run.__name__ = run.__qualname__ = f"{name}_command"
    run.__doc__ = text
    app.command(name)(run)


#: the commands that read a program, in the order ``gradcli --help`` lists them (ops comes before
#: plot): the body in ``commands``, the help (what it does, an example)
for _name, _body, _text in (
    ("eval", commands.evaluate, """Value and gradient of EXPR at a point.

    Example: gradcli eval "(x + w) * (w + 1)" --at x=2,w=1
    """),
    ("diff", commands.differentiate, """Symbolic derivative of EXPR (SymPy), simplified, in gradcli's language; a program step by step.

    Example: gradcli diff "x^2 * sin(x)" --wrt x
    """),
    ("graph", graphing.draw, """The computation graph of EXPR: values, gradients and local derivatives with --at.

    Example: gradcli graph "(x + w) * (w + 1)" --at x=2,w=1 -o g.png

    Example: gradcli graph -f examples/cli/seed002.gc --at x=2,w=1 --depth 0

    Example: gradcli graph "x * y" --at x=1,y=100 --color-by grad-norm -o health.png

    """),
    ("jacobian", commands.jacobian, """Jacobian of all outputs of EXPR with respect to the variables (rows: outputs).

    Example: gradcli jacobian "x * y, x + y" --at x=2,y=3
    """),
    ("hessian", commands.hessian, """Hessian of a scalar EXPR (forward-over-reverse).

    Example: gradcli hessian "x^2 * y" --at x=2,y=3
    """),
    ("check", commands.check, """Cross-check the gradient of EXPR: SymPy, finite differences, complex step, your formulas.

    Exit 0 when all agree, 1 on a mismatch or a non-finite value, 2 on bad input.
    With --cases FILE.toml: every case of the file, a line each and a summary (exit 1 if any fails).

    Example: gradcli check "x^2 * y" --at x=2,y=3 --expect x="2*x*y"

    Above 512 input elements, along 8 random directions, then element by element where one disagrees
    (--directions K|elementwise chooses):

    Example: gradcli check "sum(sin(w) * w)" --at w=[0.1,0.2,0.3,0.4] --directions 2
    """),
):  # fmt: skip
    command(_name, _body, _text)


@app.command("ops")
def ops_command(
    name: str = typer.Argument(
        None, metavar="[NAME]", help="one function (or operator, as %) in full", show_default=False
    ),
    json: bool = typer.Option(JSON.default, *JSON.names, help=JSON.help),
) -> None:
    """The functions of the language by group: arity, which inputs get a gradient, derivatives, SymPy.

    Example: gradcli ops clamp
    """
    commands.list_functions(name, json)


command("plot", commands.plot, """Plot f and f′ (and f″) of one variable, or contours and gradient arrows of two.

    --at gives parameters (a=2) and the point of the tangent or gradient (x=1).

    Example: gradcli plot "x^2 * sin(3*x)" --range -3,3 --at x=1 -o plot.png
    """)  # fmt: skip


command("why", commands.why, """Why a gradient is None, zero or not finite: the cause, the operation, its line and module.

    Reads a PyTorch or JAX function: a detach, no_grad, stop_gradient, .item() or integer result on the way; a ReLU
    off, a saturated tanh, a clamp at its bound; the first NaN or inf, forward or backward.

    Example: gradcli why examples/torch/why.py:loss --at x=[1,-2],w=[0.5,1.5]
    """)  # fmt: skip


def command_names() -> list[str]:
    """Every registered command, in the order ``gradcli --help`` lists them: what tests loop over
    (a command added here is checked everywhere, with no list of names to keep up to date)."""
    return [info.name or info.callback.__name__.replace("_", "-") for info in app.registered_commands]


@app.command("help")
def help_command(
    ctx: typer.Context,
    command: str = typer.Argument(None, metavar="COMMAND", help="the command to explain", show_default=False),
) -> None:
    """The help of COMMAND (or of gradcli itself): its options and an example.

    Example: gradcli help eval
    """
    group = ctx.parent.command if ctx.parent is not None else None
    if group is None or ctx.parent is None:
        return
    if command is None:
        typer.echo(ctx.parent.get_help())
        return
    found = group.get_command(ctx.parent, command)  # type: ignore[attr-defined]
    if found is None:
        with reported():
            names = list(group.commands)  # type: ignore[attr-defined]
            raise UsageError(f"no such command '{command}'{nearest_command(command, names)}")
    with found.make_context(command, ["--help"], parent=ctx.parent, resilient_parsing=True) as inner:
        typer.echo(found.get_help(inner))
