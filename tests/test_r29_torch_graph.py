"""PyTorch's graph in gradcli (issue 29): the recorder of what torch does, the graph model built from
``grad_fn.next_functions``, and ``gc.render.graph`` of torch tensors and functions. Every value and
gradient is compared with PyTorch's own (the tensors, ``retain_grad()``, ``torch.autograd.grad``)."""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from gradcli.lang.frameworks.torch_record import CustomCall, recording_torch  # noqa: E402

torch.set_num_threads(1)


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k=2.0):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


class Exp(torch.autograd.Function):  # forward without ctx, setup_context apart
    @staticmethod
    def forward(x):
        return x.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.saved_tensors[0]


# --- the recorder ---------------------------------------------------------------------------------


def test_recorder_values_ops_lines_of_each_node():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with recording_torch() as record:
        a = x * 3
        b = a.sin()
        c = b.sum()
    for tensor, op in ((a, "mul"), (b, "sin"), (c, "sum")):
        node = tensor.grad_fn
        assert record.ops[node] == op
        assert torch.equal(record.values[node], tensor.detach())
        assert record.lines[node].startswith("test_r29_torch_graph.py:")
    assert x.grad is None  # nothing ran backward


def test_recorder_copies_values_before_in_place_changes():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with recording_torch() as record:
        a = x * 2
        node = a.grad_fn
        a.add_(1)
    assert record.values[node].tolist() == [2.0, 4.0]
    assert record.values[a.grad_fn].tolist() == [3.0, 5.0]
    assert record.ops[a.grad_fn] == "add_"  # (the aten op itself: in place)


def test_recorder_module_scopes_paths_and_parameter_names():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    x = torch.ones(2, 3, dtype=torch.float64)
    with recording_torch({"model": model}) as record:
        y = model(x).sum()
    assert record.modules == {"model": "Sequential", "model.0": "Linear", "model.1": "Tanh", "model.2": "Linear"}
    assert record.scopes[y.grad_fn.next_functions[0][0]] == "model.2"  # the last Linear's addmm
    assert record.leaf_names[id(model[0].weight)] == "model.0.weight"
    assert record.leaf_names[id(model[2].bias)] == "model.2.bias"
    assert y.grad_fn not in record.scopes  # the sum ran outside the model


def test_recorder_unnamed_root_is_named_by_its_class():
    layer = torch.nn.Linear(2, 2)
    with recording_torch() as record:
        layer(torch.ones(2))
    assert record.modules == {"linear": "Linear"}
    assert record.leaf_names[id(layer.weight)] == "linear.weight"


def test_recorder_custom_function_calls():
    model = torch.nn.Linear(2, 2).double()
    x = torch.tensor([1.0, -1.0], dtype=torch.float64, requires_grad=True)
    with recording_torch({"model": model}) as record:
        y = Twice.apply(x, 3.0)
        z = Exp.apply(y)
    first, second = record.calls
    assert isinstance(first, CustomCall)
    assert first.function is Twice and first.node is y.grad_fn
    assert torch.equal(first.args[0], x.detach()) and first.args[1] == 3.0 and not first.args[0].requires_grad
    assert first.line.startswith("test_r29_torch_graph.py:") and first.scope is None
    assert second.function is Exp and second.node is z.grad_fn and torch.equal(second.args[0], y.detach())
    assert record.ops[y.grad_fn] == "Twice" and record.ops[z.grad_fn] == "Exp"
    assert torch.equal(record.values[z.grad_fn], z.detach())
    assert torch.equal(record.values[y.grad_fn], y.detach())


def _concurrent_work(k: int, results: dict[int, object]) -> None:
    layer = torch.nn.Linear(3, 3)
    x = torch.ones(3, requires_grad=True)
    with recording_torch({f"layer{k}": layer}) as record:
        y = x
        for i in range(60):
            y = torch.sin(y) if k == 0 else torch.cos(y)
            if i % 20 == 0:
                y = Twice.apply(layer(y))
    results[k] = record


def test_recorder_two_threads_record_apart():
    for _ in range(10):
        results: dict[int, object] = {}
        threads = [threading.Thread(target=_concurrent_work, args=(k, results)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for k, record in results.items():
            assert set(record.ops.values()) - {"t", "addmm", "view", "mv", "add", "Twice"} == {("sin", "cos")[k]}
            assert set(record.modules) == {f"layer{k}"}
            assert len(record.calls) == 3
            assert all(c.scope is None for c in record.calls)


def test_recorder_leaves_no_hooks_or_profiler_behind():
    import sys

    before = sys.getprofile()
    layer = torch.nn.Linear(2, 2)
    with recording_torch() as record:
        pass
    layer(torch.ones(2))
    assert sys.getprofile() is before and record.modules == {}
