"""Issue 15: Tensor.register_hook, grad_fn.register_hook / register_prehook, in PyTorch's order.

Each program runs on a library module (gradcli, or torch when importable) and records what its
hooks saw; gradcli's record must be PyTorch's (and, without torch, the record written out here)."""

import numpy as np
import pytest

import gradcli as gc


def _lists(ts):
    return [None if t is None else np.asarray(t.detach()).tolist() for t in ts]


def order_program(lib):
    log = []
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = (y * y).sum()
    y.retain_grad()
    y.register_hook(lambda g: (log.append(("tensor hook 1", g.tolist())), g * 2)[1])
    y.grad_fn.register_prehook(lambda go: log.append(("prehook", _lists(go))))
    y.grad_fn.register_hook(lambda gi, go: log.append(("hook", _lists(gi), _lists(go))))
    y.register_hook(lambda g: log.append(("tensor hook 2", g.tolist(), y.grad is None)))
    x.register_hook(lambda g: (log.append(("leaf hook", g.tolist(), x.grad is None)), g + 1)[1])
    acc = y.grad_fn.next_functions[0][0]
    acc.register_prehook(lambda go: log.append(("accumulate prehook", _lists(go), x.grad is None)))
    acc.register_hook(lambda gi, go: log.append(("accumulate hook", list(gi), _lists(go), x.grad.tolist())))
    x.register_post_accumulate_grad_hook(lambda p: log.append(("post accumulate", p.grad.tolist())))
    z.backward()
    log.append(("y.grad", y.grad.tolist()))
    log.append(("x.grad", x.grad.tolist()))
    return log


ORDER = [
    ("tensor hook 1", [6.0, 12.0]),
    ("tensor hook 2", [12.0, 24.0], True),  # retain_grad runs after every tensor hook
    ("prehook", [[12.0, 24.0]]),
    ("hook", [[36.0, 72.0], None], [[12.0, 24.0]]),
    ("leaf hook", [36.0, 72.0], True),
    ("accumulate prehook", [[37.0, 73.0]], True),
    ("post accumulate", [37.0, 73.0]),
    ("accumulate hook", [], [[37.0, 73.0]], [37.0, 73.0]),
    ("y.grad", [12.0, 24.0]),
    ("x.grad", [37.0, 73.0]),
]


def grad_program(lib):
    """``grad`` returns what a captured tensor's hooks leave; a node it need not run runs no node hook."""
    log = []
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: (log.append(("x hook", g.tolist())), g + 1)[1])
    (gx,) = lib.autograd.grad((x * 3 * x * 3).sum(), x)
    log.append(("grad x", gx.tolist(), x.grad is None))
    y = x * 3
    z = (y * y).sum()
    y.register_hook(lambda g: (log.append(("y hook", g.tolist())), g * 10)[1])
    y.grad_fn.register_prehook(lambda go: log.append(("y prehook",)))
    (gy,) = lib.autograd.grad(z, y)
    log.append(("grad y", gy.tolist()))
    return log


GRAD = [
    ("x hook", [18.0, 36.0]),
    ("grad x", [19.0, 37.0], True),
    ("y hook", [6.0, 12.0]),
    ("grad y", [60.0, 120.0]),
]


def remove_program(lib):
    log = []
    x = lib.tensor(2.0, requires_grad=True)
    h1 = x.register_hook(lambda g: g * 100)
    h2 = x.register_hook(lambda g: log.append(("second", g.item())))
    (x * x).backward()
    log.append(("grad", x.grad.item()))
    h1.remove()
    h1.remove()  # twice: nothing happens
    (x * x).backward()
    log.append(("grad", x.grad.item()))
    h2.remove()
    y = x * 5
    hy = y.grad_fn.register_prehook(lambda go: (go[0] * 0,))
    (y * 1).backward()
    log.append(("grad", x.grad.item()))
    hy.remove()
    y = x * 5
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 2, None))
    y.backward()
    log.append(("grad", x.grad.item()))
    return log


REMOVE = [("second", 400.0), ("grad", 400.0), ("second", 4.0), ("grad", 404.0), ("grad", 404.0), ("grad", 414.0)]


def create_graph_program(lib):
    """A hook on the way of a create_graph pass: its replacement is differentiated too."""
    x = lib.tensor(1.5, requires_grad=True)
    y = x**3
    y.register_hook(lambda g: g * x)
    (gx,) = lib.autograd.grad(y, x, create_graph=True)  # x * 3x^2
    (ggx,) = lib.autograd.grad(gx, x)  # 9x^2
    return [("gx", gx.item()), ("ggx", ggx.item()), ("gx has grad_fn", gx.grad_fn is not None)]


CREATE = [("gx", 1.5 * 3 * 1.5**2), ("ggx", 9 * 1.5**2), ("gx has grad_fn", True)]


def function_program(lib):
    """Hooks on the outputs and the node of a custom Function with two outputs."""

    class Split(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    log = []
    x = lib.tensor([1.0, -1.0], requires_grad=True)
    a, b = Split.apply(x)
    b.register_hook(lambda g: (log.append(("b hook", g.tolist())), g * 0)[1])
    a.register_hook(lambda g: log.append(("a hook", g.tolist())))
    a.grad_fn.register_prehook(lambda go: log.append(("prehook", _lists(go))))
    a.grad_fn.register_hook(lambda gi, go: log.append(("hook", _lists(gi), _lists(go))))
    (a.sum() + (b * b).sum()).backward()
    log.append(("x.grad", x.grad.tolist()))
    return log


FUNCTION = [
    ("b hook", [6.0, -6.0]),
    ("a hook", [1.0, 1.0]),
    ("prehook", [[1.0, 1.0], [0.0, 0.0]]),
    ("hook", [[2.0, 2.0]], [[1.0, 1.0], [0.0, 0.0]]),
    ("x.grad", [2.0, 2.0]),
]


def backward_inputs_program(lib):
    """backward(inputs=...): the chosen leaf's hooks and post-accumulate hooks run, the other's do not."""
    log = []
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    x.register_hook(lambda g: (log.append(("x hook", g.tolist())), g * 2)[1])
    x.register_post_accumulate_grad_hook(lambda p: log.append(("x post accumulate", p.grad.tolist())))
    w.register_post_accumulate_grad_hook(lambda p: log.append(("w post accumulate", p.grad.tolist())))
    (x * w).sum().backward(inputs=[x])
    log.append(("grads", x.grad.tolist(), w.grad))
    return log


BACKWARD_INPUTS = [("x hook", [3.0, 4.0]), ("x post accumulate", [6.0, 8.0]), ("grads", [6.0, 8.0], None)]


def inplace_program(lib):
    """A hook registered before an in-place change sees the gradient of the old value; after, of the new."""
    log = []
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y.retain_grad()
    y.register_hook(lambda g: log.append(("before", g.tolist())))
    y.mul_(3)
    y.register_hook(lambda g: log.append(("after", g.tolist())))
    (y * y).sum().backward()
    log.append(("grads", x.grad.tolist(), y.grad.tolist()))
    return log


INPLACE = [("after", [6.0, 12.0]), ("before", [18.0, 36.0]), ("grads", [18.0, 36.0], [6.0, 12.0])]

PROGRAMS = [
    (inplace_program, INPLACE),
    (backward_inputs_program, BACKWARD_INPUTS),
    (order_program, ORDER),
    (grad_program, GRAD),
    (remove_program, REMOVE),
    (create_graph_program, CREATE),
    (function_program, FUNCTION),
]


def _normal(log):
    return [tuple(pytest.approx(v) if isinstance(v, float) else v for v in entry) for entry in log]


@pytest.mark.parametrize(("program", "expected"), PROGRAMS, ids=lambda p: getattr(p, "__name__", ""))
def test_hooks_see_what_is_written(program, expected):
    assert program(gc) == _normal(expected)


@pytest.mark.parametrize(("program", "expected"), PROGRAMS, ids=lambda p: getattr(p, "__name__", ""))
def test_hooks_see_what_pytorch_hooks_see(program, expected):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    torch.set_default_dtype(torch.float64)
    try:
        assert program(gc) == _normal(program(torch))
    finally:
        torch.set_default_dtype(torch.float32)


def test_hook_errors_are_pytorchs():
    with pytest.raises(RuntimeError, match="^cannot register a hook on a tensor that doesn't require gradient$"):
        gc.tensor(1.0).register_hook(lambda g: g)
    y = gc.tensor(1.0, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
        y.register_post_accumulate_grad_hook(lambda p: None)
    with gc.tensor(1.0, requires_grad=True).register_hook(lambda g: g) as handle:
        assert handle.id >= 0


def test_a_hook_sees_a_copy_the_engine_does_not_write_into():
    seen = []
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(seen.append)
    (x * x).sum().backward()
    (x * x).sum().backward()
    assert [s.tolist() for s in seen] == [[2.0, 4.0], [2.0, 4.0]]
    assert x.grad.tolist() == [4.0, 8.0]
