"""Where values went while a function ran: the record ``gradcli why`` reads (issue 36).

A framework's reader (frameworks/torch_flow.py for PyTorch) turns one run into a ``Flow``: every
operation in order (``Step``: its name, the values it took and made, the user's line, the module
that ran it, whether autograd was on), each value's statistics (``Stats``: never the whole tensor),
whether autograd tracked it, and the gradient of the output with respect to it. The analysis
(check/why.py) is the same for every framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Stats:
    """What the diagnosis needs of one tensor: its size and dtype, how many elements are NaN, inf or
    exactly zero, and its range."""

    size: int
    dtype: str
    nan: int
    inf: int
    zeros: int
    min: float
    max: float
    min_abs: float

    @staticmethod
    def of(value: Any) -> Stats:
        """The statistics of an array (anything ``np.asarray`` takes).

        >>> Stats.of([0.0, -2.0, float("nan")])
        Stats(size=3, dtype='float64', nan=1, inf=0, zeros=1, min=-2.0, max=0.0, min_abs=0.0)
        """
        array = np.asarray(value)
        if array.dtype.kind == "c":
            array = np.abs(array)
        real = array.astype(np.float64, copy=False) if array.dtype.kind in "biuf" else np.zeros(0)
        finite = real[np.isfinite(real)]
        return Stats(
            size=int(array.size),
            dtype=str(array.dtype),
            nan=int(np.isnan(real).sum()),
            inf=int(np.isinf(real).sum()),
            zeros=int((real == 0).sum()),
            min=float(finite.min()) if finite.size else float("nan"),
            max=float(finite.max()) if finite.size else float("nan"),
            min_abs=float(np.abs(finite).min()) if finite.size else float("nan"),
        )

    @property
    def finite(self) -> bool:
        return self.nan == 0 and self.inf == 0

    @property
    def all_zero(self) -> bool:
        return self.zeros == self.size

    @property
    def integral(self) -> bool:
        """An integer or boolean dtype: no gradient flows through it."""
        return self.dtype.startswith(("int", "uint", "bool")) or self.dtype in ("torch.bool", "bool")

    def range_text(self) -> str:
        if self.size == 1:
            return f"{self.min:.6g}" if self.finite else ("nan" if self.nan else "inf")
        return f"min {self.min:.6g}, max {self.max:.6g}"


@dataclass
class Step:
    """One operation of the run."""

    op: str  # the framework's name for it: "relu", "log", "detach", "_local_scalar_dense"
    inputs: list[int]  # the values it read (keys of ``Flow.values``)
    outputs: list[int]  # the values it made (an in-place operation makes a new version of its target)
    line: str | None = None  # "model.py:12": the user's line
    scope: str | None = None  # "encoder.layers.3.mlp": the module that ran it
    tracked: bool = True  # autograd was on (False under torch.no_grad())
    inplace: bool = False  # it wrote its first input's tensor in place
    overwrites: int | None = None  # the value an in-place write replaced (its key)
    numbers: list[Any] = field(default_factory=list)  # its arguments that are plain numbers (clamp's bounds)

    def where(self) -> str:
        """ " at model.py:12 (in encoder.mlp)": where the user can find it."""
        text = f" at {self.line}" if self.line else ""
        return text + (f" (in {self.scope})" if self.scope else "")


@dataclass
class Flow:
    """One run of a function, as ``Step`` records over keyed values."""

    framework: str  # "PyTorch", "JAX", "gradcli"
    inputs: dict[str, int]  # the function's inputs by name -> their value's key
    output: int | None  # the output's key (None: it is not a tensor the run made or took)
    steps: list[Step]
    values: dict[int, Stats]  # the forward value of each key
    tracked: dict[
        int, bool
    ]  # whether autograd tracked the value (it has a gradient function or is a leaf that requires grad)
    grads: dict[int, Stats | None]  # d output / d value (None: autograd gives none); keys missing: unknown
    input_grads: dict[str, Stats | None]  # d output / d input, by name (None: autograd's None)
    made_outside: set[int] = field(default_factory=set)  # values no recorded operation made nor the inputs were
    language: bool = False  # a program of gradcli's language (its spellings: ``detach(x)``), not a Python function
