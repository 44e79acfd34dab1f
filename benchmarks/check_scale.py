"""``gradcli check`` of a loss in n weights beside ``torch.autograd.gradcheck`` (and its ``fast_mode``) and
``jax.test_util.check_grads``, for n = 10, 10^4, 10^6, in one process, threads pinned to 1, so the ratios
are of one run on one machine.

    python benchmarks/check_scale.py [--sizes 10,10000,1000000] [--no-elementwise]
    python benchmarks/check_scale.py --planted   # the planted bugs of tests/test_r34_verdicts.py, 900 inputs

The loss is the same in PyTorch and JAX, O(n) work: mean(tanh(w) w) + mean(w[:-1] w[1:]) (every weight
used twice, neighbours coupled). gradcli checks the PyTorch function by its default road (element by element
up to 512 weights, along 8 random directions above; ``--directions elementwise`` is the road before issue
36, shown where it is cheap enough to run). gradcheck builds the whole n x n Jacobian both ways (not run
at 10^6: 10^12 numbers); its fast mode and check_grads check one or two random directions, with no
tolerance of their own (check_grads: 1e-5 relative to the larger of the two values).
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_name] = "1"
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

LOSS = """
import torch


def loss(w):
    return (torch.tanh(w) * w).mean() + (w[:-1] * w[1:]).mean()
"""

ELEMENTWISE_UP_TO = 10_000  # the elementwise road is timed up to this many weights (8n+3 calls)


def torch_loss(torch):
    def loss(w):
        return (torch.tanh(w) * w).mean() + (w[:-1] * w[1:]).mean()

    return loss


def jax_loss(jnp):
    def loss(w):
        return jnp.mean(jnp.tanh(w) * w) + jnp.mean(w[:-1] * w[1:])

    return loss


def timed(run) -> tuple[float, str]:
    start = time.perf_counter()
    said = run()
    return time.perf_counter() - start, said


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,10000,1000000")
    parser.add_argument("--no-elementwise", action="store_true", help="skip gradcli's elementwise road")
    parser.add_argument("--planted", action="store_true", help="the planted-bug sweep along directions instead")
    options = parser.parse_args()
    if options.planted:
        planted()
        return
    import jax
    import torch

    jax.config.update("jax_enable_x64", True)
    torch.set_num_threads(1)
    import jax.numpy as jnp
    from jax.test_util import check_grads

    from gradcli.check.run import check
    from gradcli.lang.program import load

    folder = Path(tempfile.mkdtemp())
    (folder / "scale_loss.py").write_text(LOSS)
    program = load(f"{folder / 'scale_loss.py'}:loss")
    tl, jl = torch_loss(torch), jax_loss(jnp)
    rows = []
    tools = (program, check, torch, tl, jl, check_grads, not options.no_elementwise)
    _round(10, np.linspace(-1.0, 1.0, 10), *tools)  # every road warmed up (imports, jax's compilation): not shown
    for n in (int(s) for s in options.sizes.split(",")):
        for name, (seconds, said) in _round(n, np.random.default_rng(0).standard_normal(n), *tools).items():
            rows.append((n, name, seconds, said))
            print(f"n={n:<8} {name:34s} {seconds:9.3f} s   {said}", flush=True)
    print()
    print("| n | " + " | ".join(dict.fromkeys(r[1] for r in rows)) + " |")
    names = list(dict.fromkeys(r[1] for r in rows))
    print("|---|" + "---|" * len(names))
    for n in dict.fromkeys(r[0] for r in rows):
        cells = {r[1]: f"{r[2]:.3g} s" for r in rows if r[0] == n}
        print(f"| {n:,} | " + " | ".join(cells.get(name, "-") for name in names) + " |")


def _round(n, w, program, check, torch, tl, jl, check_grads, elementwise) -> dict[str, tuple[float, str]]:
    """Every tool's check at one size, timed."""
    wt = torch.tensor(w, requires_grad=True)
    wj = np.asarray(w)
    found: dict[str, tuple[float, str]] = {}
    found["gradcli check"] = timed(lambda: _said(check(program, {"w": w})))
    if 512 < n <= ELEMENTWISE_UP_TO and elementwise:
        found["gradcli --directions elementwise"] = timed(lambda: _said(check(program, {"w": w}, directions=0)))
    if n <= 20_000:
        found["gradcheck"] = timed(lambda: str(torch.autograd.gradcheck(tl, (wt,))))
    found["gradcheck fast_mode"] = timed(lambda: str(torch.autograd.gradcheck(tl, (wt,), fast_mode=True)))
    found["jax check_grads"] = timed(lambda: str(check_grads(jl, (wj,), order=1, modes=["rev"])))
    return found


def planted() -> None:
    """tests/test_r34_verdicts.py's planted backward bugs (a custom Function inside nn.Modules), checked at
    900 inputs (directions) with --blame: every bug caught, and named; the correct model OK."""
    import re
    import sys

    from gradcli.check.run import check
    from gradcli.lang.program import load

    tests = Path(__file__).resolve().parent.parent / "tests"
    sys.path.insert(0, str(tests))
    source = re.search(r"PLANTED = \'\'\'(.*?)\'\'\'", (tests / "test_r34_verdicts.py").read_text(), re.S)
    path = Path(tempfile.mkdtemp(), "planted.py")
    path.write_text(source.group(1) if source else "")
    program = load(f"{path}:f")
    module = program.function.__globals__
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (300, 3))
    for bug in [None, *module["BUGS"]]:
        module["model"] = module["MODELS"][bug]
        seconds, result = timed(lambda: check(program, {"x": x}, blame=True))
        found = result.to_dict()
        blamed = None if result.blame is None else result.blame.op
        print(f"{bug!s:14} {found['method']:11} ok={result.ok!s:5} blame={blamed!s:22} {seconds:6.1f} s  "
              f"{result.verdict()[:90]}")  # fmt: skip


def _said(result) -> str:
    found = result.to_dict()
    return f"{found['method']}: {found['verdict'][:70]}"


if __name__ == "__main__":
    main()
