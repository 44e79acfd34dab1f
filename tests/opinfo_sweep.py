"""The false-alarm sweep (issue 34): ``check`` on PyTorch's OpInfo samples in float64, through the road
``gradcli check FILE.py:f`` takes (a ``FrameworkFunction`` of the sample's floating tensors, checked by
``gradcli.check.run.check``), beside ``torch.autograd.gradcheck`` on the same function. Shared by
tests/test_r34_verdicts.py (a fixed subset) and benchmarks/opinfo_sweep.py (every op).

Each op's first sample whose floating tensors hold few elements (``SMALL`` in all) is wrapped as
``f(x0, x1, ...) = sum_k w_k . output_k`` with fixed random weights ``w_k``: a scalar, so that check
compares a gradient and gradcheck the same one."""

from __future__ import annotations

import sys
import time
import types
import unittest
from dataclasses import dataclass
from typing import Any

import numpy as np

SMALL = 24  # floating input elements per sample, at most


def op_db() -> list[Any]:
    """PyTorch's OpInfo database (its test module imports ``expecttest``, a test-only package: a
    stand-in is enough for the database itself)."""
    if "expecttest" not in sys.modules:
        try:
            import expecttest  # noqa: F401
        except ImportError:
            stand_in = types.ModuleType("expecttest")
            stand_in.TestCase = unittest.TestCase  # type: ignore[attr-defined]
            sys.modules["expecttest"] = stand_in
    from torch.testing._internal.common_methods_invocations import op_db as ops

    return [op for op in ops if op.supports_autograd]


@dataclass
class Swept:
    """One op's sample: check's verdict word ("OK", "INCONCLUSIVE", "MISMATCH", ...), gradcheck's
    (True, False, or None where it raised), and check's verdict line."""

    name: str
    verdict: str
    gradcheck: bool | None
    line: str
    seconds: float


def sample_function(op: Any) -> tuple[Any, dict[str, np.ndarray]] | None:
    """(f, values) for ``op``'s first small real sample: f a function of its floating tensors by name
    (x0, x1, ...), returning a float64 scalar; None where it has none."""
    import torch

    try:
        samples = list(op.sample_inputs("cpu", torch.float64, requires_grad=False))
    except Exception:  # a sample generator that needs what this machine has not
        return None
    for size in (None, 3, 2):  # each sample as it is, then the first few cut to 3 (or 2) along every axis
        for sample in samples if size is None else samples[:3]:
            for only_input in (False, True):  # (running statistics, targets: no gradient there)
                try:
                    found = _wrapped(op, sample if size is None else _cut(sample, size), only_input)
                except Exception:  # a sample that cannot be cut (sparse tensors) or wrapped
                    found = None
                if found is not None:
                    return found
    return None


def _cut(sample: Any, size: int) -> Any:
    """``sample`` with each floating tensor's axes longer than ``size`` cut to ``size`` (the same cut on
    every tensor, so that shapes that matched still match; where they do not, the op refuses it)."""
    import torch
    from torch.utils._pytree import tree_map

    def cut(leaf: Any) -> Any:
        if not (isinstance(leaf, torch.Tensor) and leaf.dtype == torch.float64):
            return leaf
        for axis, length in enumerate(leaf.shape):
            leaf = leaf.narrow(axis, 0, min(length, size))
        return leaf.clone()

    return type(sample)(tree_map(cut, sample.input), args=tree_map(cut, sample.args),
                        kwargs=tree_map(cut, sample.kwargs))  # fmt: skip


def _wrapped(op: Any, sample: Any, only_input: bool) -> tuple[Any, dict[str, np.ndarray]] | None:
    """The sample as a function of its float64 tensors (``only_input``: of its input's alone), where
    PyTorch differentiates it with respect to each."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    varied = len(tree_flatten(sample.input)[0]) if only_input else len(leaves)
    floating = [
        i for i, leaf in enumerate(leaves[:varied]) if isinstance(leaf, torch.Tensor) and leaf.dtype == torch.float64
    ]
    if (
        not floating
        or sum(leaves[i].numel() for i in floating) > SMALL
        or any(leaves[i].numel() == 0 for i in floating)
    ):
        return None
    try:
        given = [leaf.detach().requires_grad_(True) if i in floating else leaf for i, leaf in enumerate(leaves)]
        first, args, kwargs = tree_unflatten(given, spec)
        outs = op(first, *args, **kwargs)
    except Exception:
        return None
    outs = [o for o in tree_flatten(outs)[0] if isinstance(o, torch.Tensor)]
    if not outs or any(o.is_complex() for o in outs) or not any(o.is_floating_point() for o in outs):
        return None
    rng = np.random.default_rng(len(op.name))
    weights = [torch.tensor(rng.uniform(0.5, 1.5, tuple(o.shape))) if o.is_floating_point() else None for o in outs]

    def call(*tensors: Any) -> Any:
        given = list(leaves)
        for i, t in zip(floating, tensors):
            given[i] = t
        first, args, kwargs = tree_unflatten(given, spec)
        found = [o for o in tree_flatten(op(first, *args, **kwargs))[0] if isinstance(o, torch.Tensor)]
        return sum((o.to(torch.float64) * w).sum() for o, w in zip(found, weights) if w is not None)

    names = [f"x{k}" for k in range(len(floating))]
    source = f"def f({', '.join(names)}):\n    return call({', '.join(names)})\n"
    space: dict[str, Any] = {"call": call, "torch": torch}
    exec(source, space)  # a function with one named parameter per tensor, as a user's file would have
    function = space["f"]
    function.__module__ = "torch_opinfo_sample"
    return function, {n: leaves[i].numpy().copy() for n, i in zip(names, floating)}


def sweep_one(op: Any, gradcheck: bool = True) -> Swept | None:
    """check and gradcheck on ``op``'s first small sample; None where it has none. ``gradcheck=False``:
    gradcheck only where check does not say OK or INCONCLUSIVE (where it matters)."""
    import torch

    from gradcli.check.run import check
    from gradcli.errors import GradcliError
    from gradcli.lang.frameworks.function import FrameworkFunction

    found = sample_function(op)
    if found is None:
        return None
    function, values = found
    started = time.perf_counter()
    try:
        result = check(FrameworkFunction(f"opinfo:{op.name}", function, "torch"), values)
        line = result.verdict()
        verdict = line.partition(":")[0]
    except GradcliError as exc:
        line, verdict = exc.message, "ERROR"
    except Exception as exc:  # gradcli's own failure: counted, so that the sweep shows it
        line, verdict = f"{type(exc).__name__}: {exc}", "CRASH"
    seconds = time.perf_counter() - started
    if not gradcheck and verdict in ("OK", "INCONCLUSIVE"):
        return Swept(op.name, verdict, None, line, seconds)
    inputs = [torch.tensor(v, requires_grad=True) for v in values.values()]
    try:
        passed: bool | None = bool(
            torch.autograd.gradcheck(function, inputs, raise_exception=False, check_undefined_grad=False)
        )
    except Exception:
        passed = None
    return Swept(op.name, verdict, passed, line, seconds)
