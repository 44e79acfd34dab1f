"""A real model's graph, light (issue 35): a value or gradient over 64 elements is kept and written as
its statistics (each NumPy's own, in float64, on the whole tensor); ``--arrays FILE.npz`` writes them
whole; one Graphviz layout serves the page and every picture of a graph."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

import gradcli as gc
from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.errors import UsageError
from gradcli.render import graph, layout, recording
from gradcli.stats import FULL_LIMIT, TensorStats, light, tensor_stats
from tests.frameworks import need

runner = CliRunner()
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def run(*args: str):
    result = runner.invoke(app, expression_after_dashes(list(args)))
    assert "Traceback" not in result.stdout + result.stderr
    return result


def vector(values) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


# --- each statistic is NumPy's own ------------------------------------------------------------------

rng = np.random.default_rng(35)
ARRAYS = {
    "float32": rng.standard_normal((4, 5, 7)).astype(np.float32),
    "float64 with zeros": np.where(rng.random(300) < 0.3, 0.0, rng.standard_normal(300)),
    "nan and inf": np.array([1.0, np.nan, np.inf, -np.inf, 0.0, 2.5, np.nan] * 20),
    "inf only": np.full(70, -np.inf),
    "int64": rng.integers(-1000, 1000, (9, 11)),
    "bool": rng.random(100) < 0.25,
    "0-d": np.array(3.25),
    "large": rng.standard_normal(100_003) * 1e3 + 7,
}


def same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


@pytest.mark.parametrize("name", ARRAYS)
def test_each_statistic_equals_numpys_on_the_whole_tensor(name):
    original = ARRAYS[name]
    a = original.astype(np.float64)
    s = tensor_stats(original)
    with np.errstate(all="ignore"):
        expected = {"mean": np.mean(a), "std": np.std(a), "min": np.min(a), "max": np.max(a),
                    "norm": np.linalg.norm(a), "zeros": np.count_nonzero(a == 0) / a.size}  # fmt: skip
    for key, value in expected.items():
        assert same(getattr(s, key), float(value)), (key, getattr(s, key), value)
    assert s.nan == np.count_nonzero(np.isnan(a)) and s.inf == np.count_nonzero(np.isinf(a))
    assert s.nonfinite == np.count_nonzero(~np.isfinite(a))
    assert s.shape == original.shape and s.dtype == str(original.dtype) and s.size == original.size
    assert s.array is None  # (only what was asked for is held)


def test_statistics_of_nan_and_inf_are_counted_and_written_as_json_strings():
    s = tensor_stats(ARRAYS["nan and inf"])
    assert (s.nan, s.inf, s.nonfinite) == (40, 40, 80)
    written = json.loads(json.dumps(gc.text.jsonable(s.to_dict())))
    assert written["mean"] == "nan" and written["nonfinite"] == 80 and written["zeros"] == 20 / 140


def test_an_empty_tensor_has_no_mean_and_a_zero_norm():
    s = tensor_stats(np.zeros((0, 3), dtype=np.float32))
    assert s.to_dict() == {"shape": [0, 3], "dtype": "float32", "mean": None, "std": None, "min": None, "max": None,
                           "norm": 0.0, "zeros": 0.0, "nonfinite": 0, "nan": 0, "inf": 0}  # fmt: skip


def test_a_complex_tensor_has_the_statistics_of_its_modulus():
    z = np.array([3 + 4j, 0j] * 40)
    s = tensor_stats(z)
    assert (s.mean, s.max, s.min, s.zeros, s.to_dict()["of"]) == (2.5, 5.0, 0.0, 0.5, "modulus")


def test_light_keeps_64_elements_whole_and_summarises_65():
    assert FULL_LIMIT == 64
    small, big = np.arange(64.0), np.arange(65.0)
    assert light(small) is small and light(None) is None
    assert isinstance(light(big), TensorStats) and light(big, keep=True).array is big


# --- the views: JSON, page, picture, tree -----------------------------------------------------------


def test_a_65_element_value_is_statistics_and_a_64_element_one_a_list():
    for n, whole in ((64, True), (65, False)):
        v = np.linspace(-1, 1, n)
        result = run("graph", "sum(v*v)", "--at", f"v={vector(v)}", "--json")
        assert result.exit_code == 0, result.stderr
        data = json.loads(result.stdout)
        leaf = next(node for node in data["nodes"] if node["label"] == "v")
        if whole:
            assert leaf["value"] == v.tolist() and leaf["grad"] == (2 * v).tolist()
            assert not any("statistics" in note for note in data["notes"])
        else:
            assert leaf["value"]["shape"] == [65] and leaf["value"]["mean"] == np.mean(v)
            assert leaf["value"]["norm"] == np.linalg.norm(v) and leaf["grad"]["max"] == 2.0
            assert leaf["value"]["zeros"] == 1 / 65  # (linspace's middle point)
            note = next(note for note in data["notes"] if "statistics" in note)
            assert "over 64 elements" in note and "--arrays FILE.npz" in note
        assert data["hidden"] == 0  # (statistics leave nothing out of the view: no node is hidden)


def test_the_tree_text_and_picture_label_show_the_statistics():
    v = np.arange(100.0)
    tree = run("graph", "sum(v*2)", "--at", f"v={vector(v)}", "--format", "tree", "--digits", "4")
    assert tree.exit_code == 0
    assert (
        "v  (variable)  shape (100,)  value [(100,) float64: mean 49.5, std 28.87, min 0, max 99, norm 573, 1% zeros]"
        in tree.stdout
    )
    text = run("graph", "sum(v*2)", "--at", f"v={vector(v)}", "--format", "text")
    assert "grad=[(100,) float64: mean 2, std 0, min 2, max 2, norm 20]" in text.stdout
    dot = run("graph", "sum(v*2)", "--at", f"v={vector(v)}", "--format", "dot").stdout
    assert "value [(100,) float64: mean 49.5, std 28.8661, min 0, max 99, norm 573.018, 1% zeros]" in dot  # 6 digits


def test_the_page_json_carries_the_statistics():
    from gradcli.render.page import model_json

    x = gc.tensor(np.arange(80.0), requires_grad=True, name="x")
    with recording() as trace:
        y = (x * x).sum()
    data = model_json(graph(y, trace=trace).model)
    entry = data["nodes"][0]
    assert entry["value"]["max"] == 79.0 and entry["grad"]["mean"] == 79.0  # d/dx of x.x = 2x, mean 2*39.5
    assert entry["value_text"].startswith("[(80,) float64: mean 39.5")


# --- --arrays FILE.npz ----------------------------------------------------------------------------------


def test_arrays_npz_round_trips_every_value_bit_for_bit(tmp_path):
    v = np.concatenate([rng.standard_normal(69), [0.1 + 0.2]])  # digits no decimal text keeps short
    out = tmp_path / "g.json"
    npz = tmp_path / "g.npz"
    result = run("graph", "sum(sin(v) * w)", "--at", f"v={vector(v)}", "--at", "w=3", "-o", str(out),
                 "--arrays", str(npz))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert f"wrote {npz} (every value and gradient whole)" in result.stderr
    data = json.loads(out.read_text())
    by_label = {n["label"]: n["id"] for n in data["nodes"]}
    with np.load(npz) as arrays:
        kept = dict(arrays)
    sin = np.sin(v)
    expected = {
        f"{by_label['v']}.value": v,
        f"{by_label['v']}.grad": np.cos(v) * 3,
        f"{by_label['sin(v)']}.value": sin,
        f"{by_label['sin(v)']}.grad": np.full(70, 3.0),
        f"{by_label['w']}.value": np.array(3.0),
        f"{by_label['w']}.grad": np.array(np.sum(sin)),
    }
    for key, value in expected.items():
        assert kept[key].dtype == np.float64 and kept[key].tobytes() == value.tobytes(), key
    assert not list(tmp_path.glob("*.tmp*")) and sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "g.npz"]


def test_library_save_arrays_needs_the_arrays_kept(tmp_path):
    x = gc.tensor(np.linspace(0, 1, 100), requires_grad=True, name="x")
    with recording() as trace:
        y = gc.exp(x).sum()
    with pytest.raises(UsageError, match=r"kept only the statistics of its value: build the graph with --arrays"):
        graph(y, trace=trace).save_arrays(tmp_path / "a.npz")
    assert not (tmp_path / "a.npz").exists()
    view = graph(y, trace=trace, arrays=True)
    assert isinstance(view.nodes[0].value, TensorStats)  # (the views still show statistics)
    view.save_arrays(tmp_path / "a.npz")
    with np.load(tmp_path / "a.npz") as kept:
        assert kept["n0.value"].tobytes() == x.detach().numpy().tobytes()
        assert kept["n0.grad"].tobytes() == np.exp(x.detach().numpy()).tobytes()


def test_arrays_and_output_must_be_two_files(tmp_path):
    target = tmp_path / "g.npz"
    result = run("graph", "x*2", "--at", "x=1", "-o", str(target), "--format", "json", "--arrays", str(target))
    assert result.exit_code == 2
    assert result.stderr == f"error: --arrays {target} is also -o: write the arrays and the view to two files\n"


def test_torch_values_are_statistics_equal_to_numpys_and_whole_in_the_npz(tmp_path):
    torch = need("torch")
    torch.manual_seed(0)
    layer = torch.nn.Linear(10, 7)  # weight: 70 elements (float32), bias 7

    def f(x):
        return layer(x).tanh().sum()

    x = torch.randn(3, 10)
    view = gc.render.graph(f, x, arrays=True)
    weight = next(n for n in view.nodes if n.name == "layer.weight")
    expected = layer.weight.detach().numpy()
    assert isinstance(weight.value, TensorStats) and weight.value.dtype == "float32"
    assert weight.value.mean == np.mean(expected.astype(np.float64)) and weight.value.std == np.std(
        expected.astype(np.float64)
    )
    bias = next(n for n in view.nodes if n.name == "layer.bias")
    assert isinstance(bias.value, np.ndarray) and bias.value.shape == (7,)  # (7 elements: whole)
    view.save_arrays(tmp_path / "t.npz")
    layer.zero_grad()
    f(x).backward()
    with np.load(tmp_path / "t.npz") as kept:
        assert kept[f"{weight.id}.value"].tobytes() == expected.tobytes()
        assert kept[f"{weight.id}.grad"].tobytes() == layer.weight.grad.numpy().tobytes()
    assert graph(f, x).json()["nodes"][int(weight.id[1:])]["value"]["dtype"] == "float32"


# --- one layout for every format -------------------------------------------------------------------------


@needs_dot
def test_the_page_and_its_pictures_share_one_layout(monkeypatch, tmp_path):
    runs: list[tuple[str, str]] = []
    real = layout.run_dot

    def counted(source, fmt, *args, engine="dot", **kwargs):
        runs.append((engine, fmt))
        return real(source, fmt, *args, engine=engine, **kwargs)

    monkeypatch.setattr(layout, "run_dot", counted)
    x = gc.tensor(0.3, requires_grad=True, name="x")
    with recording() as trace:
        y = gc.sin(x * 3.5) + x * x  # (an expression no other test draws: no layout kept from before)
    view = graph(y, trace=trace)
    page = view.html()
    view.save(tmp_path / "g.png")
    view.save(tmp_path / "g.svg")
    assert runs.count(("dot", "dot")) == 1  # the one layout; each format drawn from it without a second
    assert [r for r in runs if r[0] == "dot"] == [("dot", "dot")]
    assert sorted(fmt for engine, fmt in runs if engine == "neato") == ["png", "svg", "svg"]
    assert "<svg" in page and (tmp_path / "g.svg").read_text().count('class="node"') == len(view.nodes)
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
