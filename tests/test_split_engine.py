"""The engine after its split into schedule, loop and accumulate step (issue 14, part "split")."""

from __future__ import annotations

import pytest

import gradcli as gc


def test_backward_with_an_input_named_twice_accumulates_once():
    # it raised IndexError: the second mention took a capture slot that did not exist
    x = gc.tensor(2.0, requires_grad=True)
    (x * x).backward(inputs=[x, x])
    assert x.grad.item() == 4.0


def test_backward_with_an_input_named_twice_matches_pytorch():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    t = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    (t * t * t).backward(inputs=[t, t])
    x = gc.tensor(2.0, requires_grad=True)
    (x * x * x).backward(inputs=[x, x])
    assert x.grad.item() == t.grad.item() == 12.0


def test_grad_and_backward_agree_on_a_pruned_multi_output_graph():
    x = gc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = gc.tensor(0.5, requires_grad=True)
    y = gc.sum(gc.sin(x) * w + x * x)
    (dx,) = gc.grad(y, x, retain_graph=True)
    y.backward(inputs=[x])
    assert w.grad is None  # pruned: only x was asked for
    assert dx.tolist() == x.grad.tolist()
    assert dx.tolist() == pytest.approx(
        [
            0.5 * c + 2 * v
            for v, c in zip([1.0, 2.0, 3.0], [0.5403023058681398, -0.4161468365471424, -0.9899924966004454])
        ]
    )


def test_an_engine_owned_buffer_is_added_in_place_but_a_users_gradient_never_is():
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    seed = gc.tensor([1.0, 1.0]).numpy().copy()
    y = x + x  # the seed passes straight through "+" to x twice
    y.backward(seed)
    assert seed.tolist() == [1.0, 1.0]
    assert x.grad.tolist() == [2.0, 2.0]


def test_grad_rejects_a_non_tensor_input_and_backward_a_tensor_without_graph():
    x = gc.tensor(1.0, requires_grad=True)
    with pytest.raises(TypeError, match="inputs must be tensors, got float"):
        gc.grad(x * 2, [1.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x * 2).backward(inputs=[1.0])
