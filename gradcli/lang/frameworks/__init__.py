"""Functions that compute with PyTorch or JAX instead of gradcli (``FILE.py:f`` with ``import torch``).

Which framework a function uses is read from the names it refers to (``torch.sin``, an ``nn.Module``
it calls, ``jnp``), or said with ``--framework torch|jax``. Neither framework is imported here: only
``require`` imports one, when a function of its is met, and says how to install it when missing
(exit 3). The function is then one more kind of program (``FrameworkFunction``, in ``function.py``):
its numbers are the framework's own.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from ...errors import MissingProgram, UsageError, install_hint

FRAMEWORKS = ("torch", "jax")
#: packages built on a framework, by the framework they compute with
_FAMILY = {"torch": "torch", "torchvision": "torch", "torchaudio": "torch", "jax": "jax", "jaxlib": "jax",
           "flax": "jax", "equinox": "jax", "optax": "jax", "haiku": "jax"}  # fmt: skip
#: what each extra installs (the CPU build of PyTorch: its CUDA wheels are gigabytes)
_INSTALL = {
    "torch": "{hint} --extra-index-url https://download.pytorch.org/whl/cpu",
    "jax": "{hint}",
}


def checked_framework(name: str | None) -> str | None:
    """``--framework``: torch, jax, or gradcli (the function computes with gradcli itself: None)."""
    if name is None:
        return None
    text = name.strip().lower()
    if text in ("gradcli", "gc", "none"):
        return None
    if text == "pytorch":
        text = "torch"
    if text not in FRAMEWORKS:
        raise UsageError(f"invalid value for '--framework': {name!r} is not one of torch, jax, gradcli")
    return text


def missing(module: str) -> None:
    """A user's module could not import ``module``: when it is (part of) PyTorch or JAX, say how to
    install it (exit 3)."""
    framework = _FAMILY.get(module.partition(".")[0])
    if framework is not None and module.partition(".")[0] in FRAMEWORKS:
        require(framework)


def before_import(source: str) -> None:
    """Called with a user's file's text before it runs: a file that imports JAX (or a package built on
    it) gets JAX in float64 first, so that the arrays it makes as it is imported (``W = jnp.array([0.1,
    0.2])``) are float64, as in a process where JAX ran in float64 from the start."""
    import re  # lazy: start-up, as the rest of this module

    names = "|".join(k for k, v in _FAMILY.items() if v == "jax")
    if re.search(rf"^[ \t]*(?:import|from)[ \t]+(?:{names})\b", source, re.MULTILINE):
        with suppress(MissingProgram):  # (the file's own import says so, or it does without JAX)
            require("jax")


def require(framework: str) -> types.ModuleType:
    """The framework's module, imported now; exit 3 with the install line when it is missing. JAX
    computes in float64 (``jax_enable_x64``), as gradcli and its inputs do."""
    module = _imported(framework)
    if framework == "jax":
        module.config.update("jax_enable_x64", True)
    return module


def _imported(framework: str) -> types.ModuleType:
    import importlib  # lazy: start-up, as the rest of this module

    try:
        return importlib.import_module(framework)
    except ImportError as missing:
        hint = _INSTALL[framework].format(hint=install_hint(framework))
        raise MissingProgram(
            f"this function computes with {_TITLE[framework]}, which is not installed ({missing}); install it with: {hint}"
        ) from None


_TITLE = {"torch": "PyTorch", "jax": "JAX"}


@contextmanager
def jax_float64() -> Iterator[types.ModuleType]:
    """JAX in float64 inside the block, the caller's setting after it (``gc.render.graph(f, x)`` in the
    user's own process, where JAX may run in float32)."""
    jax = _imported("jax")
    before = bool(jax.config.jax_enable_x64)
    try:
        yield require("jax")
    finally:
        jax.config.update("jax_enable_x64", before)


def title(framework: str) -> str:
    """The framework's name as its users write it: PyTorch, JAX."""
    return _TITLE[framework]


def framework_of(function: Callable[..., Any], given: Sequence[Any] = ()) -> str | None:
    """The framework ``function`` computes with: the one of the values it is ``given`` (a torch tensor,
    a JAX array), else of the names it refers to (its globals, the modules and objects they hold, the
    classes of those objects), else the one its module imported; None for a function of gradcli's
    (or of NumPy's, or of nothing)."""
    import functools  # lazy: start-up, as the rest of this module
    import inspect  # lazy: start-up, as the rest of this module

    by_value = _family(given)
    if by_value not in (None, "gradcli"):
        return by_value
    plain = inspect.unwrap(function)  # jax.jit's, functools.wraps's: the function itself
    while isinstance(plain, functools.partial):  # (a partial: the function it binds arguments of)
        plain = inspect.unwrap(plain.func)
    found = _family([function]) or _family(referred(plain))
    if found is None:
        found = _family(list(getattr(plain, "__globals__", {}).values()))
    return None if found == "gradcli" else found


def referred(function: Callable[..., Any]) -> Iterator[Any]:
    """The global objects ``function``'s code (its nested functions' and lambdas' too) refers to."""
    code = getattr(function, "__code__", None)
    namespace = getattr(function, "__globals__", {})
    codes = [code] if code is not None else []
    while codes:
        current = codes.pop()
        for name in current.co_names:
            if name in namespace:
                yield namespace[name]
        codes += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    for cell in getattr(function, "__closure__", None) or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue


def _family(objects: Any) -> str | None:
    """The framework of the first object that belongs to one (a module, a function, an object whose
    class or one of its bases is a framework's), or "gradcli" when one of gradcli's comes first."""
    for value in objects:
        for root in _roots(value):
            if root == "gradcli":
                return root
            if root in _FAMILY:
                return _FAMILY[root]
    return None


def _roots(value: Any) -> Iterator[str]:
    if isinstance(value, types.ModuleType):
        yield value.__name__.partition(".")[0]
        return
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and not isinstance(value, type):
        yield module.partition(".")[0]
    for cls in getattr(type(value) if not isinstance(value, type) else value, "__mro__", ()):
        yield (cls.__module__ or "").partition(".")[0]
