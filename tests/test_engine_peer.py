"""Issue 12, "wrong answers found by the peers' own tests": the Tensor, engine and Function items.

Each case asserts the known value without torch, and where PyTorch is installed the
same case is computed in torch float64 in the test and compared (the style of PyTorch's
test_autograd.py). Torch is never required: those halves skip without it.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc

try:
    import torch
except ImportError:  # pragma: no cover - the differential halves skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def tt(value, requires_grad=False):
    return torch.tensor(value, dtype=torch.float64, requires_grad=requires_grad)


# --- retain_grad and in-place ------------------------------------------------------------------


def _retain_then_inplace(lib, leaf):
    x = leaf([1.0], requires_grad=True)
    a = x.clone()
    a.retain_grad()
    a.mul_(2)
    a.sum().backward()
    return a.grad, x.grad


def test_retain_grad_after_inplace_is_the_newest_versions_gradient():
    a_grad, x_grad = _retain_then_inplace(gc, gc.tensor)
    assert a_grad.tolist() == [1.0]
    assert x_grad.tolist() == [2.0]


@needs_torch
def test_retain_grad_after_inplace_matches_torch():
    ours = _retain_then_inplace(gc, gc.tensor)
    theirs = _retain_then_inplace(torch, tt)
    for o, t in zip(ours, theirs):
        assert o.tolist() == t.tolist()


def test_retain_grad_on_custom_function_output_then_inplace():
    class Double(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    y.retain_grad()
    y.mul_(3)
    y.sum().backward()
    assert y.grad.tolist() == [1.0, 1.0]
    assert x.grad.tolist() == [6.0, 6.0]


# --- a Function that saves its own output ---------------------------------------------------------


def _square_saving_output(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x**2
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * 2 * y / x

    return Square


def test_function_saving_its_output_has_the_right_second_derivative():
    x = gc.tensor(2.0, requires_grad=True)
    y = _square_saving_output(gc).apply(x)
    (d,) = gc.grad(y, x, create_graph=True)
    (d2,) = gc.grad(d, x)
    assert d.item() == 4.0
    assert d2.item() == 2.0


@needs_torch
def test_function_saving_its_output_matches_torch():
    x = gc.tensor(2.0, requires_grad=True)
    (d,) = gc.grad(_square_saving_output(gc).apply(x), x, create_graph=True)
    (d2,) = gc.grad(d, x)
    tx = tt(2.0, True)
    (td,) = torch.autograd.grad(_square_saving_output(torch).apply(tx), tx, create_graph=True)
    (td2,) = torch.autograd.grad(td, tx)
    assert (d.item(), d2.item()) == (td.item(), td2.item())


def test_function_output_is_the_tensor_forward_returned_and_version_checked():
    saved = {}

    class Exp(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = gc.exp(x)
            saved["y"] = y
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    x = gc.tensor(1.0, requires_grad=True)
    y = Exp.apply(x)
    assert y is saved["y"] and y.grad_fn is not None
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_function_returning_its_input_does_not_rewire_the_input():
    class Ident(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = gc.tensor(1.0, requires_grad=True)
    y = Ident.apply(x)
    assert y is not x and x.is_leaf and y.grad_fn is not None


# --- gc.grad: materialize_grads ----------------------------------------------------------------------


def test_materialized_grads_with_create_graph_are_differentiable_zeros():
    x = gc.tensor(2.0, requires_grad=True)
    z = gc.tensor([1.0, 3.0], requires_grad=True)
    dx, dz = gc.grad(x * x, [x, z], create_graph=True, materialize_grads=True)
    assert dx.item() == 4.0
    assert dz.tolist() == [0.0, 0.0] and dz.requires_grad and dz.dtype == z.dtype
    (back,) = gc.grad(dz.sum(), z, allow_unused=True)
    assert back is None
    (dz_plain,) = gc.grad(x * x, z, materialize_grads=True)
    assert dz_plain.tolist() == [0.0, 0.0] and not dz_plain.requires_grad


def test_materialize_grads_with_allow_unused_false_is_a_value_error():
    x = gc.tensor(2.0, requires_grad=True)
    z = gc.tensor(1.0, requires_grad=True)
    with pytest.raises(ValueError, match="allow_unused=False"):
        gc.grad(x * x, [x, z], allow_unused=False, materialize_grads=True)


@needs_torch
def test_materialize_grads_matches_torch():
    tx, tz = tt(2.0, True), tt(1.0, True)
    (t_dz,) = torch.autograd.grad(tx * tx, tz, create_graph=True, materialize_grads=True)
    x, z = gc.tensor(2.0, requires_grad=True), gc.tensor(1.0, requires_grad=True)
    (dz,) = gc.grad(x * x, z, create_graph=True, materialize_grads=True)
    assert (dz.item(), dz.requires_grad, dz.is_leaf) == (t_dz.item(), t_dz.requires_grad, t_dz.is_leaf)
    with pytest.raises(ValueError):
        torch.autograd.grad(tx * tx, [tx, tz], allow_unused=False, materialize_grads=True)


# --- pow at a zero base, and gradients keep the input's dtype ------------------------------------------


def test_pow_zero_base_second_derivatives_are_zero_not_nan():
    y = gc.tensor(1.5, requires_grad=True)
    (d,) = gc.grad(gc.pow(0.0, y), y, create_graph=True)
    (d2,) = gc.grad(d, y)
    assert d.item() == 0.0 and d2.item() == 0.0
    x = gc.tensor(0.0, requires_grad=True)
    y = gc.tensor(2.0, requires_grad=True)
    dx, dy = gc.grad(gc.pow(x, y), [x, y], create_graph=True)
    # d/dy (y x^(y-1)) = x^(y-1) + y x^(y-1) log x -> 0 at x = 0, y = 2 (log is masked, not 0 * -inf)
    assert [g.item() for g in gc.grad(dx, [x, y])] == [2.0, 0.0]
    assert [g.item() for g in gc.grad(dy, [x, y], allow_unused=True)] == [0.0, 0.0]


@pytest.mark.parametrize(
    "name, fn",
    [
        ("max", lambda x: gc.max(x)),
        ("min", lambda x: gc.min(x)),
        ("amax", lambda x: gc.amax(x, 0)),
        ("amin", lambda x: gc.amin(x, 0)),
        ("max dim", lambda x: gc.max(x, 0).values),
        ("2 ** x", lambda x: 2.0**x),
        ("0.5 ** x", lambda x: 0.5**x),
        ("x * 3", lambda x: x * 3),
    ],
)
def test_float32_inputs_get_float32_gradients(name, fn):
    x = gc.tensor([1.0, 3.0, 2.0], dtype=np.float32, requires_grad=True)
    (g,) = gc.grad(fn(x).sum(), x)
    assert g.dtype == np.float32, name
    fn(x).sum().backward()
    assert x.grad.dtype == np.float32, name
    if torch is not None:
        tx = torch.tensor([1.0, 3.0, 2.0], dtype=torch.float32, requires_grad=True)
        lib_fn = {
            "max": lambda t: t.max(),
            "min": lambda t: t.min(),
            "amax": lambda t: t.amax(0),
            "amin": lambda t: t.amin(0),
            "max dim": lambda t: t.max(0).values,
            "2 ** x": lambda t: 2.0**t,
            "0.5 ** x": lambda t: 0.5**t,
            "x * 3": lambda t: t * 3,
        }[name]
        (tg,) = torch.autograd.grad(lib_fn(tx).sum(), tx)
        np.testing.assert_allclose(g.tolist(), tg.tolist(), rtol=1e-6)


# --- out-of-range dims --------------------------------------------------------------------------------

DIM_CASES = [
    ("squeeze", lambda L, x: x.squeeze(50), (1,)),
    ("squeeze neg", lambda L, x: x.squeeze(-3), (2, 1)),
    ("unsqueeze", lambda L, x: x.unsqueeze(3), (2, 3)),
    ("unsqueeze neg", lambda L, x: x.unsqueeze(-4), (2, 3)),
    ("stack", lambda L, x: L.stack([x, x], dim=77), (1,)),
    ("stack neg", lambda L, x: L.stack([x, x], dim=-3), (1,)),
    ("cat", lambda L, x: L.cat([x, x], dim=2), (2, 3)),
    ("transpose", lambda L, x: x.transpose(0, 2), (2, 3)),
    ("permute", lambda L, x: x.permute(0, 5), (2, 3)),
    ("flatten", lambda L, x: x.flatten(0, 4), (2, 3)),
    ("sum", lambda L, x: x.sum(3), (2, 3)),
    ("max dim", lambda L, x: x.max(3), (2, 3)),
    ("softmax", lambda L, x: x.softmax(3), (2, 3)),
    ("size", lambda L, x: x.size(2), (2, 3)),
    ("0-d squeeze", lambda L, x: x.squeeze(1), ()),
    ("0-d unsqueeze", lambda L, x: x.unsqueeze(2), ()),
]


@pytest.mark.parametrize("name, fn, shape", DIM_CASES, ids=[c[0] for c in DIM_CASES])
def test_out_of_range_dims_raise_index_error(name, fn, shape):
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-\d+, \d+\], but got"):
        fn(gc, gc.ones(*shape))
    if torch is not None:
        with pytest.raises(IndexError) as theirs:
            fn(torch, torch.ones(shape, dtype=torch.float64))
        with pytest.raises(IndexError) as ours:
            fn(gc, gc.ones(*shape))
        assert str(ours.value) == str(theirs.value)


def test_squeeze_50_message_is_pytorchs():
    with pytest.raises(IndexError) as info:
        gc.tensor([1.0]).squeeze(50)
    assert str(info.value) == "Dimension out of range (expected to be in range of [-1, 0], but got 50)"


def test_negative_dims_in_range_still_work():
    x = gc.ones(2, 3)
    assert x.squeeze(-1).shape == (2, 3)
    assert x.unsqueeze(-1).shape == (2, 3, 1)
    assert x.transpose(-1, 0).shape == (3, 2)
    assert gc.stack([x, x], -1).shape == (2, 3, 2)
    assert gc.cat([x, x], -1).shape == (2, 6)
    assert gc.ones(()).squeeze(0).shape == () and gc.ones(()).unsqueeze(-1).shape == (1,)


# --- views of a leaf, no_grad on generators -------------------------------------------------------------


def test_inplace_through_an_old_view_of_a_leaf_that_now_requires_grad():
    x = gc.tensor([1.0, 2.0])
    v = x[:1]
    x.requires_grad_()
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        v.mul_(2)
    if torch is not None:
        tx = tt([1.0, 2.0])
        tv = tx[:1]
        tx.requires_grad_()
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
            tv.mul_(2)


def test_inplace_through_a_view_under_no_grad_is_allowed():
    x = gc.tensor([1.0, 2.0])
    v = x[:1]
    x.requires_grad_()
    with gc.no_grad():
        v.mul_(2)
    assert x.tolist() == [2.0, 2.0]


def test_inplace_through_detach_of_a_leaf_is_allowed():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    x.detach().zero_()
    assert x.tolist() == [0.0, 0.0]
    y = gc.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y.detach()[0].mul_(3)  # a view of the detached tensor: still not a view of the leaf for autograd
    assert y.tolist() == [[3.0, 6.0], [3.0, 4.0]]


def _generator_modes(lib, decorator):
    @decorator
    def gen(n):
        for _ in range(n):
            got = yield lib.is_grad_enabled()
            assert got is None or got == "sent"
        return "done"

    g = gen(2)
    seen = [next(g), lib.is_grad_enabled(), g.send("sent")]
    try:
        next(g)
    except StopIteration as stop:
        seen.append(stop.value)
    return seen


def test_no_grad_on_a_generator_function_applies_while_it_runs():
    assert _generator_modes(gc, gc.no_grad()) == [False, True, False, "done"]
    assert _generator_modes(gc, gc.no_grad) == [False, True, False, "done"]
    with gc.no_grad():
        assert _generator_modes(gc, gc.enable_grad()) == [True, False, True, "done"]


@needs_torch
def test_no_grad_on_a_generator_matches_torch():
    assert _generator_modes(gc, gc.no_grad()) == _generator_modes(torch, torch.no_grad())
    with gc.no_grad(), torch.no_grad():
        assert _generator_modes(gc, gc.enable_grad()) == _generator_modes(torch, torch.enable_grad())


def test_no_grad_generator_records_nothing_inside_and_close_throw_work():
    x = gc.tensor(1.0, requires_grad=True)

    @gc.no_grad()
    def gen():
        try:
            while True:
                yield x * 2
        finally:
            assert not gc.is_grad_enabled()

    g = gen()
    assert not next(g).requires_grad
    assert (x * 2).requires_grad
    g.close()
    with pytest.raises(KeyError):
        h = gen()
        next(h)
        h.throw(KeyError("k"))


# --- no unnecessary save ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [lambda d: 3 * d, lambda d: d * 3, lambda d: d / 3, lambda d: gc.where(d > 0, d, 0.0)],
    ids=["3*d", "d*3", "d/3", "where"],
)
def test_multiplying_by_a_number_does_not_save_the_tensor(op):
    x = gc.tensor(1.0, requires_grad=True)
    d = x + 0
    y = op(d)
    d += 1
    y.backward()
    assert x.grad.item() in (3.0, 1 / 3, 1.0)


@needs_torch
def test_no_unnecessary_save_matches_torch():
    for leaf in (gc.tensor, tt):
        x = leaf(1.0, requires_grad=True)
        d = x + 0
        y = 3 * d
        d += 1
        y.backward()
        assert x.grad.item() == 3.0


def test_tensor_times_tensor_still_checks_versions():
    x = gc.tensor(1.0, requires_grad=True)
    d = x + 0
    y = d * x
    d += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    z = gc.tensor(2.0, requires_grad=True)
    e = z + 0
    w = 3 / e  # the rule of the denominator reads it: saved, checked
    e += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.backward()


def test_matrix_products_with_a_constant_save_only_the_constant():
    a = gc.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    d = a + 0
    y = d @ gc.tensor([[1.0], [1.0]])
    d += 1
    y.sum().backward()
    assert a.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# --- messages ---------------------------------------------------------------------------------------


def _square_bad(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return lib.ones(3, dtype=lib.float64) if lib is torch else gc.ones(3)

    return Square


def test_custom_backward_with_a_wrong_shape_is_pytorchs_runtime_error():
    with pytest.raises(RuntimeError) as info:
        _square_bad(gc).apply(gc.ones(2, requires_grad=True)).sum().backward()
    assert str(info.value) == (
        "Function SquareBackward returned an invalid gradient at index 0 - got [3] but expected shape "
        "compatible with [2]"
    )
    if torch is not None:
        with pytest.raises(RuntimeError) as theirs:
            _square_bad(torch).apply(torch.ones(2, dtype=torch.float64, requires_grad=True)).sum().backward()
        assert str(info.value) == str(theirs.value)


MATMUL_CASES = [((4,), (1, 2)), ((2, 3), (2, 2)), ((3,), (2,)), ((2, 3), (2,))]


@pytest.mark.parametrize("sa, sb", MATMUL_CASES)
def test_matmul_shape_mismatch_is_a_runtime_error_naming_both_shapes(sa, sb):
    with pytest.raises(RuntimeError) as info:
        gc.ones(*sa) @ gc.ones(*sb)
    if torch is not None:
        with pytest.raises(RuntimeError) as theirs:
            torch.ones(*sa) @ torch.ones(*sb)
        assert str(info.value) == str(theirs.value)


def test_matmul_message_for_ones4_at_ones12():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(1x4 and 1x2\)"):
        gc.ones(4) @ gc.ones(1, 2)
    with pytest.raises(RuntimeError, match=r"\[2, 2, 3\] and \[2, 2, 2\]"):
        gc.ones(2, 2, 3) @ gc.ones(2, 2, 2)
    with pytest.raises(RuntimeError, match="mat1 and mat2"):
        gc.mm(gc.ones(2, 3), gc.ones(2, 2))


def test_cat_of_zero_dim_tensors_is_a_runtime_error():
    with pytest.raises(RuntimeError) as info:
        gc.cat([gc.tensor(1.0), gc.tensor(2.0)])
    assert str(info.value) == "zero-dimensional tensor (at position 0) cannot be concatenated"
    with pytest.raises(RuntimeError, match=r"at position 1"):
        gc.cat([gc.tensor([1.0]), gc.tensor(2.0)])


# --- deep reentrant backward ------------------------------------------------------------------------


def _reentrant_function(lib):
    class Reenter(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, depth):
            ctx.x = x.detach()
            ctx.depth = depth
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            if ctx.depth > 0:
                with lib.enable_grad():
                    x = ctx.x.detach().requires_grad_()
                    Reenter.apply(x, ctx.depth - 1).sum().backward()
            return g * 2, None

    return Reenter


def test_two_thousand_deep_reentrant_backward():
    x = gc.tensor(1.0, requires_grad=True)
    _reentrant_function(gc).apply(x, 2000).backward()
    assert x.grad.item() == 2.0
    if torch is not None:
        tx = tt(1.0, True)
        _reentrant_function(torch).apply(tx, 2000).backward()
        assert tx.grad.item() == x.grad.item()


def test_an_error_deep_in_a_reentrant_backward_reaches_the_caller():
    class Boom(gc.autograd.Function):
        @staticmethod
        def forward(ctx, x, depth):
            ctx.depth = depth
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            if ctx.depth == 0:
                raise KeyError("deep")
            with gc.enable_grad():
                Boom.apply(gc.tensor(1.0, requires_grad=True), ctx.depth - 1).backward()
            return g, None

    with pytest.raises(KeyError, match="deep"):
        Boom.apply(gc.tensor(1.0, requires_grad=True), 600).backward()
    assert gc.is_grad_enabled()
    y = gc.tensor(3.0, requires_grad=True)
    (y * y).backward()  # the engine is usable afterwards
    assert y.grad.item() == 6.0


@pytest.mark.parametrize("op", ["mul_", "div_"])
def test_inplace_products_keep_only_what_their_rules_read(op):
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    d = x * 1
    getattr(d, op)(3.0)  # the old d is not needed: no copy of it is kept
    assert d.grad_fn.saved[0] is None
    d.sum().backward()
    assert x.grad.tolist() == pytest.approx([3.0, 3.0] if op == "mul_" else [1 / 3, 1 / 3])
    x = gc.tensor([1.0, 2.0])
    w = gc.tensor([2.0, 4.0], requires_grad=True)
    d = x * 1
    getattr(d, op)(w)  # w's rule reads the old d: kept
    d.sum().backward()
    assert w.grad.tolist() == pytest.approx([1.0, 2.0] if op == "mul_" else [-0.25, -0.125])
