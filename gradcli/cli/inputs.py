"""What each command takes, declared once as plain data (no typer: the fast path reads it too).

A row is one option (or the EXPR argument): its names, the parameter the command body reads
(``given.at``), its kind, metavar, help and default. ``app`` turns the rows of a command into
its typer options; ``gradcli.cli.OPTIONS``, the tables ``fast_command`` reads argv with, are
made from ``COMMANDS``, so the two roads cannot take different options.

>>> [row.names for row in PROGRAM]
[(), ('--at',), ('--wrt',), ('--json',), ('-f', '--file'), ('--python',), ('--framework',)]
"""

from __future__ import annotations

from typing import Any

#: ``--sympy-timeout``'s default, the same for every command that runs SymPy (and the library's
#: ``gradcli.check.symbolic.TIME_LIMIT``; a test holds them equal, and to the README's figure)
SYMPY_SECONDS = 10.0


class Declared:
    """One option of a command (no ``names``: the EXPR argument). ``kind`` is ``str``, ``int``,
    ``float``, ``bool`` (a flag) or ``list`` (repeatable, of texts); ``ranged``: the value is
    checked by ``options.checked_number`` under the option's last name. (A plain class: a
    NamedTuple costs eval's start-up a tenth of a millisecond to define.)"""

    __slots__ = ("parameter", "names", "kind", "metavar", "help", "default", "ranged")

    def __init__(
        self,
        parameter: str,
        names: tuple[str, ...],
        kind: type,
        metavar: str | None,
        help: str,  # noqa: A002 (typer's word for it)
        default: Any = None,
        ranged: bool = False,
    ) -> None:
        self.parameter, self.names, self.kind, self.metavar = parameter, names, kind, metavar
        self.help, self.default, self.ranged = help, default, ranged

    @property
    def label(self) -> str:
        """How a message names it: ``EXPR``, ``-f``, ``--at``."""
        return self.names[0] if self.names else "EXPR"

    def __repr__(self) -> str:
        return f"Declared({self.parameter!r}, {self.names!r})"


class Given:
    """The options of one command line, by parameter name (``given.at``, ``given.as_json``)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __repr__(self) -> str:
        return f"Given({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"

    @classmethod
    def of(cls, rows: tuple[Declared, ...], values: dict[str, Any]) -> Given:
        """``values`` (by parameter) of the options ``rows``: a repeatable one not given is ``[]``."""
        return cls(
            **{r.parameter: list(values[r.parameter] or []) if r.kind is list else values[r.parameter] for r in rows}
        )


EXPR = Declared("expression", (), str, "EXPR", "the expression, '-' for stdin, or path/to/file.py:func")
AT = Declared("at", ("--at",), list, "NAME=VALUE,...", "the point: x=2,w=1 or v=[1,2,3] (repeatable)")
WRT = Declared("wrt", ("--wrt",), list, "NAME,...", "variables to differentiate (default: all, in order)")
JSON = Declared("as_json", ("--json",), bool, None, "one JSON document on stdout", False)
FILE = Declared("file", ("-f", "--file"), str, "FILE", "read the expression from FILE ('-': stdin)")
PYTHON = Declared(
    "python", ("--python",), str, "FILE:FUNC", "differentiate the Python function FUNC of FILE (any path)"
)

FRAMEWORK = Declared(
    "framework", ("--framework",), str, "torch|jax|gradcli",
    "what FILE.py:func computes with (default: told from what it uses)",
)  # fmt: skip

#: A program's inputs, first in every command that reads one (diff reads no Python function).
TEXT_PROGRAM = (EXPR, AT, WRT, JSON, FILE)
PROGRAM = (*TEXT_PROGRAM, PYTHON, FRAMEWORK)

DIGITS = Declared(
    "digits", ("--digits",), int, "N", "significant digits shown (default: 10 on a terminal, all in a pipe)", None, True
)
SEED = Declared("seed", ("--seed",), str, "V|ones", "v for v^T J when the output is not a scalar")
#: one SymPy time limit for every command that runs SymPy (diff: exit 2; check: SymPy is skipped, the others judge)
SYMPY_TIMEOUT = Declared(
    "sympy_timeout", ("--sympy-timeout",), float, "SECONDS",
    "give up on SymPy after this long: diff exits 2, check reports SymPy as skipped", SYMPY_SECONDS, True,
)  # fmt: skip
CHUNK_ROWS = Declared("chunk_rows", ("--chunk-rows",), int, "N", "with --points: rows read at a time", None, True)
EXPLAIN = Declared("explain", ("--explain",), bool, None, "say which strategy was used and why", False)
MATRIX_FORMAT = Declared(
    "fmt", ("--format",), str, "text|csv|npy|json", "text (a table), CSV or NumPy's .npy (default: from -o, else text)"
)
MATRIX_OUT = Declared(
    "out", ("-o", "--output"), str, "FILE", "write to FILE (.csv, .npy, .json or .txt: format from its extension)"
)

EVAL = (
    *PROGRAM,
    SEED,
    Declared(
        "points", ("--points",), str, "DATA", "every row a point: FILE.csv|.parquet|.arrow, a folder, a glob, - (stdin)"
    ),
    DIGITS,
    Declared("out", ("-o", "--output"), str, "FILE", "with --points: write to FILE (.csv .jsonl .parquet .arrow)"),
    CHUNK_ROWS,
    Declared("keep_columns", ("--keep-columns",), bool, None, "with --points: pass unused columns through", False),
    Declared(
        "dask", ("--dask",), str, "ADDRESS|local:N", "with --points: run on a Dask cluster, -o DIR of Parquet parts"
    ),
)

DIFF = (
    *TEXT_PROGRAM,
    Declared("latex", ("--latex",), bool, None, "print the derivatives as LaTeX", False),
    SYMPY_TIMEOUT,
    Declared("sympy", ("--sympy",), bool, None, "print SymPy's own text instead of gradcli's language", False),
    Declared(
        "steps", ("--steps",), bool, None, "the derivation step by step, each rule named (with --latex: align*)", False
    ),
)

GRAPH = (
    *PROGRAM,
    Declared("fmt", ("--format",), str, "tree|text|dot|png|svg|pdf|html|json", "how to show it (stdout without -o)"),
    Declared("out", ("-o", "--output"), str, "FILE", "write to FILE (format from its extension)"),
    Declared(
        "arrays",
        ("--arrays",),
        str,
        "FILE.npz",
        "also write every node's value and gradient whole (keys n3.value, n3.grad): the views show "
        "tensors over 64 elements as statistics",
    ),  # fmt: skip
    Declared("highlight", ("--highlight",), list, "NAME", "the paths from the output to NAME"),
    Declared(
        "max_nodes",
        ("--max-nodes",),
        str,
        "N|all",
        "show at most N nodes (default 200, repeats drawn as one node over 100); N at least the graph's size, "
        "or 0 or all: every node, none grouped",
    ),  # fmt: skip
    SEED,
    Declared("blame", ("--blame",), bool, None, "mark the first node whose own derivative is wrong", False),
    Declared(
        "layout_timeout",
        ("--layout-timeout",),
        float,
        "SECONDS",
        "give up (exit 2) if Graphviz takes longer to draw a picture",
        30.0,
        True,
    ),  # fmt: skip
    DIGITS,
    Declared("compact", ("--compact",), bool, None, "names and values only: no formulas, no sums of parts", False),
    Declared("rankdir", ("--rankdir",), str, "TB|LR", "picture top-to-bottom or left-to-right"),
    Declared(
        "depth",
        ("--depth",),
        str,
        "N|all",
        "boxes (modules, calls, statements) deeper than N drawn folded, one node each (name, class, shapes, "
        "value and gradient); all: every operation; default: a picture's deepest legible depth",
    ),
    Declared(
        "color_by",
        ("--color-by",),
        str,
        "grad-norm|nan|zeros|ratio",
        "colour the picture's nodes and module boxes by gradient norm, NaN/inf, fraction of zero gradient or "
        "gradient/value norm, with a key (NaN and inf are red in every mode)",
    ),  # fmt: skip
)

MODE = Declared("mode", ("--mode",), str, "auto|forward|reverse", "forward or reverse accumulation", "auto")
JACOBIAN = (*PROGRAM, MODE, EXPLAIN, MATRIX_FORMAT, MATRIX_OUT, DIGITS)
HESSIAN = (*PROGRAM, EXPLAIN, MATRIX_FORMAT, MATRIX_OUT, DIGITS)

#: check's options that only go with --cases (each case brings its own program and options)
CASES = (
    Declared("cases", ("--cases",), str, "FILE.toml", "check every [[case]] of a TOML file, one verdict each"),
    Declared("junit", ("--junit",), str, "FILE.xml", "with --cases: write a JUnit XML report"),
    Declared("select", ("-k",), str, "PATTERN", "with --cases: only names matching (and/or/not)"),
    Declared("jobs", ("--jobs",), int, "N", "with --cases: run the cases in N processes", 1, True),
    Declared("fail_fast", ("--fail-fast",), bool, None, "with --cases: stop at the first case that fails", False),
    Declared("update", ("--update",), bool, None, "with --cases: write diff's derivative into missing expect", False),
)
CHECK = (
    *PROGRAM,
    Declared(
        "expect", ("--expect",), list, "VAR=EXPR", "your derivative with respect to VAR, checked too (repeatable)"
    ),
    Declared("method", ("--method",), list, "sympy,fd,complex", "which methods to compare with (default: all)"),
    Declared("rtol", ("--rtol",), float, "R", "relative tolerance (default: from the dtype)", None, True),
    Declared("atol", ("--atol",), float, "A", "absolute tolerance (default: from the dtype)", None, True),
    Declared("seed", ("--seed",), str, "V|ones", "check v^T J when the output is not a scalar"),
    Declared("blame", ("--blame",), bool, None, "check every node's own derivative; name the first wrong one", False),
    SYMPY_TIMEOUT,
    DIGITS,
    Declared("points", ("--points",), str, "DATA", "check at every row of a data set (fd, complex step: batched)"),
    CHUNK_ROWS,
    Declared(
        "directions",
        ("--directions",),
        str,
        "K|elementwise",
        "check along K random directions, then element by element only where one disagrees; or every element "
        "alone (default: 8 directions above 512 input elements, else elementwise)",
    ),  # fmt: skip
    *CASES,
)


def given_value(given: Given, row: Declared) -> bool:
    """Whether the command line gave option ``row`` a value other than its default."""
    value = getattr(given, row.parameter)
    return value != row.default and value != [] if row.kind is not bool else value is not row.default


#: what a check of one program takes and --cases does not (its cases name their own)
ONE_CHECK = tuple(row for row in CHECK if row not in CASES and row not in (JSON, SYMPY_TIMEOUT, DIGITS))

PLOT = (
    EXPR,
    AT,
    Declared("wrt", ("--wrt",), list, "NAME,...", "the one or two variables to plot (default: those without --at)"),
    Declared("as_json", ("--json",), bool, None, "the plotted values as one JSON document (no picture needed)", False),
    FILE,
    PYTHON,
    FRAMEWORK,
    Declared("ranges", ("--range",), list, "[NAME=]A,B", "the axis from A to B, or one variable's (default: -5,5)"),
    Declared("order", ("--order",), int, "1|2", "2: also f″ (one variable)", 1, True),
    Declared(
        "out", ("-o", "--output"), str, "FILE", "write a picture: .png, .svg or .pdf (else drawn on the terminal)"
    ),
)

WHY = (*PROGRAM,)

#: every command that reads a program, by name: its rows in the order ``--help`` lists them
COMMANDS: dict[str, tuple[Declared, ...]] = {
    "eval": EVAL,
    "diff": DIFF,
    "graph": GRAPH,
    "jacobian": JACOBIAN,
    "hessian": HESSIAN,
    "check": CHECK,
    "plot": PLOT,
    "why": WHY,
}


#: Characters of an expression that no option or file name given after ``-f``/``-o`` holds.
EXPRESSION_CHARS = frozenset("()^*+[], ")


def dash_expression(arg: str, options: dict[str, bool]) -> bool:
    """Whether ``arg``, starting with '-', is an expression (``-x^2``, ``-sin(x)``, ``-1*x``) rather
    than an option: not an option the command knows (``options``: name -> takes a value), nor one
    with its value attached (``-fprog.txt``). A long ``--name`` is always an option, so that a
    mistyped one (``--att``) is reported with a suggestion."""
    if not arg.startswith("-") or arg == "-" or arg.startswith("--"):
        return False
    if arg.partition("=")[0] in options:
        return False
    attached = options.get(arg[:2], False) and not EXPRESSION_CHARS.intersection(arg)  # -fprog.txt
    return not attached


def json_requested(args: list[str]) -> bool:
    """``--json`` among the options (not after ``--``, where it would be the expression)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def option_table(rows: tuple[Declared, ...]) -> dict[str, tuple[str, type]]:
    """``{"--at": ("at", list), "-f": ("file", str), ...}``: every name of every option of ``rows``."""
    return {name: (row.parameter, row.kind) for row in rows for name in row.names}


def defaults(rows: tuple[Declared, ...]) -> dict[str, Any]:
    """Each parameter's value when its option is not given (a repeatable one: a new empty list)."""
    return {row.parameter: [] if row.kind is list else row.default for row in rows}
