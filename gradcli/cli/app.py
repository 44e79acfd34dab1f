"""The commands: parse options, call the library, format the result."""

from __future__ import annotations

import typer

from . import commands

app = typer.Typer(
    name="gradcli",
    help="Compute, check and see derivatives. Run `gradcli COMMAND --help` for a command's options and an example.",
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXPR = typer.Argument(
    None, metavar="EXPR", help="the expression, '-' for stdin, or path/to/file.py:func", show_default=False
)
AT = typer.Option(None, "--at", metavar="NAME=VALUE,...", help="the point: x=2,w=1 or v=[1,2,3] (repeatable)")
WRT = typer.Option(None, "--wrt", metavar="NAME,...", help="variables to differentiate (default: all, in order)")
JSON = typer.Option(False, "--json", help="one JSON document on stdout")
FILE = typer.Option(None, "-f", "--file", metavar="FILE", help="read the expression from FILE ('-': stdin)")
PYTHON = typer.Option(
    None, "--python", metavar="FILE:FUNC", help="differentiate the Python function FUNC of FILE (any path)"
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
    points: str = typer.Option(None, "--points", metavar="FILE.csv", help="evaluate every row of a CSV file at once"),
) -> None:
    """Value and gradient of EXPR at a point.

    Example: gradcli eval "(x + w) * (w + 1)" --at x=2,w=1
    """
    commands.evaluate(expression, file, at or [], wrt or [], json, seed, points, python)


@app.command("diff")
def diff_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    latex: bool = typer.Option(False, "--latex", help="print the derivatives as LaTeX"),
    sympy_timeout: float = typer.Option(
        30.0, "--sympy-timeout", metavar="SECONDS", help="give up (exit 2) if SymPy takes longer than this"
    ),
) -> None:
    """Symbolic derivative of EXPR (SymPy), simplified.

    Example: gradcli diff "x^2 * sin(x)" --wrt x
    """
    commands.differentiate(expression, file, at or [], wrt or [], json, latex, sympy_timeout)


@app.command("graph")
def graph_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    python: str = PYTHON,
    fmt: str = typer.Option(None, "--format", metavar="tree|text|dot|png|svg|pdf|html|json", help="how to show it"),
    out: str = typer.Option(None, "-o", "--output", metavar="FILE", help="write to FILE (format from its extension)"),
    highlight: list[str] = typer.Option(None, "--highlight", metavar="NAME", help="the paths from the output to NAME"),
    max_nodes: int = typer.Option(200, "--max-nodes", metavar="N", help="show at most N nodes of a large graph"),
    seed: str = typer.Option(None, "--seed", metavar="V|ones", help="v for v^T J when the output is not a scalar"),
    blame: bool = typer.Option(False, "--blame", help="mark the first node whose own derivative is wrong"),
    layout_timeout: float = typer.Option(
        30.0, "--layout-timeout", metavar="SECONDS", help="give up (exit 2) if Graphviz takes longer to draw a picture"
    ),
    compact: bool = typer.Option(False, "--compact", help="names and values only: no formulas, no sums of parts"),
    rankdir: str = typer.Option(None, "--rankdir", metavar="TB|LR", help="picture top-to-bottom or left-to-right"),
) -> None:
    """The computation graph of EXPR: values, gradients and local derivatives with --at.

    Example: gradcli graph "(x + w) * (w + 1)" --at x=2,w=1 -o g.png
    """
    commands.draw(
        expression, file, at or [], wrt or [], "json" if json else fmt, out, highlight or [], max_nodes, seed, blame,
        python,
        layout_timeout=layout_timeout, compact=compact, rankdir=rankdir,
    )  # fmt: skip


MODE = typer.Option("auto", "--mode", metavar="auto|forward|reverse", help="forward or reverse accumulation")
EXPLAIN = typer.Option(False, "--explain", help="say which strategy was used and why")


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
) -> None:
    """Jacobian of all outputs of EXPR with respect to the variables (rows: outputs).

    Example: gradcli jacobian "x * y, x + y" --at x=2,y=3
    """
    commands.jacobian(expression, file, at or [], wrt or [], json, mode, explain, python)


@app.command("hessian")
def hessian_command(
    expression: str = EXPR,
    at: list[str] = AT,
    wrt: list[str] = WRT,
    json: bool = JSON,
    file: str = FILE,
    python: str = PYTHON,
    explain: bool = EXPLAIN,
) -> None:
    """Hessian of a scalar EXPR (forward-over-reverse).

    Example: gradcli hessian "x^2 * y" --at x=2,y=3
    """
    commands.hessian(expression, file, at or [], wrt or [], json, explain, python)


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
    rtol: float = typer.Option(None, "--rtol", metavar="R", help="relative tolerance (default: from the dtype)"),
    atol: float = typer.Option(None, "--atol", metavar="A", help="absolute tolerance (default: from the dtype)"),
    seed: str = typer.Option(None, "--seed", metavar="V|ones", help="check v^T J when the output is not a scalar"),
    blame: bool = typer.Option(False, "--blame", help="check every node's own derivative; name the first wrong one"),
    sympy_timeout: float = typer.Option(
        10.0, "--sympy-timeout", metavar="SECONDS", help="give up on SymPy (reported as skipped) after this long"
    ),
) -> None:
    """Cross-check the gradient of EXPR: SymPy, finite differences, complex step, your formulas.

    Exit 0 when all agree, 1 on a mismatch or a non-finite value, 2 on bad input.

    Example: gradcli check "x^2 * y" --at x=2,y=3 --expect x="2*x*y"
    """
    commands.check(
        expression, file, at or [], wrt or [], json, expect or [], method or [], rtol, atol, seed, blame, sympy_timeout,
        python,
    )  # fmt: skip


@app.command("ops")
def ops_command(json: bool = JSON) -> None:
    """The functions of the language, their arities and derivative rules.

    Example: gradcli ops --json
    """
    commands.list_functions(json)
