"""A real model's graph is light (issue 35): a torch value or gradient over 64 elements is reduced to
its statistics when it is made (the recording's dispatch, its backward hooks, gradcli's own gradient
pass) and the tensor let go; a parameter's view (a tied embedding's ``weight.t()``) is never copied;
whole arrays only on request (``gc.render.recording(arrays=True)``, ``--arrays``), held once. And each
output of a node of several (``unsafe_split`` in ``nn.GRUCell``, ``mkldnn_rnn_layer`` in ``nn.LSTM``)
is a node with its own value and gradient, named after its node."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

import gradcli as gc
from gradcli.render.recorded import torch_record_of
from gradcli.stats import FULL_LIMIT, TensorStats
from tests.frameworks import need

VOCAB, WIDTH, TOKENS = 1000, 16, 8  # a tied embedding of 16,000 elements: 250 times the largest value kept


def tied_model(torch):
    """A language model whose output layer is its embedding's weight (``F.linear(h, wte.weight)``: aten's
    ``t`` of the parameter, as GPT-2's tied ``lm_head``), with its loss on token ids."""
    torch.manual_seed(35)

    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = torch.nn.Embedding(VOCAB, WIDTH)
            self.mix = torch.nn.Linear(WIDTH, WIDTH)

        def forward(self, ids):
            h = self.mix(self.wte(ids)).tanh()
            logits = torch.nn.functional.linear(h, self.wte.weight)
            return torch.nn.functional.cross_entropy(logits, ids)

    return Tied(), torch.randint(0, VOCAB, (TOKENS,), generator=torch.Generator().manual_seed(0))


def held_elements(record) -> list[tuple[str, int]]:
    """Every tensor or array over ``FULL_LIMIT`` elements a recording holds (values, outputs, gradients)."""
    found = []
    for name, kept in [("value", v) for v in record.values.values()] + [
        ("output", v) for v in record.outputs.values()
    ] + [("grad", g) for grads in record.grads.values() for g in grads]:  # fmt: skip
        if kept is not None and not isinstance(kept, TensorStats) and kept.numel() > FULL_LIMIT:
            found.append((name, kept.numel()))
    return found


def assert_numpys(stats, tensor):
    """Each statistic equals NumPy's on the whole tensor, in float64."""
    a = tensor.detach().numpy().astype(np.float64)
    assert isinstance(stats, TensorStats) and stats.shape == tuple(tensor.shape) and stats.array is None
    assert (stats.mean, stats.std, stats.min, stats.max) == (np.mean(a), np.std(a), np.min(a), np.max(a))
    assert stats.norm == np.linalg.norm(a) and stats.zeros == np.count_nonzero(a == 0) / a.size


def test_a_recorded_tied_embedding_model_holds_no_large_tensor_and_numpys_statistics():
    torch = need("torch")
    model, ids = tied_model(torch)
    with gc.render.recording():
        loss = model(ids)
    loss.backward()
    record = torch_record_of([loss])
    assert held_elements(record) == []  # (before: a copy of every output and gradient, the 16,000 of t() too)
    graph = gc.render.graph(loss).model
    big = [(n.id, key) for n in graph.nodes for key in ("value", "grad")
           if isinstance(getattr(n, key), np.ndarray) and getattr(n, key).size > FULL_LIMIT]  # fmt: skip
    assert big == []
    transpose = next(n for n in graph.nodes if n.op == "t" and n.shape == (WIDTH, VOCAB))
    assert_numpys(transpose.value, model.wte.weight.t())
    logits = next(n for n in graph.nodes if n.shape == (TOKENS, VOCAB) and n.op in ("mm", "matmul", "addmm"))
    h = model.mix(model.wte(ids)).tanh()
    assert_numpys(logits.value, h @ model.wte.weight.t())
    weight = next(n for n in graph.nodes if n.name == "model.wte.weight")
    assert_numpys(weight.value, model.wte.weight)
    assert_numpys(weight.grad, model.wte.weight.grad)  # the tied weight's: embedding's and output layer's


def test_the_function_road_reduces_each_gradient_when_its_hook_sees_it():
    torch = need("torch")
    model, ids = tied_model(torch)
    seen = {}

    def f(i):
        e = model.wte(i)  # (its gradient comes last: is the logits' still held by then?)
        e.register_hook(lambda g: seen.__setitem__("logits' held at the end", seen["logits"]() is not None))
        logits = torch.nn.functional.linear(model.mix(e).tanh(), model.wte.weight)
        logits.register_hook(lambda g: seen.__setitem__("logits", weakref.ref(g)))
        return torch.nn.functional.cross_entropy(logits, i)

    graph = gc.render.graph(f, ids).model
    assert seen["logits' held at the end"] is False  # (before: every gradient held whole until the pass ended)
    logits = next(n for n in graph.nodes if n.shape == (TOKENS, VOCAB) and n.op in ("mm", "matmul", "addmm"))
    h = model.mix(model.wte(ids)).tanh()
    out = h @ model.wte.weight.t()
    out.retain_grad()
    torch.nn.functional.cross_entropy(out, ids).backward()
    assert_numpys(logits.value, out)
    assert_numpys(logits.grad, out.grad)
    weight = next(n for n in graph.nodes if n.name == "model.wte.weight")
    assert_numpys(weight.grad, model.wte.weight.grad)


def test_arrays_keep_a_parameters_view_as_itself_and_write_it_whole(tmp_path):
    torch = need("torch")
    model, ids = tied_model(torch)
    with gc.render.recording(arrays=True):
        loss = model(ids)
    loss.backward()
    record = torch_record_of([loss])
    kept = next(v for node, v in record.values.items() if record.ops[node] == "t" and v.shape == (WIDTH, VOCAB))
    assert kept.data_ptr() == model.wte.weight.data_ptr()  # the parameter's own memory: no copy
    view = gc.render.graph(loss, arrays=True)
    transpose = next(n for n in view.nodes if n.op == "t" and n.shape == (WIDTH, VOCAB))
    assert_numpys(TensorStats(transpose.value.shape, transpose.value.dtype, **_stats(transpose.value)),
                  model.wte.weight.t())  # fmt: skip
    view.save_arrays(tmp_path / "a.npz")
    with np.load(tmp_path / "a.npz") as arrays:
        assert arrays[f"{transpose.id}.value"].tobytes() == model.wte.weight.detach().t().numpy().tobytes()
        weight = next(n for n in view.nodes if n.name == "model.wte.weight")
        assert arrays[f"{weight.id}.grad"].tobytes() == model.wte.weight.grad.numpy().tobytes()


def _stats(s: TensorStats) -> dict:
    return {k: getattr(s, k) for k in ("mean", "std", "min", "max", "norm", "zeros", "nan", "inf")}


# --- nodes of several outputs ----------------------------------------------------------------------


def ports(graph, op):
    """The nodes of each output of the nodes of ``op``, by node: {node id: [its outputs' nodes]}."""
    found = {}
    for n in graph.nodes:
        if n.op == op:
            found[n.id] = [graph.node(e.target) for e in graph.consumers_of(n.id) if graph.node(e.target).op == "item"]
    return found


def test_a_gru_cells_split_outputs_have_torchs_values_gradients_and_their_own_names():
    torch = need("torch")
    torch.manual_seed(1)
    cell = torch.nn.GRUCell(3, 4).double()
    x, h = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    with gc.render.recording():
        y = cell(x, h).pow(2).sum()
    y.backward()
    graph = gc.render.graph(y, max_nodes="all").model
    gi = torch.nn.functional.linear(x, cell.weight_ih, cell.bias_ih).detach().requires_grad_()
    gh = torch.nn.functional.linear(h, cell.weight_hh, cell.bias_hh).detach().requires_grad_()
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    ((1 - z) * n + z * h).pow(2).sum().backward()
    (input_split, input_outputs), (hidden_split, hidden_outputs) = ports(graph, "unsafe_split").items()
    for outputs, whole_of, split in ((input_outputs, gi, input_split), (hidden_outputs, gh, hidden_split)):
        assert [p.label for p in outputs] == [f"{split}[{k}]" for k in range(3)]
        for k, port in enumerate(outputs):
            np.testing.assert_array_equal(port.value, whole_of.detach()[:, 4 * k : 4 * k + 4].numpy())
            np.testing.assert_allclose(port.grad, whole_of.grad[:, 4 * k : 4 * k + 4].numpy(), rtol=1e-12)
    # each consumer names the output it reads, of its own split: the reset gate adds output 0 of both
    reset = next(n for n in graph.nodes if n.op == "add_" and {e.source for e in graph.inputs_of(n.id)}
                 == {input_outputs[0].id, hidden_outputs[0].id})  # fmt: skip
    assert "unsafe_split[0] + unsafe_split[0]" not in reset.label
    a, b = input_outputs[0].key, hidden_outputs[0].key
    assert reset.label in (f"{a} + {b}", f"{b} + {a}")
    assert len({p.key for p in input_outputs + hidden_outputs}) == 6


def test_an_lstms_outputs_have_the_values_and_gradients_torch_gives():
    torch = need("torch")
    torch.manual_seed(2)
    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    x = torch.randn(2, 5, 3)
    with gc.render.recording():
        out, (h, c) = lstm(x)  # (the loss taken outside the recording: the recording is found all the same)
    kept = {}
    for name, t in (("out", out), ("h", h), ("c", c)):
        t.register_hook(lambda g, name=name: kept.__setitem__(name, g.detach().clone()))
    y = out.pow(2).sum() + (h * c).sum()
    y.backward()
    graph = gc.render.graph(y, max_nodes="all").model
    rnn = [n for n in graph.nodes if n.op in ("mkldnn_rnn_layer", "_thnn_fused_lstm_cell", "lstm")]
    assert rnn, [n.op for n in graph.nodes]
    outputs = ports(graph, rnn[0].op)[rnn[0].id]
    expected = [out.transpose(0, 1), h[0], c[0]]  # (batch_first: the layer runs time-major)
    grads = [kept["out"].transpose(0, 1), kept["h"][0], kept["c"][0]]
    assert len(outputs) == 3
    for port, value, grad in zip(outputs, expected, grads):
        assert port.value is not None and port.grad is not None, port.label
        np.testing.assert_array_equal(port.value, value.detach().numpy())
        np.testing.assert_allclose(port.grad, grad.numpy(), rtol=1e-6, atol=1e-7)
    assert pytest.approx(y.item()) == float(graph.node(graph.outputs[0]).value)
