"""gradcli: compute, check and see derivatives, from a shell or from Python.

The library follows PyTorch's autograd semantics on NumPy arrays:

>>> import gradcli as gc
>>> x = gc.tensor(2.0, requires_grad=True)
>>> w = gc.tensor(1.0, requires_grad=True)
>>> y = (x + w) * (w + 1)
>>> y.backward()
>>> w.grad
tensor(5.)
>>> y.grad_fn
<MulBackward0 object at ...>
"""

import gc as _gc

if _gc.isenabled():  # start-up: no cycle collections while NumPy and the engine load (nothing to free)
    _gc.disable()
    try:
        # NumPy first, on its own: imported from inside gradcli.ops (which autograd loads first), its
        # typing modules took 7 ms more to import, measured with python -X importtime (about a
        # tenth of `gradcli eval`'s start-up); imported here they take what `import numpy` takes.
        import numpy  # noqa: F401

        from . import autograd
    finally:
        # What the import allocated is not garbage: it goes to the oldest generation unscanned
        # (freeze, then unfreeze) instead of being scanned all at once by the first collection
        # after this, about 10 ms of a plain `gradcli eval`. The importing program's own objects
        # go there too (its cyclic garbage then waits for the next full collection, as any
        # object that outlives two collections does). A program that froze objects itself
        # (before forking, say) keeps them frozen: it is left alone.
        if not _gc.get_freeze_count():
            _gc.freeze()
            _gc.unfreeze()
        _gc.enable()

from . import autograd
from .about import VERSION as __version__  # noqa: F401  (the package's version, as every package gives it)
from .autograd import factory as _factory
from .autograd import functions as _functions
from .autograd.methods import FUNCTION_METHODS

_FACTORIES = (
    "arange",
    "bool",
    "complex64",
    "complex128",
    "double",
    "eye",
    "float32",
    "float64",
    "from_numpy",
    "full",
    "int8",
    "int16",
    "int32",
    "int64",
    "long",
    "full_like",
    "linspace",
    "manual_seed",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "tensor",
    "uint8",
    "zeros",
    "zeros_like",
)
#: the library functions: those that are Tensor methods too, and these
_FUNCTIONS = (
    *FUNCTION_METHODS,
    "solve",
    "inv",
    "as_tensor",
    "broadcast_to",
    "cat",
    "concatenate",
    "detach",
    "imag",
    "real",
    "stack",
    "where",
    "hstack",
    "vstack",
    "var_mean",
)

# Tensor, grad and the grad modes, the factories, the functions written over the table, and
# every elementwise primitive of the table (gc.sin, gc.atan2, ...), which ``functions`` generates.
globals().update({name: getattr(autograd, name) for name in autograd.LIBRARY})
globals().update({name: getattr(_factory, name) for name in _FACTORIES})
globals().update({name: getattr(_functions, name) for name in _FUNCTIONS})
globals().update(_functions.GENERATED)


# loaded on first use: graphviz only for render, the checkers only for testing; Jacobians,
# custom Functions, einsum and linalg: a plain evaluation needs none of them
autograd.lazy(
    globals(),
    {
        "render": (".render", None),
        "testing": (".testing", None),
        "functional": (".functional", None),
        "linalg": (".autograd.linalg", None),
        "Function": (".autograd.function", "Function"),
        "einsum": (".autograd.contract", "einsum"),
        "tensordot": (".autograd.contract", "tensordot"),
        "why": (".check.why", "why_function"),
        "check": (".check", None),
    },
)


__all__ = [
    "Function",
    "einsum",
    "functional",
    "linalg",
    "tensordot",
    "autograd",
    "testing",
    "why",
    "check",
    *autograd.LIBRARY,
    *_FACTORIES,
    *_FUNCTIONS,
    *sorted(_functions.GENERATED),
]
