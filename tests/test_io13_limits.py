"""Issue 13: the element limit covers every operation, and its setting is checked."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gradcli.errors import UsageError
from gradcli.lang.evaluate import evaluate, max_elements
from gradcli.lang.functions import FUNCTIONS
from gradcli.lang.parser import parse

COLUMN = np.arange(1.0, 41.0).reshape(40, 1)  # 40 x 1
ROW = np.arange(1.0, 31.0) / 31.0  # 30: broadcast together, 1,200 elements


def run(text: str, **values: object):
    return evaluate(parse(text), values)


@pytest.mark.parametrize("text", ["²", "-5", "1e3", "0", "12abc", "٣", "1_000"])
def test_a_malformed_limit_is_refused_as_invalid(monkeypatch, text):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", text)
    with pytest.raises(UsageError, match=r"GRADCLI_MAX_ELEMENTS=.* is invalid"):
        max_elements()


def test_a_malformed_limit_is_refused_even_for_a_small_program(monkeypatch):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", "-5")
    with pytest.raises(UsageError, match="is invalid"):
        run("x + 1", x=np.float64(2.0))


def test_a_well_formed_limit_is_read(monkeypatch):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", " 1234 ")
    assert max_elements() == 1234
    monkeypatch.delenv("GRADCLI_MAX_ELEMENTS")
    assert max_elements() == 200_000_000


@pytest.mark.parametrize("text", ["²", "-5", "1e3"])
def test_cli_says_the_limit_is_invalid_and_exits_2(text):
    env = {"GRADCLI_MAX_ELEMENTS": text, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "gradcli", "eval", "x^2", "--at", "x=3"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: GRADCLI_MAX_ELEMENTS=") and "is invalid" in lines[0]


def _forms() -> list[str]:
    """Every way of the language to combine values that broadcast: operators, comparisons,
    the conditional, stacking, and every function at every arity where it acts elementwise."""
    forms = [f"x {op} y" for op in ("+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=")]
    forms += ["x if y else 1", "1 if x else y", "y if x else 0"]
    for function in FUNCTIONS.values():
        for arity in function.elementwise:
            if arity < 2:
                continue
            for position in range(arity):  # the large operands in every place
                args = ["1"] * arity
                other = (position + 1) % arity
                args[position], args[other] = "x", "y"
                forms.append(f"{function.name}({', '.join(args)})")
    return forms


def test_every_broadcasting_function_of_the_language_is_in_the_generated_forms():
    names = {f.split("(")[0] for f in _forms() if "(" in f and not f.startswith("[")}
    expected = {f.name for f in FUNCTIONS.values() if any(a >= 2 for a in f.elementwise)}
    assert names == expected
    assert {"maximum", "where", "clamp", "atan2", "log", "pow", "max", "min", "eq", "ge"} <= names


@pytest.mark.parametrize("form", _forms())
def test_every_form_is_refused_over_the_limit_before_it_allocates(monkeypatch, form):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", "1000")
    with pytest.raises(UsageError, match=r"would have shape \(40, 30\): 1,200 elements.*limit of 1,000"):
        run(f"sum({form})", x=COLUMN, y=ROW)


@pytest.mark.parametrize("form", _forms())
def test_every_form_runs_at_the_limit(monkeypatch, form):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", "1200")
    with np.errstate(all="ignore"):
        (out,) = run(f"sum({form})", x=COLUMN, y=ROW).outputs
    assert np.shape(out._value) == ()


def test_stacking_counts_every_item(monkeypatch):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", "5")
    with pytest.raises(UsageError, match=r"'\[x, x, x\]' at column 5 would have shape \(3, 2\): 6 elements"):
        run("sum([x, x, x])", x=np.array([1.0, 2.0]))
    (out,) = run("sum([x, x])", x=np.array([1.0, 2.0])).outputs
    assert float(out._value) == 6.0


def test_reductions_and_one_argument_functions_never_enlarge(monkeypatch):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", "40")
    for function in FUNCTIONS.values():
        for arity in function.arities:
            if function.name in ("inv", "det"):  # a square matrix
                text = f"{function.name}(x[:1])"
            elif arity == 1:
                text = f"{function.name}(x)"
            elif function.reduces:
                text = f"{function.name}(x, 0)"
            elif function.name == "dot":
                text = "dot(x[:, 0], x[:, 0])"
            else:
                continue
            run(text, x=COLUMN / 41.0)  # at the limit exactly: no refusal


def test_matrix_product_is_checked(monkeypatch):
    monkeypatch.setenv("GRADCLI_MAX_ELEMENTS", "100")
    with pytest.raises(UsageError, match=r"would have shape \(40, 40\)"):
        run("sum(x @ y)", x=COLUMN, y=COLUMN.T)
