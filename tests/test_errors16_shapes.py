"""Issue 16: NumPy's internals never reach the user. A shape error says, in gradcli's words, which
shapes met at which operator, with the caret under the operator (one place: evaluate.failure)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcli.errors import Source
from gradcli.lang import ast
from gradcli.lang.evaluate import failure
from gradcli.lang.parser import parse

INSTALLED = Path(sys.executable).with_name("gradcli")
GRADCLI = [str(INSTALLED)] if INSTALLED.exists() else [shutil.which("gradcli") or "gradcli"]
VALUES = {"A": "[[1,2,3],[4,5,6]]", "v": "[1,2]", "u": "[1,2,3]"}


def at(expression: str) -> str:
    """--at for the names the expression uses (one it does not use is a warning)."""
    import re

    used = set(re.findall(r"[A-Za-z_]\w*", expression))
    return ",".join(f"{name}={value}" for name, value in VALUES.items() if name in used)


LAST_AXES = "their last axes have sizes {} (from the right, sizes must be equal or 1)"

CASES = [
    (
        "sum(A @ A)",
        "'@' at column 7: shapes (2, 3) and (2, 3) do not match for @: "
        "the last axis of the left (3) must equal the first of the right (2)",
        6,
    ),
    (
        "v @ u",
        "'@' at column 3: shapes (2,) and (3,) do not match for @: "
        "the last axis of the left (2) must equal the first of the right (3)",
        2,
    ),
    ("sum(A + v)", "'+' at column 7: shapes (2, 3) and (2,) do not match for +: " + LAST_AXES.format("3 and 2"), 6),
    ("sum(A - v)", "'-' at column 7: shapes (2, 3) and (2,) do not match for -: " + LAST_AXES.format("3 and 2"), 6),
    ("sum(v*A)", "'*' at column 6: shapes (2,) and (2, 3) do not match for *: " + LAST_AXES.format("2 and 3"), 5),
    ("sum(A / v)", "'/' at column 7: shapes (2, 3) and (2,) do not match for /: " + LAST_AXES.format("3 and 2"), 6),
    ("sum(A ^ v)", "'^' at column 7: shapes (2, 3) and (2,) do not match for ^: " + LAST_AXES.format("3 and 2"), 6),
    (
        "sum(max(A, v))",
        "max() at column 5: shapes (2, 3) and (2,) do not match for max(): " + LAST_AXES.format("3 and 2"),
        4,
    ),
    (
        "sum(where(v > 0, A, v))",
        "where() at column 5: shapes (2,), (2, 3) and (2,) do not match for where(): " + LAST_AXES.format("2, 3 and 2"),
        4,
    ),
    ("A[5]", "indexing at column 3: index 5 is out of range for axis 0 of size 2 (the value has shape (2, 3))", 2),
    (
        "sum(A[0, 7])",
        "indexing at column 10: index 7 is out of range for axis 1 of size 3 (the value has shape (2, 3))",
        9,
    ),
    ("v [-3]", "indexing at column 4: index -3 is out of range for axis 0 of size 2", 3),
    ("sum(inv(A))", "inv() at column 5: inv() needs a square matrix, got shape (2, 3)", 4),
]


@pytest.mark.parametrize("expression,message,caret", CASES, ids=[c[0] for c in CASES])
def test_shape_errors_name_the_shapes_at_the_operator(expression, message, caret):
    result = subprocess.run(
        [*GRADCLI, "eval", expression, "--at", at(expression), "--seed", "ones"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: {message}\n  {expression}\n  {' ' * caret}^\n"
    for word in ("gufunc", "broadcast together", "operands", "out of bounds", "signature"):
        assert word not in result.stderr


def test_batched_matmul_names_the_batch_axes():
    result = subprocess.run(
        [*GRADCLI, "eval", "sum(x @ y)", "--at", f"x={np.ones((3, 2, 2)).tolist()},y={np.ones((2, 2, 2)).tolist()}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        "error: '@' at column 7: shapes (3, 2, 2) and (2, 2, 2) do not match for @: "
        "their batch axes (3,) and (2,) do not broadcast"
    )


def _numpy_error(call) -> Exception:  # noqa: ANN001
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the very exception NumPy raises
        return exc
    raise AssertionError("NumPy raised nothing")


def _translate(text: str, args: list[np.ndarray], exc: Exception) -> tuple[str, int]:
    tree = parse(text)
    node = next(n for n in tree.nodes() if isinstance(n, (ast.Call, ast.Binary)))
    return failure(node, args, exc, Source(text))


def test_matrix_function_errors_from_numpy_are_translated():
    """The matrix functions (det, solve, reshape: issue 15) raise NumPy's own errors: translated too."""
    rect, square = np.ones((2, 3)), np.eye(2)
    exc = _numpy_error(lambda: np.linalg.det(rect))
    assert _translate("1 + det(A)", [rect], exc) == (
        "det() at column 5: det() needs a square matrix, got shape (2, 3)",
        4,
    )
    exc = _numpy_error(lambda: np.linalg.inv(np.zeros((2, 2))))
    assert (
        _translate("inv(A)", [np.zeros((2, 2))], exc)[0]
        == "inv() at column 1: the matrix is singular: it has no inverse"
    )
    exc = _numpy_error(lambda: np.linalg.solve(square, np.ones(3)))
    assert _translate("solve(S, u)", [square, np.ones(3)], exc) == (
        "solve() at column 1: shapes (2, 2) and (3,) do not fit solve(): a size 3 where 2 is needed",
        0,
    )
    exc = _numpy_error(lambda: rect.reshape(4))
    assert _translate("reshape(A, 4)", [rect, 4.0], exc)[0] == (
        "reshape() at column 1: cannot reshape 6 elements (shape (2, 3)) into shape (4,): "
        "the number of elements must stay the same"
    )


def test_every_operation_error_goes_through_one_place():
    """evaluate.py catches an operation's errors once, in value_of, and hands them to failure()."""
    text = (Path(__file__).parents[1] / "gradcli" / "lang" / "evaluate.py").read_text()
    assert text.count("failure(node, args, exc, self.source)") == 1
    assert "not aligned" not in text


@pytest.mark.skipif(os.name != "posix", reason="posix only")
def test_json_shape_error():
    import json

    result = subprocess.run(
        [*GRADCLI, "eval", "v @ u", "--at", at("v @ u"), "--json"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert json.loads(result.stdout) == {
        "error": "'@' at column 3: shapes (2,) and (3,) do not match for @: "
        "the last axis of the left (2) must equal the first of the right (3)",
        "exit_code": 2,
    }
