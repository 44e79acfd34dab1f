"""The engine's short road for scalar nodes (issue 21) gives the general loop's numbers, bit for bit.

The short road runs one- and two-input nodes with a scalar gradient when no hook, capture,
anomaly check or graph of the backward is in play. Any registered hook sends every pass down
the general loop (``hooks.seen``), so each graph here is differentiated both ways and the bytes
of the gradients compared: shared sub-expressions, a leaf used many times, a node used twice by
one operation (``x * x``), 0-d arrays among scalars, a custom Function with two outputs (its
edges are ``OutputRef``), retain_graph twice, and ``inputs=``.
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcli as gc
from gradcli.autograd import engine
from gradcli.autograd import hooks as _hooks


def _bits(value):
    return np.asarray(value, dtype=np.float64).tobytes()


def _both_roads(build, monkeypatch, **backward):
    """The leaves' gradients from the short road and from the general loop, and how many passes
    took the short road's loop (``_run_plain``)."""
    runs = {"short": 0}
    real = engine._run_plain

    def counted(*args):
        runs["short"] += 1
        return real(*args)

    results = []
    for hooked in (False, True):
        monkeypatch.setattr(_hooks, "seen", hooked)
        monkeypatch.setattr(engine, "_run_plain", counted)
        leaves, out = build()
        out.backward(**backward)
        results.append([_bits(t.grad._value) if t.grad is not None else None for t in leaves])
        if not hooked:
            taken = runs["short"]
    assert runs["short"] == taken  # the general loop never took the short road
    return results, taken


def _long_sum():
    x, y = gc.tensor(0.3, requires_grad=True), gc.tensor(0.7, requires_grad=True)
    total = 0.0
    for k in range(200):
        c = 0.1 + 0.9 * k / 199
        total = total + gc.sin(c * x + y) * gc.exp(-c * y)
    return (x, y), total


def _shared():
    x, w = gc.tensor(2.0, requires_grad=True), gc.tensor(-0.5, requires_grad=True)
    h = gc.tanh(x * w + 1)  # used three times, once twice by the same product
    out = h * h + gc.log(1 + h * h) - h / (1 + x * x) + w**3
    return (x, w), out


def _zero_d_arrays():
    x = gc.tensor(np.array(1.5), requires_grad=True)  # a 0-d array, not a NumPy scalar
    y = gc.tensor(0.25, requires_grad=True)
    return (x, y), gc.exp(x * y) + gc.sqrt(x + y) * x


class _SplitTwo(gc.autograd.Function):
    """Two outputs: the short road hands their gradients on through OutputRef edges."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2.0, x * x

    @staticmethod
    def backward(ctx, ga, gb):
        (x,) = ctx.saved_tensors
        return 2.0 * ga + 2.0 * x * gb


def _two_outputs():
    x = gc.tensor(0.8, requires_grad=True)
    a, b = _SplitTwo.apply(gc.sin(x))
    return (x,), gc.cos(a) * b + a


@pytest.mark.parametrize("build", [_long_sum, _shared, _zero_d_arrays, _two_outputs])
def test_short_road_gives_the_general_loops_bits(build, monkeypatch):
    (short, general), taken = _both_roads(build, monkeypatch)
    assert taken == 1
    assert short == general


def test_short_road_values_are_the_derivatives():
    (x, w), out = _shared()
    out.backward()
    h = np.tanh(2.0 * -0.5 + 1)
    dh = 2 * h + 2 * h / (1 + h * h) - 1 / (1 + 2.0 * 2.0)
    dx = dh * (1 - h * h) * -0.5 + h * 2 * 2.0 / (1 + 2.0 * 2.0) ** 2
    dw = dh * (1 - h * h) * 2.0 + 3 * 0.25
    assert x.grad.item() == pytest.approx(dx, rel=1e-14)
    assert w.grad.item() == pytest.approx(dw, rel=1e-14)


def test_retain_graph_and_inputs_on_the_short_road(monkeypatch):
    (x, y), out = _long_sum()
    out.backward(retain_graph=True)
    first = x.grad.item()
    out.backward(inputs=[y])  # a capture: the general loop
    assert x.grad.item() == first  # untouched by a pass restricted to y
    with pytest.raises(RuntimeError, match="second time"):
        out.backward()  # the saved values were freed by the second pass


def test_a_backward_without_retain_frees_saved_values_on_the_short_road():
    (x, y), out = _long_sum()
    out.backward()
    with pytest.raises(RuntimeError, match="second time"):
        out.backward()


def test_short_road_matches_torch_float64():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    (x, y), out = _long_sum()
    out.backward()
    tx = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    ty = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    total = 0.0
    for k in range(200):
        c = 0.1 + 0.9 * k / 199
        total = total + torch.sin(c * tx + ty) * torch.exp(-c * ty)
    total.backward()
    assert x.grad.item() == pytest.approx(tx.grad.item(), rel=1e-13)
    assert y.grad.item() == pytest.approx(ty.grad.item(), rel=1e-13)


@pytest.mark.parametrize("build", [_long_sum, _shared, _zero_d_arrays, _two_outputs])
def test_grad_of_the_inputs_takes_the_short_road_with_the_same_bits(build, monkeypatch):
    """``gc.grad(out, leaves)`` captures the leaves' gradients: the short road's loop runs it when
    every leaf reached is wanted, and gives what the general loop gives."""
    runs = {"plain": 0}
    real = engine._run_plain

    def counted(*args):
        runs["plain"] += 1
        return real(*args)

    monkeypatch.setattr(engine, "_run_plain", counted)
    found = []
    for hooked in (False, True):
        monkeypatch.setattr(_hooks, "seen", hooked)
        leaves, out = build()
        found.append([_bits(g._value) for g in gc.grad(out, list(leaves))])
        assert all(t.grad is None for t in leaves)  # grad() leaves .grad alone
    assert runs["plain"] == 1
    assert found[0] == found[1]


def test_grad_of_some_inputs_only_goes_the_general_way(monkeypatch):
    monkeypatch.setattr(_hooks, "seen", False)  # (a hook registered by an earlier test turns the short road off)
    runs = {"plain": 0}
    real = engine._run_plain
    monkeypatch.setattr(engine, "_run_plain", lambda *a: (runs.__setitem__("plain", runs["plain"] + 1), real(*a))[1])
    (x, y), out = _long_sum()
    (gy,) = gc.grad(out, [y], retain_graph=True)
    assert runs["plain"] == 0  # x is reached but not wanted: the pruned general loop
    (gx2, gy2) = gc.grad(out, [x, y])
    assert runs["plain"] == 1
    assert _bits(gy._value) == _bits(gy2._value)


@pytest.mark.parametrize("hooked", [False, True], ids=["plain loop", "general loop"])
def test_contributions_add_up_in_pytorchs_order(hooked, monkeypatch):
    """Nodes run latest-made first (PyTorch's sequence numbers), so a leaf's contributions add up in
    that order: here 1 + 1 + 1e16 = 1e16 + 2, where 1e16 + 1 + 1 would round to 1e16."""
    monkeypatch.setattr(_hooks, "seen", hooked)
    x = gc.tensor(1.0, requires_grad=True)
    out = x * 1e16 + x * 1.0 + x * 1.0
    out.backward()
    assert x.grad.item() == 1e16 + 2
    (g,) = gc.grad(x * 1e16 + x * 1.0 + x * 1.0, [x])
    assert g.item() == 1e16 + 2
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    t = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    (t * 1e16 + t * 1.0 + t * 1.0).backward()
    assert t.grad.item() == x.grad.item()


def test_a_chain_50000_nodes_deep_needs_no_stack_on_either_loop(monkeypatch):
    for hooked in (False, True):
        monkeypatch.setattr(_hooks, "seen", hooked)
        x = gc.tensor(0.5, requires_grad=True)
        y = x
        for _ in range(25_000):
            y = y * 1.0 + 0.0
        y.backward()
        assert x.grad.item() == 1.0


class _Fails(gc.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("this backward fails")


@pytest.mark.parametrize("hooked", [False, True], ids=["plain loop", "general loop"])
def test_a_failing_node_leaves_the_complete_leaves_their_gradients(hooked, monkeypatch):
    """As in PyTorch, a leaf whose gradient was complete when a node failed keeps it in ``.grad``;
    a leaf the failing node still had to reach gets nothing."""
    monkeypatch.setattr(_hooks, "seen", hooked)
    w, x, z = (gc.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    y = _Fails.apply(w * z) + x * 5.0 + z * 1.0
    with pytest.raises(RuntimeError, match="this backward fails"):
        y.backward()
    assert x.grad.item() == 5.0
    assert w.grad is None and z.grad is None  # z still waited for the failed node's share
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")

    class Fails(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("this backward fails")

    tw, tx, tz = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (2.0, 3.0, 4.0))
    with pytest.raises(RuntimeError):
        (Fails.apply(tw * tz) + tx * 5.0 + tz * 1.0).backward()
    assert (tw.grad, tz.grad) == (None, None) and tx.grad.item() == 5.0


def test_submodules_read_as_attributes_load_as_before():
    import subprocess
    import sys

    code = (
        "import gradcli as gc; gc.autograd.function.once_differentiable; gc.errors.GradcliError; "
        "assert 'Function' in dir(gc) and 'functional' in dir(gc.autograd); "
        "assert gc.Function is gc.autograd.Function\n"
        "try:\n    gc.no_such_name\nexcept AttributeError as e:\n    print(e)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "module 'gradcli' has no attribute 'no_such_name'\n", "")
