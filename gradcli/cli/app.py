"""The commands: parse options, call the library, format the result."""

from __future__ import annotations

import re
import sys
from typing import Any

import typer
from typer.core import TyperGroup

from ..errors import GradcliError
from . import commands, dash_expression, errors_as_json, json_requested, one_line, reported, say_error
from .commands import SYMPY_SECONDS
from .options import checked_number


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
        options = {"-h": False, "--help": False}
        for p in command.params:
            if p.param_type_name == "option":
                for name in (*p.opts, *p.secondary_opts):
                    options[name] = not p.is_flag
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


_CHOICES = re.compile(r"[a-z0-9]+(\|[a-z0-9]+)+").fullmatch  # a metavar that lists an option's values


def _complete_choice(ctx: Any, param: Any, incomplete: str) -> list[str]:
    return [value for value in param.metavar.split("|") if value.startswith(incomplete)]


def _complete_expression(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """The language's function names for the name being typed at the end of EXPR (``x*si`` -> ``x*sin``...)."""
    from ..lang.functions import FUNCTIONS

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
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_text(verbose: bool) -> str:
    """``gradcli X.Y.Z``; verbose: also Python's, NumPy's, SymPy's and Graphviz ``dot``'s versions."""
    from importlib import metadata

    try:
        version = metadata.version("gradcli")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        version = "(not installed)"
    lines = [f"gradcli {version}"]
    if verbose:
        import platform

        lines.append(f"Python {platform.python_version()}")
        for label, package in (("NumPy", "numpy"), ("SymPy", "sympy")):
            try:
                lines.append(f"{label} {metadata.version(package)}")
            except metadata.PackageNotFoundError:
                lines.append(f"{label} not installed")
        lines.append(_dot_version())
    return "\n".join(lines)


def _dot_version() -> str:
    """``Graphviz dot 2.43.0``, or that it is not found (it is needed only for pictures)."""
    import re
    import shutil
    import subprocess

    dot = shutil.which("dot")
    if dot is None:
        return "Graphviz dot not found (needed for png, svg, pdf and html graphs)"
    try:
        said = subprocess.run([dot, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return f"Graphviz dot at {dot} (its version could not be read)"
    found = re.search(r"version\s+(\S+)", said.stderr + said.stdout)
    return f"Graphviz dot {found[1] if found else '(unknown version)'}"


@app.callback()
def _entry(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", "-V", help="print gradcli's version and exit"),
    verbose: bool = typer.Option(
        False, "--verbose", help="with --version: also Python's, NumPy's, SymPy's and Graphviz dot's versions"
    ),
) -> None:
    if version:
        typer.echo(_version_text(verbose))
        raise typer.Exit(0)
    if verbose:
        say_error("error: --verbose goes with --version (gradcli --version --verbose)", 2)
        raise typer.Exit(2)
    if ctx.invoked_subcommand is None:  # `gradcli` alone: the help, which is not an error
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


EXPR = typer.Argument(
    None, metavar="EXPR", help="the expression, '-' for stdin, or path/to/file.py:func", show_default=False
)
AT = typer.Option(None, "--at", metavar="NAME=VALUE,...", help="the point: x=2,w=1 or v=[1,2,3] (repeatable)")
WRT = typer.Option(None, "--wrt", metavar="NAME,...", help="variables to differentiate (default: all, in order)")
JSON = typer.Option(False, "--json", help="one JSON document on stdout")
FILE = typer.Option(None, "-f", "--file", metavar="FILE", help="read the expression from FILE ('-': stdin)")
DIGITS = typer.Option(
    None,
    "--digits",
    metavar="N",
    help="significant digits shown (default: 10 on a terminal, all in a pipe)",
    callback=_in_range("--digits"),
)
PYTHON = typer.Option(
    None, "--python", metavar="FILE:FUNC", help="differentiate the Python function FUNC of FILE (any path)"
)
#: one SymPy time limit for every command that runs SymPy (diff: exit 2; check: SymPy is skipped, the others judge)
SYMPY_TIMEOUT = typer.Option(
    SYMPY_SECONDS,
    "--sympy-timeout",
    metavar="SECONDS",
    help="give up on SymPy after this long: diff exits 2, check reports SymPy as skipped",
    callback=_in_range("--sympy-timeout"),
)
CHUNK_ROWS = typer.Option(
    None, "--chunk-rows", metavar="N", help="with --points: rows read at a time", callback=_in_range("--chunk-rows")
)


@app.command("eval")
def eval_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    python: str = PYTHON,
    seed: str = typer.Option(None, "--seed", metavar="V|ones", help="v for v^T J when the output is not a scalar"),
    points: str = typer.Option(
        None,
        "--points",
        metavar="DATA",
        help="every row a point: FILE.csv|.parquet|.arrow, a folder, a glob, - (stdin)",
    ),
    digits: int = DIGITS,
    out: str = typer.Option(
        None, "-o", "--output", metavar="FILE", help="with --points: write to FILE (.csv .jsonl .parquet .arrow)"
    ),
    chunk_rows: int = CHUNK_ROWS,
    keep_columns: bool = typer.Option(False, "--keep-columns", help="with --points: pass unused columns through"),
    dask: str = typer.Option(
        None, "--dask", metavar="ADDRESS|local:N", help="with --points: run on a Dask cluster, -o DIR of Parquet parts"
    ),
) -> None:
    """Value and gradient of EXPR at a point.

    Example: gradcli eval "(x + w) * (w + 1)" --at x=2,w=1
    """
    commands.evaluate(
        expression, file, at or [], wrt or [], json, seed, points, python, digits, out, chunk_rows, keep_columns, dask
    )


@app.command("diff")
def diff_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    latex: bool = typer.Option(False, "--latex", help="print the derivatives as LaTeX"),
    sympy_timeout: float = SYMPY_TIMEOUT,
    sympy: bool = typer.Option(False, "--sympy", help="print SymPy's own text instead of gradcli's language"),
    steps: bool = typer.Option(
        False, "--steps", help="the derivation step by step, each rule named (with --latex: align*)"
    ),
) -> None:
    """Symbolic derivative of EXPR (SymPy), simplified, in gradcli's language; a program step by step.

    Example: gradcli diff "x^2 * sin(x)" --wrt x
    """
    commands.differentiate(expression, file, at or [], wrt or [], json, latex, sympy_timeout, sympy, steps=steps)


@app.command("graph")
def graph_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    python: str = PYTHON,
    fmt: str = typer.Option(
        None, "--format", metavar="tree|text|dot|png|svg|pdf|html|json", help="how to show it (stdout without -o)"
    ),
    out: str = typer.Option(None, "-o", "--output", metavar="FILE", help="write to FILE (format from its extension)"),
    highlight: list[str] = typer.Option(None, "--highlight", metavar="NAME", help="the paths from the output to NAME"),
    max_nodes: str = typer.Option(
        None,
        "--max-nodes",
        metavar="N|all",
        help="show at most N nodes (default 200, repeats drawn as one node over 100); N at least the graph's size, "
        "or 0 or all: every node, none grouped",
    ),
    seed: str = typer.Option(None, "--seed", metavar="V|ones", help="v for v^T J when the output is not a scalar"),
    blame: bool = typer.Option(False, "--blame", help="mark the first node whose own derivative is wrong"),
    layout_timeout: float = typer.Option(
        30.0,
        "--layout-timeout",
        metavar="SECONDS",
        help="give up (exit 2) if Graphviz takes longer to draw a picture",
        callback=_in_range("--layout-timeout"),
    ),
    digits: int = DIGITS,
    compact: bool = typer.Option(False, "--compact", help="names and values only: no formulas, no sums of parts"),
    rankdir: str = typer.Option(None, "--rankdir", metavar="TB|LR", help="picture top-to-bottom or left-to-right"),
) -> None:
    """The computation graph of EXPR: values, gradients and local derivatives with --at.

    Example: gradcli graph "(x + w) * (w + 1)" --at x=2,w=1 -o g.png
    """
    commands.draw(
        expression, file, at or [], wrt or [], "json" if json else fmt, out, highlight or [], max_nodes, seed, blame,
        python,
        layout_timeout=layout_timeout, digits=digits, compact=compact, rankdir=rankdir,
    )  # fmt: skip


MODE = typer.Option("auto", "--mode", metavar="auto|forward|reverse", help="forward or reverse accumulation")
EXPLAIN = typer.Option(False, "--explain", help="say which strategy was used and why")
MATRIX_FORMAT = typer.Option(
    None,
    "--format",
    metavar="text|csv|npy|json",
    help="text (a table), CSV or NumPy's .npy (default: from -o, else text)",
)
MATRIX_OUT = typer.Option(
    None, "-o", "--output", metavar="FILE", help="write to FILE (.csv, .npy, .json or .txt: format from its extension)"
)


@app.command("jacobian")
def jacobian_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    python: str = PYTHON,
    mode: str = MODE,
    explain: bool = EXPLAIN,
    fmt: str = MATRIX_FORMAT,
    out: str = MATRIX_OUT,
    digits: int = DIGITS,
) -> None:
    """Jacobian of all outputs of EXPR with respect to the variables (rows: outputs).

    Example: gradcli jacobian "x * y, x + y" --at x=2,y=3
    """
    commands.jacobian(expression, file, at or [], wrt or [], json, mode, explain, python, fmt, out, digits)


@app.command("hessian")
def hessian_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    python: str = PYTHON,
    explain: bool = EXPLAIN,
    fmt: str = MATRIX_FORMAT,
    out: str = MATRIX_OUT,
    digits: int = DIGITS,
) -> None:
    """Hessian of a scalar EXPR (forward-over-reverse).

    Example: gradcli hessian "x^2 * y" --at x=2,y=3
    """
    commands.hessian(expression, file, at or [], wrt or [], json, explain, python, fmt, out, digits)


@app.command("check")
def check_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    python: str = PYTHON,
    expect: list[str] = typer.Option(
        None, "--expect", metavar="VAR=EXPR", help="your derivative with respect to VAR, checked too (repeatable)"
    ),
    method: list[str] = typer.Option(
        None, "--method", metavar="sympy,fd,complex", help="which methods to compare with (default: all)"
    ),
    rtol: float = typer.Option(
        None, "--rtol", metavar="R", help="relative tolerance (default: from the dtype)", callback=_in_range("--rtol")
    ),
    atol: float = typer.Option(
        None, "--atol", metavar="A", help="absolute tolerance (default: from the dtype)", callback=_in_range("--atol")
    ),
    seed: str = typer.Option(None, "--seed", metavar="V|ones", help="check v^T J when the output is not a scalar"),
    blame: bool = typer.Option(False, "--blame", help="check every node's own derivative; name the first wrong one"),
    sympy_timeout: float = SYMPY_TIMEOUT,
    digits: int = DIGITS,
    points: str = typer.Option(
        None, "--points", metavar="DATA", help="check at every row of a data set (fd, complex step: batched)"
    ),
    chunk_rows: int = CHUNK_ROWS,
    cases: str = typer.Option(
        None, "--cases", metavar="FILE.toml", help="check every [[case]] of a TOML file, one verdict each"
    ),
    junit: str = typer.Option(None, "--junit", metavar="FILE.xml", help="with --cases: write a JUnit XML report"),
    select: str = typer.Option(None, "-k", metavar="PATTERN", help="with --cases: only names matching (and/or/not)"),
    jobs: int = typer.Option(
        1, "--jobs", metavar="N", help="with --cases: run the cases in N processes", callback=_in_range("--jobs")
    ),
    fail_fast: bool = typer.Option(False, "--fail-fast", help="with --cases: stop at the first case that fails"),
    update: bool = typer.Option(False, "--update", help="with --cases: write diff's derivative into missing expect"),
) -> None:
    """Cross-check the gradient of EXPR: SymPy, finite differences, complex step, your formulas.

    Exit 0 when all agree, 1 on a mismatch or a non-finite value, 2 on bad input.
    With --cases FILE.toml: every case of the file, a line each and a summary (exit 1 if any fails).

    Example: gradcli check "x^2 * y" --at x=2,y=3 --expect x="2*x*y"
    """
    if cases is not None or junit is not None or select is not None or fail_fast or update or jobs != 1:
        from . import cases as run_cases

        given = {"EXPR": expression, "--at": at, "--wrt": wrt, "-f": file, "--python": python, "--expect": expect,
                 "--method": method, "--rtol": rtol, "--atol": atol, "--seed": seed, "--blame": blame,
                 "--points": points, "--chunk-rows": chunk_rows}  # fmt: skip
        run_cases.check_cases(
            cases, json, junit, select, jobs, fail_fast, update, sympy_timeout, digits,
            [name for name, value in given.items() if value is not None and value is not False and value != []],
        )  # fmt: skip
        return
    commands.check(
        expression, file, at or [], wrt or [], json, expect or [], method or [], rtol, atol, seed, blame, sympy_timeout,
        python, digits, points, chunk_rows,
    )  # fmt: skip


@app.command("ops")
def ops_command(
    name: str = typer.Argument(
        None, metavar="[NAME]", help="one function (or operator, as %) in full", show_default=False
    ),
    json: bool = JSON,
) -> None:
    """The functions of the language by group: arity, which inputs get a gradient, derivatives, SymPy.

    Example: gradcli ops clamp
    """
    commands.list_functions(name, json)


@app.command("plot")
def plot_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = typer.Option(
        None, "--wrt", metavar="NAME,...", help="the one or two variables to plot (default: those without --at)"
    ),
    json: bool = typer.Option(False, "--json", help="the plotted values as one JSON document (no picture needed)"),
    file: str = FILE,
    python: str = PYTHON,
    ranges: list[str] = typer.Option(
        None, "--range", metavar="[NAME=]A,B", help="the axis from A to B, or one variable's (default: -5,5)"
    ),
    order: int = typer.Option(
        1, "--order", metavar="1|2", help="2: also f″ (one variable)", callback=_in_range("--order")
    ),
    out: str = typer.Option(
        None, "-o", "--output", metavar="FILE", help="write a picture: .png, .svg or .pdf (else drawn on the terminal)"
    ),
) -> None:
    """Plot f and f′ (and f″) of one variable, or contours and gradient arrows of two.

    --at gives parameters (a=2) and the point of the tangent or gradient (x=1).

    Example: gradcli plot "x^2 * sin(3*x)" --range -3,3 --at x=1 -o plot.png
    """
    from .plot import plot

    plot(expression, file, python, at or [], ranges or [], order, out, wrt or [], json)


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
            from ..errors import UsageError
            from ..lang.evaluate import suggest

            names = list(group.commands)  # type: ignore[attr-defined]
            raise UsageError(f"no such command '{command}'{suggest(command, names)}")
    with found.make_context(command, ["--help"], parent=ctx.parent, resilient_parsing=True) as inner:
        typer.echo(found.get_help(inner))
