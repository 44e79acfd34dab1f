"""Issue 19, `gradcli plot`: the data drawn is f and its derivatives from autograd (checked against
known derivatives and PyTorch), poles and jumps are breaks, two variables give the gradient field,
pictures are written whole (PNG, SVG, PDF), a terminal gets Braille curves, bad input one error."""

from __future__ import annotations

import struct
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gradcli.cli import expression_after_dashes
from gradcli.cli.app import app
from gradcli.errors import install_hint
from gradcli.lang.program import load
from gradcli.render.plot import broken, curves, field

runner = CliRunner()


def run(*args: str, input: str | None = None):
    result = runner.invoke(app, expression_after_dashes(["plot", *args]), input=input)
    assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
    return result


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


# --- the data: f, f′, f″ from autograd on the whole grid at once --------------------------------------


def test_curves_are_f_and_its_known_derivatives():
    c = curves(load("x^2 * sin(3*x)"), "x", (-2.0, 3.0), {}, order=2, samples=41)
    x = np.linspace(-2, 3, 41)
    assert np.array_equal(c.x, x)
    np.testing.assert_allclose(c.raw[0], x**2 * np.sin(3 * x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c.raw[1], 2 * x * np.sin(3 * x) + 3 * x**2 * np.cos(3 * x), rtol=1e-12, atol=1e-12)
    second = 2 * np.sin(3 * x) + 12 * x * np.cos(3 * x) - 9 * x**2 * np.sin(3 * x)
    np.testing.assert_allclose(c.raw[2], second, rtol=1e-12, atol=1e-12)
    assert len(c.drawn) == 3 and c.labels == ["f(x)", "f′(x)", "f″(x)"]
    for drawn, raw in zip(c.drawn, c.raw):  # a smooth curve: drawn as computed, no break
        assert np.array_equal(drawn, raw)


def test_curves_equal_pytorch_float64():
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    c = curves(load("tanh(x) * exp(-x^2/2) + log(1 + x^2)"), "x", (-3.0, 3.0), {}, order=2, samples=61)
    t = torch.tensor(np.linspace(-3, 3, 61), dtype=torch.float64, requires_grad=True)
    f = torch.tanh(t) * torch.exp(-(t**2) / 2) + torch.log(1 + t**2)
    (d1,) = torch.autograd.grad(f.sum(), t, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), t)
    for mine, theirs in zip(c.raw[:3], (f, d1, d2)):
        np.testing.assert_allclose(mine, theirs.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_parameters_from_at_and_the_tangent_point():
    c = curves(load("a*x^2"), "x", (-1.0, 1.0), {"a": np.float64(2.0)}, samples=5, at=0.5)
    np.testing.assert_allclose(c.raw[1], 4 * np.linspace(-1, 1, 5))
    assert c.at == (0.5, 0.5, 2.0)  # a, f(a) = 2 * 0.25, f'(a) = 4 * 0.5


def test_a_python_function_gives_the_same_curves(tmp_path):
    (tmp_path / "model.py").write_text("def f(x):\n    return x**3 - 2*x\n")
    expected = curves(load("x^3 - 2*x"), "x", (-2.0, 2.0), {}, order=2, samples=9)
    found = curves(load(f"{tmp_path / 'model.py'}:f"), "x", (-2.0, 2.0), {}, order=2, samples=9)
    for a, b in zip(found.raw, expected.raw):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# --- breaks: poles and jumps are not drawn as vertical lines ---------------------------------------------


def test_a_pole_between_samples_is_a_break():
    c = curves(load("1/x"), "x", (-1.0, 2.0), {}, samples=801)  # 0 is not on this grid
    gaps = c.xs[0][np.isnan(c.drawn[0])]
    assert len(gaps) == 1
    below, above = c.x[c.x < 0].max(), c.x[c.x > 0].min()
    assert gaps[0] == pytest.approx((below + above) / 2)  # the NaN sits between the two samples around 0
    assert np.array_equal(np.delete(c.drawn[0], np.flatnonzero(np.isnan(c.drawn[0]))), 1 / c.x)  # nothing else


def test_a_pole_on_the_grid_is_a_break():
    c = curves(load("1/x"), "x", (-1.0, 1.0), {}, samples=801)  # 0 is sample 400: 1/0 = inf
    assert np.isnan(c.drawn[0][400]) and c.xs[0][400] == 0
    assert np.isnan(c.drawn[0]).sum() == 1 and np.isfinite(np.delete(c.drawn[0], 400)).all()


@pytest.mark.parametrize(
    "expression, span, jumps",
    [("sign(x)", (-1.0, 1.4), [0.0]), ("floor(x)", (-2.5, 2.5), [-2.0, -1.0, 0.0, 1.0, 2.0])],
)
def test_steps_are_breaks(expression, span, jumps):
    c = curves(load(expression), "x", span, {}, samples=401)
    gaps = c.xs[0][np.isnan(c.drawn[0])]
    assert len(gaps) == len(jumps)
    np.testing.assert_allclose(gaps, jumps, atol=(span[1] - span[0]) / 400)


def test_a_kink_breaks_the_derivative_not_the_function():
    c = curves(load("abs(x)"), "x", (-1.0, 1.4), {}, samples=401)
    assert not np.isnan(c.drawn[0]).any()  # abs itself is continuous
    gaps = c.xs[1][np.isnan(c.drawn[1])]
    assert len(gaps) == 1 and abs(gaps[0]) < 2.4 / 400  # abs' = sign jumps at 0


def test_tan_breaks_once_at_each_pole():
    c = curves(load("tan(x)"), "x", (-5.0, 5.0), {}, samples=801)
    gaps = c.xs[0][np.isnan(c.drawn[0])]
    np.testing.assert_allclose(gaps, [-3 * np.pi / 2, -np.pi / 2, np.pi / 2, 3 * np.pi / 2], atol=10 / 800)


def test_fast_smooth_curves_have_no_break():
    x = np.linspace(-10, 10, 801)
    for y, slope in ((np.sin(100 * x), 100 * np.cos(100 * x)), (np.exp(x), np.exp(x)), (x**9, 9 * x**8)):
        xs, ys = broken(x, y, slope)
        assert xs is x and not np.isnan(ys).any()


# --- two variables: the gradient field -------------------------------------------------------------------


def test_the_field_is_f_and_its_gradient():
    d = field(load("x^2*y + sin(x)"), ("x", "y"), ((-2.0, 2.0), (-1.0, 3.0)), {}, samples=21, at=(1.0, 0.5))
    gx, gy = np.meshgrid(np.linspace(-2, 2, 21), np.linspace(-1, 3, 21))
    np.testing.assert_allclose(d.f, gx**2 * gy + np.sin(gx), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d.gx, 2 * gx * gy + np.cos(gx), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d.gy, gx**2, rtol=1e-12, atol=1e-12)
    assert d.at == pytest.approx((1.0, 0.5, 0.5 + np.sin(1), 1 + np.cos(1), 1.0), rel=1e-12)


# --- the command: pictures written whole -----------------------------------------------------------------


def test_png_with_tangent(tmp_path):
    path = tmp_path / "plot.png"
    done = run("x^2 * sin(3*x)", "--range", "-3,3", "--at", "x=1", "-o", str(path))
    assert (done.exit_code, done.stdout, done.stderr) == (0, "", f"wrote {path}\n")
    assert png_size(path) == (880, 550)  # 8 x 5 inches at 110 dpi: readable at 100 % on a laptop
    assert path.stat().st_size < 150_000
    image = pytest.importorskip(
        "matplotlib.image", reason="reading the picture back needs Matplotlib (the plot extra)"
    ).imread(path)
    assert image.shape[:2] == (550, 880)


def test_svg_keeps_the_legend_and_title_as_text(tmp_path):
    path = tmp_path / "plot.svg"
    done = run("x^3 - x", "--range=-2,2", "--order", "2", "--at", "x=0.5", "-o", str(path))
    assert done.exit_code == 0, done.stderr
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    texts = "".join(root.itertext())
    for label in ("f(x)", "f′(x)", "f″(x)", "tangent at x = 0.5", "x^3 - x"):
        assert label in texts, label


def test_two_variables_svg_and_pdf(tmp_path):
    svg = tmp_path / "field.svg"
    done = run("x*y + y^2", "--range", "x=-1,1", "--range", "y=0,3", "--at", "x=0.5,y=1", "-o", str(svg))
    assert done.exit_code == 0, done.stderr
    texts = "".join(ET.parse(svg).getroot().itertext())
    assert "∇f = (∂f/∂x, ∂f/∂y)" in texts and "∇f there = (1, 2.5)" in texts  # (y, x + 2y) at (0.5, 1)
    pdf = tmp_path / "field.pdf"
    assert run("x*y", "--range", "-1,1", "-o", str(pdf)).exit_code == 0
    assert pdf.read_bytes()[:5] == b"%PDF-"


def test_parameters_fixed_with_at(tmp_path):
    path = tmp_path / "a.svg"
    assert run("a*x^2", "--at", "a=2", "--range", "-1,1", "-o", str(path)).exit_code == 0
    assert "a = 2" in "".join(ET.parse(path).getroot().itertext())


def test_file_and_stdin_forms(tmp_path):
    program = tmp_path / "prog.gc"
    program.write_text("y = x^2\ny - 1\n")
    for args, given in ((["-f", str(program)], None), (["-"], "y = x^2\ny - 1\n")):
        path = tmp_path / "p.svg"
        done = run(*args, "--range", "-1,1", "-o", str(path), input=given)
        assert done.exit_code == 0, done.stderr
        assert "y = x^2; y - 1" in "".join(ET.parse(path).getroot().itertext())
        path.unlink()


# --- bad input: one error line, the documented exit code, no file touched ----------------------------------

ERRORS = [
    (["x^2", "--range", "2,1"], "error: --range 2,1: the start must be below the end"),
    (["x^2", "--range", "z=0,1"], "error: --range z=...: 'z' is not a variable of the expression (its variables: x)"),
    (["x^2", "--range", "0,1,2"], "error: --range 0,1,2: give two numbers, the start and the end (--range -2,2)"),
    (["x^2", "--range", "0,abc"], "error: --range 0,abc: 'abc' is not a number"),
    (
        ["x*y*z", "--range", "-1,1"],
        "error: plot draws one or two variables, and 3 are free: x, y, z; give the others a value with --at "
        "(say --at z=1) or choose them with --range NAME=A,B",
    ),
    (["x^2", "--order", "3"], "error: --order must be 1 (f and f′) or 2 (f, f′ and f″), got 3"),
    (["x*y", "--order", "2"], "error: --order 2 draws f″ of one variable; a plot of two shows f and its gradient"),
    (["[x, x]"], "error: plot needs one number for each point; the output has shape (2,)"),
    (["3"], "error: the expression has no variable to plot"),
    (["x*y", "--at", "x=1,y=[1,2]"], "error: --at y: the point of a plot is one number for each variable"),
]


@pytest.mark.parametrize("args, message", ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_bad_input_leaves_the_file_alone(tmp_path, args, message):
    path = tmp_path / "old.png"
    path.write_bytes(b"old picture")
    done = run(*args, "-o", str(path))
    assert (done.exit_code, done.stdout, done.stderr) == (2, "", message + "\n")
    assert path.read_bytes() == b"old picture"


def test_a_picture_format_from_the_extension(tmp_path):
    done = run("x^2", "-o", str(tmp_path / "q.txt"))
    assert done.exit_code == 2
    assert (
        done.stderr == f"error: -o {tmp_path / 'q.txt'}: cannot tell the format from '.txt'; use .png, .svg or .pdf\n"
    )
    assert not (tmp_path / "q.txt").exists()


def test_a_pipe_without_o_is_told_to_give_it():
    done = run("x^2")
    assert (done.exit_code, done.stdout) == (2, "")
    assert done.stderr == (
        "error: plot draws a picture: give -o FILE.png (or .svg, .pdf); without -o it is drawn only on a terminal\n"
    )


def test_missing_matplotlib_is_exit_3(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    done = run("x^2", "-o", str(tmp_path / "p.png"))
    assert (done.exit_code, done.stdout) == (3, "")
    assert done.stderr == f"error: gradcli plot needs matplotlib: {install_hint('plot')}\n"
    assert not (tmp_path / "p.png").exists()


# --- the terminal: Braille curves, no matplotlib needed ---------------------------------------------------


def test_curves_in_a_terminal():
    from terminal import gradcli_on_terminal

    code, text, raw = gradcli_on_terminal(["plot", "x^2", "--range", "-1,1", "--at", "x=0.5"], columns=80)
    assert code == 0, text
    lines = text.splitlines()
    assert lines[0].strip() == "x^2"
    assert any(0x2800 < ord(ch) <= 0x28FF for ch in text)  # Braille dots
    assert "●" in text  # the point of the tangent
    assert "━━ f(x)   ━━ f′(x)   ━━ tangent at x = 0.5: f = 0.25, f′ = 1" in text
    assert max(len(line) for line in lines) <= 80
    axis = next(line for line in lines if "└" in line)
    ticks = lines[lines.index(axis) + 1].split()
    assert ticks == ["-1", "-0.5", "0", "0.5", "1"]
    assert "\x1b[" in raw  # in colour


def test_a_gradient_field_in_a_terminal():
    from terminal import gradcli_on_terminal

    code, text, _ = gradcli_on_terminal(["plot", "x^2 + y^2", "--range", "-1,1", "--at", "x=0.5,y=0.5"], columns=80)
    assert code == 0, text
    rows = [line.split("┤" if "┤" in line else "│", 1)[1] for line in text.splitlines() if "┤" in line or "│" in line]
    assert len(rows) == 16 and len({len(r) for r in rows}) == 1
    corners = rows[0][0], rows[0][-1], rows[-1][0], rows[-1][-1]
    assert corners == ("↖", "↗", "↙", "↘")  # ∇f of x^2 + y^2 points away from the origin
    assert "● (0.5, 0.5): f = 0.5, ∇f = (1, 1)" in text


@pytest.mark.parametrize("expression", ["0*x*y", "log(x*y)", "1/(x^2 + y^2)", "log(x)"])
def test_flat_fields_and_undefined_regions_draw_without_python_warnings(tmp_path, expression):
    import warnings

    path = tmp_path / "p.svg"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = run(expression, "-o", str(path))
    assert (done.exit_code, done.stderr) == (0, f"wrote {path}\n")
    assert not caught, [str(w.message) for w in caught]
    ET.parse(path)


def test_an_empty_picture_and_a_point_outside_are_said(tmp_path):
    path = tmp_path / "p.png"
    done = run("sqrt(-1 - x^2)", "-o", str(path))
    assert done.stderr == f"wrote {path}\nwarning: f has no finite value in the range: the picture is empty\n"
    done = run("x^2", "--at", "x=7", "--range", "-1,1", "-o", str(path))
    assert done.exit_code == 0
    assert done.stderr.endswith("warning: --at x=7 is outside the range -1..1: the point is not shown\n")


def test_the_grid_is_one_batched_evaluation_not_a_loop(monkeypatch):
    from gradcli.lang.compute import points
    from gradcli.lang.program import Program

    counts = {"batched": 0, "single": 0}
    batched, single = points._BatchedRun.output, Program.run

    def counted_batched(self):
        counts["batched"] += 1
        return batched(self)

    def counted_single(self, *args, **kwargs):
        counts["single"] += 1
        return single(self, *args, **kwargs)

    monkeypatch.setattr(points._BatchedRun, "output", counted_batched)
    monkeypatch.setattr(Program, "run", counted_single)
    curves(load("x^2 * sin(3*x)"), "x", (-3.0, 3.0), {}, order=2)
    assert counts == {"batched": 1, "single": 1}  # 801 points at once; one point first, for eval's errors
    counts.update(batched=0, single=0)
    field(load("x^2*y + sin(x)"), ("x", "y"), ((-2.0, 2.0), (-2.0, 2.0)), {})
    assert counts["batched"] == 1 and counts["single"] <= 2  # 121 x 121 points at once


# --- --json and --wrt: the plotted values for a script ---------------------------------------------------


def test_json_is_the_plotted_data():
    import json

    done = run("1/x", "--range", "-1,2", "--at", "x=1", "--json")
    assert done.exit_code == 0 and done.stderr == ""
    doc = json.loads(done.stdout)
    x = np.array(doc["x"])
    assert doc["variables"] == ["x"] and len(x) == 801
    np.testing.assert_allclose(doc["f"], 1 / x, rtol=1e-15)
    np.testing.assert_allclose(doc["df/dx"], -1 / x**2, rtol=1e-15)
    assert len(doc["breaks"]["f"]) == 1 and abs(doc["breaks"]["f"][0]) < 3 / 800  # the pole, between two samples
    assert doc["point"] == {"x": 1.0, "f": 1.0, "df/dx": -1.0}


def test_json_of_a_field_and_wrt_chooses_the_variables():
    import json

    doc = json.loads(run("x*y + y^2", "--range", "-1,1", "--json").stdout)
    assert doc["variables"] == ["x", "y"] and np.shape(doc["f"]) == (121, 121)
    gx, gy = np.meshgrid(doc["x"], doc["y"])
    np.testing.assert_allclose(doc["df/dx"], gy)
    np.testing.assert_allclose(doc["df/dy"], gx + 2 * gy)
    one = json.loads(run("a*x^2", "--at", "a=2,x=0.5", "--wrt", "x", "--range", "-1,1", "--json").stdout)
    assert one["variables"] == ["x"] and one["point"] == {"x": 0.5, "f": 0.5, "df/dx": 2.0}
    done = run("x*y", "--wrt", "z", "--json")
    assert done.exit_code == 2
    assert json.loads(done.stdout) == {
        "error": "--wrt z: 'z' is not a variable of the expression (its variables: x, y)",
        "exit_code": 2,
    }
