"""Making tensors: ``tensor``, ``zeros``, ``ones``, ``arange``, ``randn`` and friends."""

from __future__ import annotations

from _thread import allocate_lock as Lock
from typing import Any

import numpy as np

from .tensor import Tensor, check_can_require_grad, mark_complex, wrap

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
double = float64
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)
# integer and boolean tensors (comparisons, index arrays, ``tensor([1, 2])``, ``arange(3)``): never require grad
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
long = int64
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)  # noqa: A001  (torch.bool)

#: The generator of ``rand``/``randn``: one for the process, shared by every thread, as PyTorch's
#: default generator is (``manual_seed`` in one thread seeds the draws of all). Made on first use:
#: numpy.random costs ~15 ms to import. NumPy's generator draws under its own lock.
_generator: np.random.Generator | None = None
_MAKING = Lock()


def _rng() -> np.random.Generator:
    global _generator
    found = _generator
    if found is None:
        with _MAKING:  # one generator, whichever thread draws first
            if _generator is None:
                _generator = np.random.default_rng()
            found = _generator
    return found


def manual_seed(seed: int) -> None:
    """Seed ``rand``/``randn`` for reproducible runs (every thread's: the generator is the process's)."""
    global _generator
    _generator = np.random.default_rng(seed)


def tensor(data: Any, requires_grad: bool = False, dtype: Any = None, name: str | None = None) -> Tensor:
    """A new tensor holding a copy of ``data``: float64 when it holds a float, int64 for Python
    ints, bool for bools (as PyTorch, with float64 for its default float), unless ``dtype`` says otherwise.

    >>> import gradcli as gc
    >>> gc.tensor([1, 2, 3.5])
    tensor([1.0000, 2.0000, 3.5000])
    >>> gc.tensor([1, 2]).dtype
    dtype('int64')
    """
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name)


def _made(value: np.ndarray, requires_grad: bool) -> Tensor:
    mark_complex(value)
    t = wrap(value[()] if value.ndim == 0 else value)
    if requires_grad:
        check_can_require_grad(value)
        t.requires_grad_(True)
    return t


def _size(size: tuple[Any, ...], keyword: Any) -> tuple[int, ...]:
    if keyword is not None:
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def zeros(*size: Any, size_: Any = None, requires_grad: bool = False, dtype: Any = None, **kw: Any) -> Tensor:
    return _made(np.zeros(_size(size, kw.get("size", size_)), dtype=dtype or float64), requires_grad)


def ones(*size: Any, size_: Any = None, requires_grad: bool = False, dtype: Any = None, **kw: Any) -> Tensor:
    return _made(np.ones(_size(size, kw.get("size", size_)), dtype=dtype or float64), requires_grad)


def full(size: Any, fill_value: Any, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    return _made(np.full(_size((size,), None), fill_value, dtype=dtype or float64), requires_grad)


def _like(fill: Any) -> Any:
    def make(t: Any, requires_grad: bool = False, dtype: Any = None) -> Tensor:
        value = np.asarray(t._value if isinstance(t, Tensor) else t)
        return _made(fill(value, dtype or (value.dtype if value.dtype.kind in "fc" else float64)), requires_grad)

    return make


zeros_like = _like(lambda v, dt: np.zeros(v.shape, dtype=dt))
ones_like = _like(lambda v, dt: np.ones(v.shape, dtype=dt))
randn_like = _like(lambda v, dt: _rng().standard_normal(v.shape).astype(dt))
rand_like = _like(lambda v, dt: _rng().random(v.shape).astype(dt))


def full_like(t: Any, fill_value: Any, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    return _like(lambda v, dt: np.full(v.shape, fill_value, dtype=dt))(t, requires_grad, dtype)


def arange(start: Any, end: Any = None, step: Any = 1, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    """``arange(4.0)`` is ``tensor([0., 1., 2., 3.])``, as in seed 004; ``arange(3)`` (integer
    arguments only) is int64, as PyTorch's."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        integral = all(isinstance(a, (int, np.integer)) for a in (start, end, step))
        dtype = int64 if integral else float64
    return _made(np.arange(start, end, step, dtype=dtype), requires_grad)


def linspace(start: float, end: float, steps: int, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    return _made(np.linspace(start, end, int(steps), dtype=dtype or float64), requires_grad)


def eye(n: int, m: int | None = None, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    return _made(np.eye(n, m, dtype=dtype or float64), requires_grad)


def randn(*size: Any, requires_grad: bool = False, dtype: Any = None, **kw: Any) -> Tensor:
    """Standard normal samples; ``randn(size=())`` is a scalar, as seed 004 uses it."""
    shape = _size(size, kw.get("size"))
    return _made(np.asarray(_rng().standard_normal(shape), dtype=dtype or float64), requires_grad)


def rand(*size: Any, requires_grad: bool = False, dtype: Any = None, **kw: Any) -> Tensor:
    shape = _size(size, kw.get("size"))
    return _made(np.asarray(_rng().random(shape), dtype=dtype or float64), requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing ``array``'s memory (dtype kept)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    mark_complex(array)
    return wrap(array)
