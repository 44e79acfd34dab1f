"""Issue 13 (review): reverse-mode Jacobians seeded every output in one pass, so the zero seed of
one output still met another output's infinity (0 * inf = nan): ``jacobian "log(x)*y, y"`` at
x = 0 gave the row of ``y`` as [nan, nan] in reverse and auto mode (forward mode and PyTorch's
``jacobian``: [0, 1]). An output whose rows are not finite is now done again by itself."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import gradcli as gc


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True, timeout=120)


def jac(f, *values, mode: str):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return gc.functional.jacobian(f, tuple(gc.tensor(v) for v in values), mode=mode)


@pytest.mark.parametrize("mode", ["reverse", "auto", "forward"])
def test_the_row_of_an_output_is_not_spoiled_by_another(mode: str) -> None:
    (_, _), (dy_dx, dy_dy) = jac(lambda x, y: (gc.log(x) * y, y), 0.0, 2.0, mode=mode)
    assert (dy_dx.item(), dy_dy.item()) == (0.0, 1.0)
    (_, _), (d2x, d2y) = jac(lambda x, y: (x * gc.log(x), y * 2), 0.0, 2.0, mode=mode)
    assert (d2x.item(), d2y.item()) == (0.0, 2.0)


def test_the_infinite_row_itself_is_kept() -> None:
    (dx, dy), _ = jac(lambda x, y: (gc.log(x) * y, y), 0.0, 2.0, mode="reverse")
    assert dx.item() == np.inf and dy.item() == -np.inf


def test_vector_outputs_against_pytorch() -> None:
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    from torch.autograd.functional import jacobian as tjac

    def tf(v, y):
        return torch.log(v) * y, v * y, y * y

    def gf(v, y):
        return gc.log(v) * y, v * y, y * y

    v, y = [0.0, 1.5], 2.0
    expected = tjac(tf, (torch.tensor(v, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)))
    got = jac(gf, v, y, mode="reverse")
    for k in (1, 2):  # the outputs that never meet log(0)
        for j in (0, 1):
            assert np.array_equal(got[k][j].numpy(), expected[k][j].numpy())


def test_the_command_line_rows() -> None:
    for mode in ("auto", "reverse", "forward"):
        done = run("jacobian", "log(x)*y, y", "--at", "x=0,y=2", "--mode", mode, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["jacobian"][1] == [0.0, 1.0]


def test_with_create_graph_too() -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        x, y = gc.tensor(0.0, requires_grad=True), gc.tensor(2.0, requires_grad=True)
        (_, _), (dx, dy) = gc.functional.jacobian(lambda x, y: (gc.log(x) * y, y * y), (x, y), create_graph=True)
        assert (dx.item(), dy.item()) == (0.0, 4.0)
        (second,) = gc.autograd.grad(dy, y)
        assert second.item() == 2.0
        # the Hessian's off-diagonal, with and without create_graph, as PyTorch gives it: 1
        for create_graph in (False, True):
            h = gc.functional.hessian(
                lambda x, y: x * gc.log(x) + y**2 + x * y, (gc.tensor(0.0), gc.tensor(1.0)), create_graph=create_graph
            )
            assert (h[0][1].item(), h[1][0].item(), h[1][1].item()) == (1.0, 1.0, 2.0)
