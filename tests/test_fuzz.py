"""Fuzzing: random and mutated text to the parser and to every command (issue 8).

Whatever the input, gradcli must answer with a documented exit code (0 done,
1 a check failed, 2 bad input, 3 a missing program), never a traceback nor an
internal error (exit 70), never hang, and explain bad input in one clear
message on stderr (for a syntax error: the message, the source line and a
caret). The strategies mutate real expressions (insertions, deletions, swaps,
duplications of characters) and draw random ``--at`` strings (NaN, infinities,
huge numbers, empty, unicode, unbalanced or deep brackets, very long values).

Hypothesis runs derandomized (conftest's "ci" profile; no example database), so
CI sees the same examples every run; ``GRADCLI_HYPOTHESIS=explore`` searches new
ones. The nastiest inputs found are kept in ``fuzz_corpus.txt`` and replayed as
regression tests; the bugs not fixed yet are ``KNOWN_BUGS`` below, marked
``xfail(strict=True)`` so that they flip when fixed. While a known bug is
present, the random strategies steer around it (``_steer``), so that each
fuzzer keeps looking for new problems instead of finding the same one again.
"""

from __future__ import annotations

import _thread
import json
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app, command_names
from gradcli.errors import GradcliError, SyntaxProblem, UsageError
from gradcli.lang.parser import parse
from gradcli.lang.values import assignments

runner = CliRunner()
HERE = Path(__file__).resolve().parent
CORPUS = HERE / "fuzz_corpus.txt"
LIMIT = 20.0  # seconds: an in-process command taking longer is reported as a hang


def fuzz(max_examples: int):
    """Modest, deterministic budgets: the whole file runs in well under a minute.

    ``GRADCLI_HYPOTHESIS=explore`` searches for new examples instead (random, ten times as many)."""
    explore = os.environ.get("GRADCLI_HYPOTHESIS") == "explore"
    return settings(
        max_examples=max_examples * (10 if explore else 1),
        deadline=None,
        derandomize=not explore,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


# --- inputs ---------------------------------------------------------------------------------------

SEEDS = [
    "(x + w) * (w + 1)",
    "sum(sin(v)*exp(-v^2))",
    "a = x*y; b = a + 1; b^2",
    "[[1,2],[3,4]] @ v",
    "x^2 * sin(x)",
    "log(x, 2) + sqrt(abs(y))",
    "x if x > 0 else -x",
    "v[1:] - v[:-1]",
    "x * y, x + y",
    "max(v) + min(x, y)",
    "dot(v, v) / norm(v)",
    "atan2(y, x) + logsumexp(v)",
    "sum(where(v > 0, v, 0))",
    "relu(x) + sigmoid(y) + softplus(w)",
    "-x^2 ** 3",
    "2^3^2 * x",
    "θ = x * 2  # a comment\ny = θ + 1",
    "mean(v) * prod(v)",
    "tanh(x) / cosh(w) - erf(y)",
    "v[0] * v[-1] + v[::2][0]",
    "detach(x) * x",
    "log2(x) + log10(x) + log1p(x) + expm1(x)",
    "asin(x/9) + acos(y/9) + atan(w)",
    "sign(x) * abs(x)",
    "1e-3 * x + .5 * y",
    "[x, y] @ [[1,2],[3,4]] @ [w, x]",
    "norm(v - 1)",
]
# Pieces a mutation inserts: the language's own characters and words, and trouble.
PIECES = list("()[]{},;:=+-*/^@<>!.eE0123456789 \n\t#_xvwyθ$'\"\\`") + [
    "**", "==", "<=", "!=", "if", "else", "sin(", "sum(", "[[", "]]", "1e308", "nan", "inf", "\r", "\x00",
    "\u2028", "\xa0", "\u3000", "\x1c", "²", "٣", "\ufeff", "e-", ".5.", ":-1]", "--",
]  # fmt: skip
VALUES = [
    "1", "2", "-1.5", "0", "-0", "0.5", "3", "1e-8", "[1,2,3]", "[0.5,-1,2]", "[[1,2],[3,4]]", "pi/4", "2^-3",
    "nan", "inf", "-inf", "1e308", "-1e308", "1e999", "5e-324", "1e-400", "1/0", "0/0", "2^1024", "", " ", "[", "]",
    "[1,", "((1", "[[1,2],[3]]", "[]", "θ", "٣", "\u2028", "\xa0", "x", "1=2", "[1;2]", "1,2", "-(-(1))",
    "[" * 60 + "1" + "]" * 60, "(" * 300 + "1" + ")" * 300, "1" * 400, "[" + ",".join(["1"] * 2000) + "]",
]  # fmt: skip
NAMES = ["x", "y", "w", "v", "a", "θ"]


def _lexer_bug(text: str) -> bool:
    try:
        parse(text)
    except GradcliError:
        return False
    except Exception:
        return True
    return False


# Known bugs (see KNOWN_BUGS) that the random strategies steer around while they are present.
_UNICODE_SPACE_BUG = _lexer_bug("x\u2028")  # str.isspace() characters outside [ \t\r\f\v]: StopIteration
_SUPERSCRIPT_BUG = _lexer_bug("²x")  # \w characters that are neither letters, digits nor '_': ValueError


def _steer(text: str) -> str:
    """``text`` with the characters of known, not yet fixed lexer bugs replaced by spaces."""
    if _UNICODE_SPACE_BUG:
        text = "".join(" " if ch.isspace() and ch not in " \t\r\n\f\v" else ch for ch in text)
    if _SUPERSCRIPT_BUG:
        text = "".join(" " if ch.isdigit() and not re.match(r"\d", ch) else ch for ch in text)
    return text


@st.composite
def mutated(draw, seeds: list[str] = SEEDS, edits: int = 5) -> str:
    """A real expression with one to ``edits`` random edits."""
    chars = list(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, edits))):
        edit = draw(st.sampled_from(["insert", "insert", "delete", "swap", "duplicate", "unicode"]))
        i = draw(st.integers(0, len(chars)))
        if edit == "insert" or not chars:
            chars[i:i] = draw(st.sampled_from(PIECES))
        elif edit == "unicode":
            chars[i:i] = draw(st.characters(codec="utf-8"))
        elif edit == "delete":
            del chars[min(i, len(chars) - 1)]
        elif edit == "swap" and len(chars) > 1:
            j = min(i, len(chars) - 2)
            chars[j], chars[j + 1] = chars[j + 1], chars[j]
        else:
            j = draw(st.integers(0, len(chars)))
            chars[i:i] = chars[j : j + draw(st.integers(1, 8))]
    return "".join(chars)


random_text = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(max_size=30),
)
# Valid expressions, lightly and heavily mutated ones, and noise: every layer of gradcli gets its share.
expressions = st.one_of(st.sampled_from(SEEDS), mutated(edits=1), mutated(edits=1), mutated(), random_text).map(_steer)

SCALARS = ["1", "2", "-1.5", "0.5", "3", "0", "-0", "1e-8", "-1e5", "pi/4", "2^-3", "1e308", "5e-324", "1e-300"]
VECTORS = ["[1,2]", "[1,2,3]", "[0.5,-1,2]", "[0,0,0]", "[1e308,1,1]", "[[1,2],[3,4]]"]


@st.composite
def at_strings(draw) -> str:
    """A ``--at`` string: mostly a sensible point for the usual names, sometimes nasty values or mangled."""
    kind = draw(st.integers(0, 9))
    if kind < 6:  # a point that fits the seeds: scalars, and a vector v
        items = [f"{n}={draw(st.sampled_from(VECTORS if n == 'v' else SCALARS))}" for n in NAMES
                 if draw(st.integers(0, 9))]  # fmt: skip
    else:
        items = [f"{n}={draw(st.sampled_from(VALUES + SCALARS))}" for n in NAMES if draw(st.booleans())]
    text = ",".join(items)
    if kind == 9:
        text = draw(mutated([text or "x=1"]))
    return _steer(text)


# --- what every answer must satisfy ---------------------------------------------------------------


def _interrupt_main() -> None:
    _thread.interrupt_main()  # gradcli reports KeyboardInterrupt as "interrupted", exit 130


def invoke(args: list[str], stdin: str | None = None, limit: float = LIMIT):
    """Run ``gradcli ARGS`` in-process; a run longer than ``limit`` seconds is interrupted (exit 130)."""
    timer = threading.Timer(limit, _interrupt_main)
    start = time.perf_counter()
    timer.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = runner.invoke(app, expression_after_dashes(list(args)), input=stdin)
    finally:
        timer.cancel()
    return result, [w for w in caught], time.perf_counter() - start


def well_behaved(args: list[str], stdin: str | None = None, codes: tuple[int, ...] = (0, 2)):
    """Run the command and check the contract; return the result."""
    result, caught, seconds = invoke(args, stdin)
    out, err = result.stdout, result.stderr
    shown = (
        f"gradcli {args!r}\nexit {result.exit_code} after {seconds:.1f} s\nstdout: {out[:500]!r}\nstderr: {err[:800]!r}"
    )
    assert result.exit_code != 130, "hang: " + shown
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{type(result.exception).__name__} escaped: {shown}") from result.exception
    assert "Traceback" not in out + err, shown
    assert "internal error" not in out + err, shown
    assert result.exit_code in codes, shown
    assert not caught, f"Python warnings reach the user ({[str(w.message) for w in caught]}): {shown}"
    if result.exit_code == 2:
        assert err.strip(), "exit 2 without a message: " + shown
        lines = err.rstrip("\n").split("\n")
        assert lines[0].startswith("error: ") and len(lines[0]) < 2000, shown
        if len(lines) > 1:  # a syntax error: the message, the source line, a caret under the column
            assert len(lines) == 3 and lines[1].startswith("  ") and set(lines[2].strip()) == {"^"}, shown
            assert len(lines[2]) <= len(lines[1]) + 1, "caret beyond the line: " + shown
    return result


def rendered_ok(problem: GradcliError) -> None:
    """A parse error is one line, or for a syntax error the line, the source and a caret."""
    text = problem.render()
    lines = text.split("\n")
    assert lines[0].startswith("error: ") and problem.message.strip(), text
    assert "\n" not in problem.message, text
    if isinstance(problem, SyntaxProblem):
        assert len(lines) == 3, text
        assert lines[1].startswith("  ") and lines[2].strip() == "^", text
        assert lines[2].index("^") <= len(lines[1]), text
    else:
        assert len(lines) == 1, text


# --- the parser -----------------------------------------------------------------------------------


def _parse_or_clean_error(text: str) -> None:
    try:
        parse(text)
    except (UsageError, SyntaxProblem) as problem:
        rendered_ok(problem)


@fuzz(300)
@given(random_text.map(_steer))
def test_parser_random_text(text):
    _parse_or_clean_error(text)


@fuzz(400)
@given(mutated().map(_steer))
def test_parser_mutated_expressions(text):
    _parse_or_clean_error(text)


@fuzz(60)
@given(mutated().map(_steer), st.integers(1, 400))
def test_parser_deep_nesting_and_long_lines(text, n):
    for wrapped in ("(" * n + text + ")" * n, "[" * n + text + "]" * n, "-" * n + text, text + "^x" * n, text * n):
        _parse_or_clean_error(wrapped)


@fuzz(200)
@given(at_strings())
def test_at_values_are_read_or_refused_clearly(text):
    try:
        assignments([text])
    except (UsageError, SyntaxProblem) as problem:
        rendered_ok(problem)


# --- every command ----------------------------------------------------------------------------------


def _common(draw, command: str) -> list[str]:
    args = [command]
    if draw(st.integers(0, 9)):
        args.append("--at=" + draw(at_strings()))
    if draw(st.integers(0, 4)) == 0:
        args.append("--wrt=" + draw(st.sampled_from(["x", "x,y", "v", "θ", "", ",", "q", "1x", "x,x", "pi"])))
    if draw(st.booleans()):
        args.append("--json")
    return args


@st.composite
def eval_args(draw) -> list[str]:
    args = _common(draw, "eval")
    if draw(st.integers(0, 3)) == 0:
        args.append(
            "--seed=" + _steer(draw(st.sampled_from(["ones", "[1,2]", "1", "nan", "", "[[1]]", "y", "[1,2,3]"])))
        )
    return [*args, "--", draw(expressions)]


@fuzz(150)
@given(eval_args())
def test_eval(args):
    well_behaved(args)


@st.composite
def graph_args(draw, tmp: str) -> list[str]:
    args = _common(draw, "graph")
    target = draw(
        st.sampled_from(["tree", "text", "dot", "json", "out.dot", "out.svg", "out.json", "out.txt", "x.bogus"])
    )
    if "." in target:
        args += ["-o", os.path.join(tmp, target)]
    else:
        args.append("--format=" + target)
    if draw(st.integers(0, 4)) == 0:
        args.append("--highlight=" + draw(st.sampled_from(["x", "w", "q", "", "1x"])))
    if draw(st.integers(0, 4)) == 0:
        args.append("--max-nodes=" + draw(st.sampled_from(["1", "2", "0", "-1", "100000"])))
    if draw(st.integers(0, 6)) == 0:
        args.append("--seed=" + draw(st.sampled_from(["ones", "[1,2]", "1"])))
    return [*args, "--", draw(expressions)]


@fuzz(80)
@given(st.data())
def test_graph(tmp_path_factory, data):
    tmp = str(tmp_path_factory.getbasetemp())
    well_behaved(data.draw(graph_args(tmp)), codes=(0, 2, 3))


@st.composite
def matrix_args(draw, command: str) -> list[str]:
    args = _common(draw, command)
    if draw(st.integers(0, 3)) == 0:
        args.append("--explain")
    if command == "jacobian" and draw(st.integers(0, 3)) == 0:
        args.append("--mode=" + draw(st.sampled_from(["forward", "reverse", "auto", "sideways"])))
    return [*args, "--", draw(expressions)]


# Known bug: 'jacobian' with no inputs is an internal error; steer around it while it is present.
_JACOBIAN_NO_INPUT_BUG = runner.invoke(app, ["jacobian", "--json", "--", "71"]).exit_code == 70
_DEEP_ARRAY = "[" * 33 + "1" + "]" * 33


def _matrix_ok(args: list[str]) -> None:
    if _JACOBIAN_NO_INPUT_BUG and args[0] == "jacobian":
        assume(any(a.startswith("--at=") and "=" in a[5:] for a in args))
    if _DEEP_ARRAY in "".join(args):
        assume(False)  # known bug: arrays of 33+ dimensions (KNOWN_BUGS)
    well_behaved(args)


@fuzz(80)
@given(matrix_args("jacobian"))
def test_jacobian(args):
    _matrix_ok(args)


@fuzz(80)
@given(matrix_args("hessian"))
def test_hessian(args):
    _matrix_ok(args)


# SymPy can be made to compute for ever (9^9^9, (x+1)^100000: see KNOWN_BUGS); in-process the C
# code of a big power cannot be interrupted, so the diff and check fuzzers avoid big exponents.
_BIG_POWER = re.compile(r"(\^|\*\*)[\s(+\-]*(\d{3,}|\d*\.?\d+[eE]|\d+\s*(\^|\*\*))|[\d.]\s*\)*\s*(\^|\*\*)")


@st.composite
def diff_args(draw) -> list[str]:
    args = _common(draw, "diff")
    if draw(st.booleans()):
        args.append("--latex")
    expression = draw(expressions)
    assume(not _BIG_POWER.search(expression) and len(re.findall(r"\d{5,}", expression)) == 0)
    return [*args, "--", expression]


@fuzz(50)
@given(diff_args())
def test_diff(args):
    well_behaved(args)


@st.composite
def check_args(draw) -> list[str]:
    args = _common(draw, "check")
    args.append("--sympy-timeout=2")
    if draw(st.integers(0, 2)) == 0:
        args.append(
            "--expect=" + _steer(draw(st.sampled_from(["x=2*x", "x=", "=1", "q=1", "x=sin(", "x=y", "x=1,y=2"])))
        )
    if draw(st.integers(0, 5)) == 0:
        args.append("--method=" + draw(st.sampled_from(["fd", "sympy", "complex", "sympy,fd", "bogus", ""])))
    if draw(st.integers(0, 5)) == 0:
        args.append(draw(st.sampled_from(["--rtol=1e-3", "--atol=0", "--rtol=-1", "--atol=nan", "--seed=ones"])))
    expression = draw(expressions)
    assume(not _BIG_POWER.search(expression))
    return [*args, "--", expression]


@fuzz(50)
@given(check_args())
def test_check(args):
    if _DEEP_ARRAY in "".join(args):
        assume(False)
    well_behaved(args, codes=(0, 1, 2))


@fuzz(40)
@given(st.sampled_from(command_names()), expressions)
def test_expressions_from_a_file_and_from_stdin(tmp_path_factory, command, text):
    path = tmp_path_factory.getbasetemp() / "program.gc"
    path.write_text(text, encoding="utf-8")
    assume(command not in ("diff", "check") or not _BIG_POWER.search(text))
    extra = ["--at=x=1,y=2,w=0.5,v=[1,2,3],θ=1", "--sympy-timeout=2"] if command == "check" else ["--at=x=1,y=2"]
    if command == "ops":
        well_behaved(["ops"])
        return
    codes = (0, 1, 2) if command == "check" else (0, 2)
    if _JACOBIAN_NO_INPUT_BUG and command == "jacobian":
        extra = ["--at=x=1,y=2,w=0.5,v=[1,2,3],θ=1"]
    well_behaved([command, *extra, "-f", str(path)], codes=codes)
    well_behaved([command, *extra, "-"], stdin=text, codes=codes)


@fuzz(40)
@given(
    st.sampled_from(command_names()),
    st.lists(
        st.sampled_from(
            [
                "--at",
                "--wrt",
                "--json",
                "--seed",
                "--points",
                "--format",
                "-o",
                "--max-nodes",
                "--mode",
                "--expect",
                "--rtol",
                "--method",
                "--latex",
                "--explain",
                "--blame",
                "--bogus",
                "-f",
                "-",
                "--",
                "-h",
                "x",
                "x=1",
                "-x^2",
                "abc",
                "",
                "1e999",
                "--at=",
                "--max-nodes=abc",
            ]
        ),  # fmt: skip
        max_size=6,
    ),
)
def test_option_soup(command, words):
    """Random option words: click's usage errors ("Usage: ... Error: ...") are allowed here, and only here."""
    assume("-f" not in words or "-" not in words)  # stdin
    assume("--points" not in words and "-o" not in words)  # would read or write files named like options
    result, caught, _ = invoke([command, *words, "--sympy-timeout=2"] if command == "check" else [command, *words])
    text = result.stdout + result.stderr
    assert result.exit_code in (0, 1, 2), text
    assert "Traceback" not in text and "internal error" not in text, text
    if result.exit_code == 2:
        first = result.stderr.lstrip().split("\n")[0]
        assert first.startswith(("error: ", "Usage: ", "Error: ")), result.stderr


@fuzz(30)
@given(
    st.lists(
        st.lists(st.sampled_from(["1", "-2.5", "nan", "inf", "1e999", "", " ", "x", "[1]", '"1"', "1e-400", "٣"]),
                 min_size=1, max_size=3),
        max_size=5,
    ),
    st.sampled_from(["x,y", "x", "x,x", "", "if", "x;y", "\ufeffx,y", "x, y ", "1x"]),
    st.sampled_from(["x*y", "x", "sum(x)", "x, y", "3", "x if x > 0 else y", "x[0]"]),
)  # fmt: skip
def test_points_files(tmp_path_factory, rows, header, expression):
    path = tmp_path_factory.getbasetemp() / "points.csv"
    path.write_text(header + "\n" + "\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
    well_behaved(["eval", "--points", str(path), "--", expression])
    well_behaved(["eval", "--points", str(path), "--json", "--", expression])


# --- the corpus: the nastiest inputs found, each with its exit code and a piece of its message -----------


def _corpus() -> list[tuple[list[str], int, str, str]]:
    """``fuzz_corpus.txt``: one JSON object a line: args, code, message fragment, where to look."""
    cases = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            case = json.loads(line)
            cases.append((case["args"], case["code"], case.get("message", ""), case.get("stream", "stderr")))
    return cases


CASES = _corpus()


@pytest.mark.parametrize("args,code,fragment,stream", CASES, ids=[repr(" ".join(c[0]))[:70] for c in CASES])
def test_corpus(args, code, fragment, stream):
    result = well_behaved(args, codes=(code,))
    assert fragment in getattr(result, stream), getattr(result, stream)


# --- bugs the fuzzers found (all fixed): each now a clear error -----------------------------------------------------

KNOWN_BUGS = [
    # (args, why)
    (["eval", "--at=x=1", "--", "x\u2028+ 1"], "lexer: unicode white space (U+2028) raises StopIteration"),
    (["eval", "--at=x=1", "--", "x +\xa01"], "lexer: a no-break space raises StopIteration"),
    (["eval", "--at=x=1", "--", "x\x1c"], "lexer: U+001C (isspace) raises StopIteration"),
    (["eval", "--at=x=1", "--", "²x"], "lexer: '²' starts a token that is neither name nor number: ValueError"),
    (["jacobian", "--", "71"], "jacobian of a program without inputs: ValueError (concatenate)"),
    (["jacobian", "--", "x = 1"], "jacobian of a program without inputs: ValueError (concatenate)"),
    (["jacobian", f"--at=x={_DEEP_ARRAY}", "--", "x"], "jacobian of a 33-dimensional input: NumPy's 64-dim limit"),
    (["hessian", f"--at=x={_DEEP_ARRAY}", "--", "sum(x)"], "hessian of a 33-dimensional input: NumPy's limit"),
    (["check", f"--at=x={_DEEP_ARRAY}", "--blame", "--", "sin(x)"], "check --blame at 33 dims: NumPy's 32-dim limit"),
    (["diff", "--", "10^5000 * x"], "diff: SymPy integer of more than 4300 digits, printed: ValueError"),
    (["diff", "--json", "--", "2^3^3^2 * x"], "diff: SymPy integer of more than 4300 digits, printed: ValueError"),
    (["check", "--at=x=1", "--sympy-timeout=1e10", "--", "x"], "check: a long --sympy-timeout overflows setitimer"),
    (["graph", "--at=x=1", "--highlight=1x", "--", "x"], "--highlight's bad name is reported as a --wrt error"),
]


@pytest.mark.parametrize("args,why", KNOWN_BUGS, ids=[why[:60] for _, why in KNOWN_BUGS])
def test_bugs_found_stay_fixed(args, why):
    if "--sympy-timeout=1e10" in args:  # a limit too long for the timer: no limit
        result = well_behaved(args, codes=(0,))
        assert "OverflowError" not in result.stdout and "skipped" not in result.stdout, result.stdout
        return
    result = well_behaved(args, codes=(2,))
    assert result.stderr.startswith("error: "), result.stderr
    if "--highlight=1x" in args:
        assert result.stderr == "error: --highlight: '1x' is not a name\n"


# --- hangs and memory: real processes with a time limit ---------------------------------------------------------


def _gradcli(args: list[str], timeout: float, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("GRADCLI_DEBUG", None)
    try:
        return subprocess.run(
            [sys.executable, "-m", "gradcli", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"gradcli {' '.join(a[:60] for a in args)} did not finish in {timeout} s")


TIMED = [
    (["eval", "9^9^9^9"], 0, "inf"),
    (["eval", "--at=x=2", "--", "x^1e308"], 0, "inf"),
    (["eval", "sum(ones(10^12))"], 2, "unknown function 'ones'"),
    (["check", "--at=x=1", "--sympy-timeout=1", "--", "x^9^9^9"], 1, "too large for exact arithmetic"),
    (["hessian", "--at=x=1", "--", "x^9^9^9"], 0, ""),
    (["graph", "--format=text", "9^9^9^9"], 0, ""),
]


@pytest.mark.parametrize("args,code,fragment", TIMED, ids=[" ".join(a)[:50] for a, _, _ in TIMED])
def test_nasty_inputs_finish(args, code, fragment):
    done = _gradcli(args, timeout=30)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr and fragment in done.stdout + done.stderr


def test_a_million_points_finish(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("x,y\n" + "0.5,2\n" * 1_000_000)
    done = _gradcli(["eval", "--points", str(path), "--", "x * y"], timeout=60)
    assert done.returncode == 0 and done.stdout.count("\n") == 1_000_001


HANGS = [
    (["diff", "9^9^9^9"], "diff computes the integer 9^387420489 with no time limit"),
    (["diff", "--sympy-timeout=3", "(x+1)^100000"], "diff of (x+1)^100000 runs for minutes, its memory growing"),
    (["diff", "--sympy-timeout=3", "-"], "diff of a 30-step DAG (a = sin(a)*cos(a)) swells exponentially"),
]
HANG_LIMIT = 30.0  # seconds for all three at once: a hang runs for minutes; 12 s was missed by start-up alone at load 10 on 2 cores


def test_diff_does_not_hang():
    dag = "\n".join(["a0 = x", *(f"a{i} = sin(a{i - 1})*cos(a{i - 1})" for i in range(1, 30))])
    env = {**os.environ, "NO_COLOR": "1"}
    running = [
        (subprocess.Popen([sys.executable, "-m", "gradcli", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env), args, why)
        for args, why in HANGS
    ]  # fmt: skip
    deadline = time.monotonic() + HANG_LIMIT
    slow = []
    for process, args, why in running:
        try:
            _, err = process.communicate(dag if args[-1] == "-" else "", timeout=max(0.1, deadline - time.monotonic()))
            assert process.returncode in (0, 2) and "Traceback" not in err, f"{args}: {err}"
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            slow.append(why)
    assert not slow, f"still running after {HANG_LIMIT} s: {slow}"


# --- issue 13's hunt: sizes against the limit, full disks, closed and full standard streams ---------------------
#
# Bounded for the suite (about 10 s together); GRADCLI_FUZZ_SCALE=N runs N times as many cases (nightly: 20).

FUZZ_SCALE = max(1, int(os.environ.get("GRADCLI_FUZZ_SCALE", "1") or "1"))


def _broadcast_forms() -> list[tuple[str, int]]:
    """Every form of the language whose arguments broadcast: (template, number of arguments)."""
    from gradcli.lang.functions import FUNCTIONS

    forms = [(f"{{0}} {op} {{1}}", 2) for op in ("+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=")]
    forms.append(("{0} if {1} else {2}", 3))
    for function in FUNCTIONS.values():
        for arity in function.elementwise:
            if arity >= 2:
                forms.append((f"{function.name}(" + ", ".join(f"{{{i}}}" for i in range(arity)) + ")", arity))
    return forms


BROADCAST_FORMS = _broadcast_forms()


@st.composite
def broadcasting_shapes(draw, count: int) -> list[tuple[int, ...]]:
    """``count`` shapes that broadcast together: each a copy of one target with some axes 1 or dropped."""
    target = draw(st.lists(st.integers(1, 40), min_size=0, max_size=3))
    shapes = []
    for _ in range(count):
        shape = [n if draw(st.integers(0, 2)) else 1 for n in target]
        shape = shape[draw(st.integers(0, len(shape))) :]  # leading axes may be missing
        shapes.append(tuple(shape))
    return shapes


@fuzz(100 * FUZZ_SCALE)
@given(st.sampled_from(BROADCAST_FORMS), st.data(), st.integers(1, 3000), st.sampled_from(["", "sum", "-"]))
def test_every_primitive_output_is_held_to_the_limit(form, data, limit, wrap):
    """Refused exactly when the broadcast result is over GRADCLI_MAX_ELEMENTS; otherwise it runs."""
    import numpy as np

    from gradcli.lang.evaluate import evaluate

    template, arity = form
    shapes = data.draw(broadcasting_shapes(arity))
    names = [f"a{i}" for i in range(arity)]
    values = {n: np.full(s, 0.5) for n, s in zip(names, shapes)}
    text = template.format(*names)
    text = {"": text, "sum": f"sum({text})", "-": f"-({text})"}[wrap]
    size = int(np.prod(np.broadcast_shapes(*shapes), dtype=np.int64))
    grows = size > max(int(np.prod(s, dtype=np.int64)) for s in shapes)  # a result no larger than a given value is not
    old = os.environ.get("GRADCLI_MAX_ELEMENTS")
    os.environ["GRADCLI_MAX_ELEMENTS"] = str(limit)
    try:
        with np.errstate(all="ignore"):
            (out,) = evaluate(parse(text), values).outputs
    except UsageError as problem:
        if "would have shape" not in problem.message:  # refused for another reason, after the size check
            assert size <= limit or not grows, f"{text} at {shapes}: {size} elements over {limit}, not refused for it"
            return
        assert size > limit and grows, f"{text} at {shapes}: refused at {size} <= {limit}: {problem.message}"
        assert f"{size:,} elements" in problem.message and f"limit of {limit:,}" in problem.message
    else:
        assert size <= limit or not grows, f"{text} at {shapes}: {size} elements made under a limit of {limit}"
        assert np.size(out._value) <= max(limit, max(np.size(v) for v in values.values()))
    finally:
        if old is None:
            os.environ.pop("GRADCLI_MAX_ELEMENTS", None)
        else:
            os.environ["GRADCLI_MAX_ELEMENTS"] = old


@fuzz(25 * FUZZ_SCALE)
@given(st.integers(2, 60), st.integers(1, 4000))
def test_stacking_is_held_to_the_limit(items, limit):
    import numpy as np

    from gradcli.lang.evaluate import evaluate

    text = "[" + ", ".join(["v"] * items) + "]"
    old = os.environ.get("GRADCLI_MAX_ELEMENTS")
    os.environ["GRADCLI_MAX_ELEMENTS"] = str(limit)
    try:
        evaluate(parse(text), {"v": np.ones(50)})
    except UsageError as problem:
        assert items * 50 > limit, problem.message
    else:
        assert items * 50 <= limit
    finally:
        if old is None:
            os.environ.pop("GRADCLI_MAX_ELEMENTS", None)
        else:
            os.environ["GRADCLI_MAX_ELEMENTS"] = old


def _output_formats() -> list[str]:
    import shutil

    from gradcli.render.output import BINARY, EXTENSIONS

    return [ext for ext, fmt in sorted(EXTENSIONS.items()) if fmt not in BINARY or shutil.which("dot")]


@fuzz(20 * FUZZ_SCALE)
@given(st.sampled_from(_output_formats()), st.integers(0, 3000), st.sampled_from(SEEDS[:8]))
def test_every_output_path_with_a_full_disk_keeps_the_old_file(tmp_path_factory, extension, room, expression):
    """Whatever the format and wherever the disk fills up, the old file stays whole and no temporary is left."""
    import errno

    from gradcli import files

    folder = tmp_path_factory.mktemp("full")
    target = folder / f"graph{extension}"
    target.write_bytes(b"old content\n")
    real = os.write
    written = [0]

    def write(fd, data):
        if written[0] >= room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, bytes(data[: room - written[0]]))
        written[0] += n
        return n

    files._write = write
    try:
        result = well_behaved(["graph", "--at=x=1,y=2,w=0.5,v=[1,2,3],θ=1", "-o", str(target), "--", expression])
    finally:
        files._write = real
    if result.exit_code == 2 and "No space left" in result.stderr:
        assert target.read_bytes() == b"old content\n"
    else:  # it fitted (or the expression was refused before writing)
        assert result.exit_code == 2 or target.read_bytes() != b"old content\n"
    assert sorted(p.name for p in folder.iterdir()) == [target.name], "a temporary file was left"


STREAM_COMMANDS = [
    ["eval", "x^2 + θ", "--at", "x=3,θ=1"],
    ["eval", "x^2 + θ", "--at", "x=3,θ=1", "--json"],
    ["diff", "x^2 * sin(x)"],
    ["graph", "x*y + 1", "--at", "x=1,y=2", "--format", "text"],
    ["jacobian", "x*y, x+y", "--at", "x=2,y=3"],
    ["hessian", "x^2*y", "--at", "x=2,y=3", "--json"],
    ["check", "x^2", "--at", "x=3"],
    ["check", "x^2", "--at", "x=3", "--expect", "x=3*x"],
    ["ops"],
    ["eval", "-", "--at", "x=1"],
]
STREAMS = {  # redirection -> the exit codes allowed, and what stderr must say when it is not 0 or 1
    "<&-": ((0, 1, 2), "standard input is closed"),
    ">&-": ((2,), "standard output is closed"),
    ">/dev/full": ((2,), "No space left on device"),
    "2>&-": ((0, 1), ""),
    "| head -c1": ((0, 1), ""),
    "ascii": ((0, 1, 2), "encoding (ascii) cannot show"),
}


def _stream_cases() -> list[tuple[list[str], str]]:
    import random

    cases = [(command, stream) for command in STREAM_COMMANDS for stream in STREAMS]
    if FUZZ_SCALE > 1:
        return cases
    return random.Random(13).sample(cases, 8)  # a fixed sample in the suite; every pair nightly


def test_closed_and_full_standard_streams():
    """Each command with each standard stream closed, full, cut short or unable to encode: a documented
    exit code, one ``error:`` line at most, never a traceback; the codes are those of a normal run."""
    import shlex
    import shutil

    if shutil.which("bash") is None or not os.path.exists("/dev/full"):
        pytest.skip("needs bash and /dev/full")
    program = shlex.join([sys.executable, "-m", "gradcli"])
    cases = _stream_cases()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRADCLI_")}
    running = []
    for command, stream in cases:
        line = f"{program} {shlex.join(command)}"
        extra = {}
        if stream == "ascii":
            extra = {"PYTHONIOENCODING": "ascii"}
        elif stream == "| head -c1":
            line += " | head -c1 >/dev/null; exit ${PIPESTATUS[0]}"
        else:
            line += f" {stream}"
        if command[-3:] == ["-", "--at", "x=1"] and stream != "<&-":
            line = f"echo 'x^2' | {line}" if stream != "| head -c1" else f"echo 'x^2' | {line}"
        running.append((command, stream, subprocess.Popen(["bash", "-c", line], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env={**env, **extra})))  # fmt: skip
    failures = []
    for command, stream, process in running:
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            failures.append(f"{command} {stream}: hang")
            continue
        codes, says = STREAMS[stream]
        code = process.returncode
        expected_code = 1 if command[-1] == "x=3*x" else 0  # check's mismatch is 1 when its verdict is written
        shown = f"{shlex.join(command)} {stream}: exit {code}, stderr {err[:300]!r}"
        if "Traceback" in err or "internal error" in err or code not in codes:
            failures.append(shown)
        elif code == 2:
            lines = err.splitlines()
            if len(lines) != 1 or not lines[0].startswith("error: ") or says not in lines[0]:
                failures.append(shown)
        elif stream in ("2>&-", "| head -c1") and code != expected_code and not (stream == "| head -c1" and code == 0):
            failures.append(shown)
    assert not failures, "\n".join(failures)


def test_every_output_format_on_a_really_full_disk(tmp_path):
    """A 64 KiB tmpfs filled to the last byte (where the test may mount one): every format fails
    with one line and exit 2, and the old file stays whole."""
    import errno
    import shutil
    import uuid

    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        targets = [folder / f"graph{extension}" for extension in _output_formats()]
        for target in targets:
            target.write_bytes(b"old content\n")
        with open(folder / "filler", "wb", buffering=0) as filler:  # every byte left
            try:
                while True:
                    filler.write(b"\0" * 512)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
        for target in targets:
            result = well_behaved(["graph", "--at=x=1,y=2", "-o", str(target), "--", "x*y + sin(x)"])
            assert result.exit_code == 2 and "No space left on device" in result.stderr, result.stderr
            assert target.read_bytes() == b"old content\n"
        assert sorted(p.name for p in folder.iterdir()) == sorted([t.name for t in targets] + ["filler"])
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


# --- graphs under --max-nodes, and control characters (issue 13) --------------------------------------

GRAPH_LEAVES = ["x", "y", "1", "2.5", "-3", "pi", "[1, 2, 3]", "[x, 1, 2]", "v"]


def _graph_expressions() -> st.SearchStrategy[str]:
    """Valid-looking expressions full of constants: sums, products, calls, stacks and statements."""

    def grow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(children, st.sampled_from(["+", "-", "*", "/", "^"]), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["sin", "exp", "sum", "abs", "tanh", "sqrt"]), children).map(lambda t: f"{t[0]}({t[1]})"),
            st.lists(children, min_size=1, max_size=6).map(lambda xs: f"sum([{', '.join(xs)}])"),
            st.lists(children, min_size=2, max_size=40).map(" + ".join),
        )  # fmt: skip

    body = st.recursive(st.sampled_from(GRAPH_LEAVES), grow, max_leaves=60)
    return st.one_of(body, st.tuples(body, body).map(lambda t: f"a = {t[0]}; b = a * {t[1]}; b + a"), body.map(
        lambda e: f"{e}, 3"))  # fmt: skip


@fuzz(60)
@given(_graph_expressions(), st.integers(1, 30), st.booleans())
def test_graph_never_shows_more_than_max_nodes(expression, cap, point):
    at = ["--at=x=0.5,y=2,v=[1,2,3]"] if point else []
    result = well_behaved(["graph", "--json", f"--max-nodes={cap}", *at, "--", expression])
    if result.exit_code != 0:
        return
    doc = json.loads(result.stdout)
    shown = [n for n in doc["nodes"] if n["kind"] != "hidden"]
    summaries = [n for n in doc["nodes"] if n["kind"] == "hidden"]
    outputs = len(doc["outputs"])
    assert len(shown) <= max(cap, outputs), (expression, cap, len(shown))  # the outputs are always shown
    assert len(summaries) == (1 if doc["hidden"] else 0)
    ids = {n["id"] for n in doc["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in doc["edges"])
    assert len({(e["target"], e["input"]) for e in doc["edges"]}) == len(doc["edges"])
    if not doc["hidden"]:  # nothing cut: the same graph as with no cap
        full = json.loads(well_behaved(["graph", "--json", "--max-nodes=100000", *at, "--", expression]).stdout)
        assert len(full["nodes"]) == len(doc["nodes"])


CONTROLS = [
    "\x1b",
    "\x1b[2J",
    "\r",
    "\x07",
    "\x08",
    "\x00",
    "\x7f",
    "\x9b",
    "\u202e",
    "\u2066",
    "\u200f",
    "\x1b]0;t\x07",
]
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")


@st.composite
def with_controls(draw) -> str:
    """A seed expression (or a comment after one) with control characters at random places."""
    chars = list(draw(st.sampled_from(SEEDS)))
    if draw(st.booleans()):
        chars += list("  # note ")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(chars)))
        chars[i:i] = draw(st.sampled_from(CONTROLS))
    return "".join(chars)


@fuzz(80)
@given(
    with_controls(),
    st.sampled_from(
        [
            ["eval"],
            ["graph", "--format=text"],
            ["graph", "--format=tree"],
            ["graph", "--format=dot"],
            ["diff"],
            ["jacobian"],
            ["check", "--method=fd"],
        ]
    ),  # fmt: skip
)
def test_control_characters_are_never_echoed_raw(expression, command):
    at = "--at=x=0.5,y=2,w=1,v=[1,2,3],θ=1"
    result, _, seconds = invoke([*command, at, "--", expression])
    shown = f"{command} {expression!r}: exit {result.exit_code}\n{result.stdout[:300]!r}\n{result.stderr[:500]!r}"
    assert result.exit_code in (0, 1, 2), shown
    assert not _RAW_CONTROL.search(result.stdout + result.stderr), shown
    assert "Traceback" not in result.stdout + result.stderr, shown
