"""Every function of the language is ``gc.<name>`` with the language's arities and values (issue 12).

Generated from the language's table (lang/functions.py FUNCTIONS): a function added there is
checked here at once. Values and gradients of ``gc.<name>(...)`` must equal those of the same
call written in the language.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradcli as gc
from gradcli.lang.evaluate import evaluate
from gradcli.lang.functions import FUNCTIONS
from gradcli.lang.parser import parse

VECTOR = [0.25, 0.5, 0.75]
OTHER = [0.6, 0.3, 0.75]
MATRIX = [[0.2, 0.9, 0.4], [0.7, 0.35, 0.55]]
# PyTorch's signatures, which the language's do not share (dim before index, boolean masks, integer
# positions, a list of tensors): compared with the language in tests/test_index15_language.py and
# tests/test_r27_functions.py.
TORCH_SIGNATURE = {"gather", "index_select", "masked_fill", "repeat", "narrow", "hstack", "vstack"}


def cases():
    """(name, arity, values for the arguments a, b, c, the axis if any)."""
    for name, function in FUNCTIONS.items():
        if name in TORCH_SIGNATURE:
            continue
        for arity in function.arities:
            if function.reduces or function.along:  # along: softmax, cumsum, flip (issue 15)
                yield pytest.param(name, arity, {"a": MATRIX}, 1 if arity == 2 else None, id=f"{name}/{arity}")
                if arity == 2:
                    yield pytest.param(name, arity, {"a": MATRIX}, 0, id=f"{name}/{arity}/axis0")
                continue
            if name == "dot":
                values = {"a": VECTOR, "b": OTHER}
            elif name == "where":
                values = {"a": [1.0, 0.0, 1.0], "b": VECTOR, "c": OTHER}
            elif name == "clamp":
                values = {"a": [0.1, 0.5, 0.9], "b": [0.3, 0.3, 0.2], "c": [0.6, 0.4, 0.7]}
            elif name in ("max", "min") and arity == 1:
                values = {"a": MATRIX}
            elif name == "sort":  # sort(a, axis)
                values = {"a": MATRIX, "b": 0.0} if arity == 2 else {"a": VECTOR}
            elif name == "topk":  # topk(a, k)
                values = {"a": VECTOR, "b": 2.0} if arity == 2 else {"a": MATRIX, "b": 1.0, "c": 0.0}
            elif name == "reshape":  # reshape(a, [3, 2])
                values = {"a": MATRIX, "b": [3.0, 2.0]}
            elif name == "det":
                values = {"a": [[0.9, 0.2], [0.4, 1.1]]}
            elif name == "solve":
                values = {"a": [[0.9, 0.2], [0.4, 1.1]], "b": [0.5, -1.0]}
            elif name == "inv":
                values = {"a": [[0.9, 0.2], [0.4, 1.1]]}
            elif name in ("trace", "diag", "diagonal", "transpose", "tril", "triu"):  # matrices; tril(a, k)
                values = {"a": MATRIX, "b": 1.0} if arity == 2 else {"a": MATRIX}
            elif name == "roll":  # roll(a, shift), roll(a, shift, axis)
                values = {"a": MATRIX, "b": 1.0} if arity == 2 else {"a": MATRIX, "b": -1.0, "c": 1.0}
            else:
                values = dict(zip("abc", [VECTOR, OTHER, [0.9, 0.1, 0.4]][:arity]))
            yield pytest.param(name, arity, values, None, id=f"{name}/{arity}")


def test_the_cases_cover_the_table():
    covered = {(p.values[0], p.values[1]) for p in cases()}
    assert covered == {(n, a) for n, f in FUNCTIONS.items() for a in f.arities if n not in TORCH_SIGNATURE}


@pytest.mark.parametrize(("name", "arity", "values", "axis"), list(cases()))
def test_gc_function_equals_the_language(name, arity, values, axis):
    names = list(values)
    program = f"{name}({', '.join(names)}{'' if axis is None else f', {axis}'})"
    differentiable = FUNCTIONS[name].derivative != "not differentiable (derivative 0)" and name != "detach"
    wrt = [n for n in names if not (name == "where" and n == "a")] if differentiable else []
    with np.errstate(all="ignore"):
        language = evaluate(parse(program), {n: np.array(v) for n, v in values.items()}, wrt)
    (expected,) = language.outputs
    leaves = {n: gc.tensor(v, requires_grad=n in wrt) for n, v in values.items()}
    args = [leaves[n] for n in names]
    function = getattr(gc, name)  # every name of the language is gc.<name>
    if axis is None:
        got = function(*args)
    elif name == "norm":  # gc.norm's second parameter is p, as torch.norm's; the axis is dim=
        got = function(*args, dim=axis)
    else:
        got = function(*args, axis)
    if name in ("sort", "topk"):  # gc.sort and gc.topk give (values, indices), the language the values
        got = got.values
    np.testing.assert_array_equal(np.asarray(got._value, dtype=np.float64), np.asarray(expected._value, np.float64))
    if wrt and expected.requires_grad:
        seed = np.linspace(0.5, 1.5, np.size(expected._value)).reshape(np.shape(expected._value))
        want = gc.grad(expected, [language.inputs[n] for n in wrt], grad_outputs=gc.tensor(seed), allow_unused=True)
        have = gc.grad(got, [leaves[n] for n in wrt], grad_outputs=gc.tensor(seed), allow_unused=True)
        for n, w, h in zip(wrt, want, have):
            assert (w is None) == (h is None), n
            if w is not None:
                np.testing.assert_array_equal(h._value, w._value, err_msg=f"d/d{n}")


def test_log_with_a_base():
    x = gc.tensor(8.0, requires_grad=True)
    y = gc.log(x, 2)  # raised TypeError: log() takes 1 positional argument
    assert y.item() == pytest.approx(3.0, rel=1e-15)
    y.backward()
    assert x.grad.item() == pytest.approx(1 / (8 * math.log(2)), rel=1e-15)
    assert gc.log(gc.tensor([1.0, 9.0]), 3).tolist() == pytest.approx([0.0, 2.0], rel=1e-15)
    assert gc.log(x).item() == pytest.approx(math.log(8.0), rel=1e-15)


def test_log_with_a_tensor_base_differentiates_the_base_like_torch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    tx = torch.tensor(5.0, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    (torch.log(tx) / torch.log(tb)).backward()
    x = gc.tensor(5.0, requires_grad=True)
    b = gc.tensor(1.5, requires_grad=True)
    gc.log(x, b).backward()
    assert x.grad.item() == pytest.approx(tx.grad.item(), rel=1e-12)
    assert b.grad.item() == pytest.approx(tb.grad.item(), rel=1e-12)
