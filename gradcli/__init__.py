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

from .about import VERSION as __version__  # noqa: F401  (the package's version, as every package gives it)
from .startup import unscanned

# `import gradcli` loads nothing more: NumPy and the engine load on the first use of a name of the
# library (PEP 562), so that `gradcli --version` and `gradcli help`, which import the package
# first, answer without them (issue 36).

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
#: the library functions: those that are Tensor methods too (``autograd.methods.FUNCTION_METHODS``), and these
_FUNCTIONS = (
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

#: loaded on first use: graphviz only for render, the checkers only for testing; Jacobians,
#: custom Functions, einsum and linalg: a plain evaluation needs none of them
_LATER = {
    "render": (".render", None),
    "testing": (".testing", None),
    "functional": (".functional", None),
    "linalg": (".autograd.linalg", None),
    "Function": (".autograd.function", "Function"),
    "einsum": (".autograd.contract", "einsum"),
    "tensordot": (".autograd.contract", "tensordot"),
    "why": (".check.why", "why_function"),
    "check": (".check", None),
}


def _import_engine() -> None:
    # NumPy first, on its own: imported from inside gradcli.ops (which autograd loads first), its
    # typing modules took 7 ms more to import, measured with python -X importtime (about a
    # tenth of `gradcli eval`'s start-up); imported here they take what `import numpy` takes.
    import importlib

    import numpy  # noqa: F401

    importlib.import_module(f"{__name__}.autograd")  # (`from . import autograd` would ask __getattr__ first)


def _load_engine() -> None:
    """NumPy, the engine and the library's names, into the package (once): Tensor, grad and the
    grad modes, the factories, the functions written over the table, and every elementwise
    primitive of the table (gc.sin, gc.atan2, ...), which ``functions`` generates; then the
    names loaded later (``_LATER``) by the engine's own PEP 562 hook."""
    unscanned(_import_engine)
    from . import autograd  # lazy: start-up, imported by _import_engine
    from .autograd import factory, functions  # lazy: start-up, imported by _import_engine
    from .autograd.methods import FUNCTION_METHODS  # lazy: start-up, imported by _import_engine

    names = (*FUNCTION_METHODS, *_FUNCTIONS)
    found = {name: getattr(autograd, name) for name in autograd.LIBRARY}
    found.update({name: getattr(factory, name) for name in _FACTORIES})
    found.update({name: getattr(functions, name) for name in names})
    found.update(functions.GENERATED)
    later = [name for name in _LATER if name != "render"]  # (not with *: graphviz's import is not for everyone)
    found["__all__"] = [*later, "autograd", *autograd.LIBRARY, *_FACTORIES, *names, *sorted(functions.GENERATED)]
    globals().update(found)
    autograd.lazy(globals(), _LATER)  # replaces this module's __getattr__ and __dir__


def __getattr__(name: str) -> object:
    """The library's names, loaded with the engine on the first read of any (``gc.tensor``,
    ``gc.sin``, ``__all__`` for ``from gradcli import *``), then read as plain attributes; a
    submodule other than the engine alone (``from gradcli import cli`` asks for it here first)."""
    if name.startswith("__") and name != "__all__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name != "autograd" and name not in _LATER and _is_submodule(name):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    _load_engine()
    return globals()["__getattr__"](name) if name not in globals() else globals()[name]


def _is_submodule(name: str) -> bool:
    import os

    folder = os.path.dirname(__file__)
    return name.isidentifier() and (
        os.path.isfile(os.path.join(folder, f"{name}.py")) or os.path.isfile(os.path.join(folder, name, "__init__.py"))
    )


def __dir__() -> list[str]:
    _load_engine()
    return globals()["__dir__"]()
