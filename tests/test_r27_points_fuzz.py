"""The fuzzers run the roads added in the last round (issue 27, "the net that keeps them out").

``test_points_fuzz.py`` holds the batched evaluator to ``eval --at`` point by point. Here the same random
expressions (``test_random_expressions``' generator) go down the roads that meet it:

- **chunks**: the rows cut into pieces of 1, 2 and 3 and evaluated piece by piece, as ``--chunk-rows`` reads them,
  give the bits of one batch;
- **threads**: many expressions evaluated at once on a thread pool give the bits of the same evaluations run one
  after another (grad mode, anomaly mode and the evaluator's caches are per thread; a race shows up as a zero or
  missing gradient in some job, so every round is repeated);
- **the command line**: random points files (CSV cells that are numbers, text, blanks, huge integers, NaN and
  infinities; columns that clash with ``--at``, repeat, or are missing) with random options (``--chunk-rows``,
  ``--keep-columns``, ``-o`` in every format) answer with a documented exit code, one ``error:`` line and no
  traceback; and when the run fails, the old ``-o`` file is still there, byte for byte, with nothing beside it.

``GRADCLI_POINTS_FUZZ=N`` runs N expressions instead of 120 (nightly-sized runs).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import fuzz, well_behaved
from test_random_expressions import SPREAD, VARIABLES, draw

from gradcli.lang.compute.points import evaluate_points
from gradcli.lang.program import load

COUNT = int(os.environ.get("GRADCLI_POINTS_FUZZ", "120"))
ROWS = 6


def cases(start: int, count: int) -> list[tuple[str, dict[str, np.ndarray], dict[str, object], list[str]]]:
    """Random expressions with at least one scalar variable, their columns of ROWS points and shared values."""
    rng = np.random.default_rng(start)
    found = []
    for seed in range(start, start + count):
        case = draw(9_100_001 + seed)
        columns = {
            n: np.concatenate([[case.values[n]], rng.uniform(-SPREAD, SPREAD, ROWS - 1)])
            for n in case.expr.variables
            if VARIABLES[n] == ()
        }
        if columns:
            shared = {n: v for n, v in case.values.items() if n not in columns}
            found.append((case.expr.text, columns, shared, list(case.expr.variables)))
    return found


def run(text: str, columns: dict[str, np.ndarray], shared: dict[str, object], wrt: list[str], offset: int = 0):
    names, result = evaluate_points(load(text), columns, shared, wrt, None, offset)
    return [np.asarray(result.value)] + [np.asarray(result.gradient[n]) for n in names]


def same_bits(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    return len(got) == len(want) and all(
        a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want)
    )


@pytest.mark.parametrize("size", [1, 2, 3])
def test_random_expressions_in_chunks_give_one_batch_bits(size: int) -> None:
    tried = 0
    for text, columns, shared, wrt in cases(0, COUNT):
        whole = run(text, columns, shared, wrt)
        pieces = [
            run(text, {n: c[i : i + size] for n, c in columns.items()}, shared, wrt, offset=i)
            for i in range(0, ROWS, size)
        ]
        joined = [np.concatenate([p[k] for p in pieces]) for k in range(len(whole))]
        assert same_bits(joined, whole), (text, size)
        tried += 1
    assert tried > COUNT // 3


@pytest.mark.parametrize("round_", range(3))
def test_random_expressions_on_a_thread_pool_give_one_thread_bits(round_: int) -> None:
    work = cases(1000 * (round_ + 1), COUNT // 2)
    want = [run(*case) for case in work]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):  # a race is caught by repeating, not hoped away
            got = list(pool.map(lambda case: run(*case), work))
            bad = [case[0] for case, g, w in zip(work, got, want) if not same_bits(g, w)]
            assert not bad, f"{len(bad)} of {len(work)} jobs differ on the pool, e.g. {bad[:3]}"


# --- the command line: random points files and options ---------------------------------------------------------------

GOOD = ["1", "-2.5", "0", "3e2", "0.25", "7", "-0.5", "2"]
BAD = [
    "1e308", "-1e308", "1e400", "nan", "NaN", "inf", "-inf", "", " ", "x", "1,5", '"2"', "9007199254740993",
    "18446744073709551615", "-9223372036854775808", "0x10", "1_000", "١", "½", "true",
]  # fmt: skip
HEADERS = ["x", "w", "y", "v", "value", "grad_x", "x ", "", "θ", "x,w"]
EXPRESSIONS = ["(x + w) * (w + 1)", "x * w", "sin(x) + y^2", "sum(v * x)", "x / w", "log(x)", "x"]
OUTPUTS = ["out.csv", "out.parquet", "out.arrow", "out.feather", "out.txt"]  # and now and then one of ODD_OUTPUTS
ODD_OUTPUTS = [None, "out.jsonl", "out.xlsx", "out"]


@st.composite
def points_files(draw) -> tuple[str, list[str]]:
    """Mostly good files (columns x and w, numbers) with now and then a bad header or a bad cell in a later row,
    so that the run fails after some output was written; returns the text and its header."""
    header = ["x", "w"] if draw(st.integers(0, 3)) else draw(st.lists(st.sampled_from(HEADERS), min_size=1, max_size=4))
    rows = [[draw(st.sampled_from(GOOD)) for _ in header] for _ in range(draw(st.integers(0, 6)))]
    for _ in range(draw(st.integers(0, 2))):
        if rows:
            rows[draw(st.integers(0, len(rows) - 1))][draw(st.integers(0, len(header) - 1))] = draw(
                st.sampled_from(BAD)
            )
    if rows and draw(st.integers(0, 5)) == 0:  # a ragged row
        rows[-1] = rows[-1][:-1] or ["1", "2"]
    quote = draw(st.integers(0, 5)) == 0
    cell = (lambda c: '"' + c.replace('"', '""') + '"') if quote else (lambda c: c)
    return "\n".join(",".join(cell(c) for c in line) for line in [header, *rows]) + "\n", header


@st.composite
def points_args(draw) -> tuple[list[str], str | None, str | None]:
    """The arguments, the -o file name (or None) and the variable --at gives (or None)."""
    args = ["eval", draw(st.sampled_from(EXPRESSIONS))]
    at = None
    if draw(st.integers(0, 2)) == 0:
        given = draw(st.sampled_from(["w=2", "w=100", "x=1", "y=0.5", "v=[1,2]", "y=nan", "q=1", "w=1,w=2"]))
        args += ["--at", given]
        at = given.split("=")[0]
    if draw(st.booleans()):
        rows = ["1", "1", "1", "2", "2", "0", "-1", "99999999999999999999", "1.5", "x"]
        args += ["--chunk-rows", draw(st.sampled_from(rows))]
    if draw(st.integers(0, 3)) == 0:
        args.append("--keep-columns")
    out = draw(st.sampled_from(OUTPUTS)) if draw(st.integers(0, 4)) else draw(st.sampled_from(ODD_OUTPUTS))
    if out in (None, "out.jsonl") and draw(st.booleans()):
        args.append("--json")
    if draw(st.integers(0, 4)) == 0:
        args += ["--wrt", draw(st.sampled_from(["x", "w", "x,w", "q", ""]))]
    return args, out, at


OLD = b"the old file, which a failed run must leave as it was\n"


@fuzz(120)
@given(points_files(), points_args())
def test_random_points_files_and_options(tmp_path_factory: pytest.TempPathFactory, file, call) -> None:
    pytest.importorskip("pyarrow", reason="-o .parquet/.arrow and fast CSV need pyarrow (the scale extra)")
    text, header = file
    args, out, at = call
    folder: Path = tmp_path_factory.mktemp("points-fuzz")
    data = folder / "points.csv"
    data.write_text(text, encoding="utf-8")
    args = [*args, "--points", str(data)]
    target = None
    if out is not None:
        target = folder / out
        target.write_bytes(OLD)
        args += ["-o", str(target)]
    result = well_behaved(args, codes=(0, 1, 2))
    if at is not None and at in header:
        assert result.exit_code == 2, f"--at {at} and a column {at} of the file: refused, not one taken silently"
    assert data.read_text(encoding="utf-8") == text, "the input file changed"
    if target is not None:
        beside = sorted(p.name for p in folder.iterdir() if p.name not in {data.name, target.name})
        assert not beside, f"left beside the output: {beside}"
        if result.exit_code != 0:
            assert target.read_bytes() == OLD, f"a failed run (exit {result.exit_code}) changed the old -o file"
