"""A JAX model's module tree: its modules and parameters named by their paths (``layers[0]``,
``layers[0].weight``), for the graph's boxes and variables.

A model is an equinox ``eqx.Module`` or a flax ``nnx.Module`` (both pytrees: their leaves' paths are
the attributes that hold them), or flax linen's variables (``{"params": {"Dense_0": {"kernel": ...}}}``,
named ``params.Dense_0.kernel``). A model passed as an argument is named from its pytree; one the
function closes over (a module-level ``model``, the CLI's ``FILE.py:loss``) from the globals and
closure cells the function refers to, its arrays being the jaxpr's constants (found by identity).

Which equations a module computed comes from the jaxpr's name stack: flax linen puts its modules'
names there itself (``L/Dense_0``); for equinox and nnx, ``scopes()`` runs a profiler of this thread
while the function is traced, which wraps each call of a method of a module of the tree in
``jax.named_scope`` with the module's path (registered in ``tags``). Neither equinox nor flax is
imported here: a model is recognised by the class of a package the user's code has imported.
"""

from __future__ import annotations

import inspect
import keyword
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import referred, require

jax = require("jax")

#: a flax linen module's automatic name (``Dense_0``): its class, then its number
_AUTO_NAME = re.compile(r"^([A-Z]\w*?)_\d+$")


def module_classes() -> tuple[type, ...]:
    """The module base classes of the packages imported (equinox's, flax nnx's)."""
    found = []
    if "equinox" in sys.modules:
        found.append(sys.modules["equinox"].Module)
    nnx = sys.modules.get("flax.nnx")
    if nnx is not None:
        found.append(nnx.Module)
    return tuple(found)


def is_module(value: Any, classes: tuple[type, ...] | None = None) -> bool:
    return isinstance(value, classes if classes is not None else module_classes()) and not isinstance(value, type)


def is_variables(value: Any) -> bool:
    """Flax linen's variables (``model.init``'s): a mapping with a ``params`` collection."""
    return "flax.linen" in sys.modules and isinstance(value, Mapping) and "params" in value


def human_path(keys: Any) -> str:
    """A pytree path as a person writes it: ``layers[0].weight`` (nnx's ``.value`` of a variable left
    out), not ``['layers'][0]['weight'].value``."""
    parts = []
    for key in keys:
        name = getattr(key, "name", None)
        if name is not None:  # GetAttrKey
            parts.append(f".{name}")
        elif hasattr(key, "idx"):  # SequenceKey
            parts.append(f"[{key.idx}]")
        elif hasattr(key, "key"):  # DictKey, FlattenedIndexKey
            k = key.key
            parts.append(
                f".{k}" if isinstance(k, str) and k.isidentifier() and not keyword.iskeyword(k) else f"[{k!r}]"
            )
        else:
            parts.append(str(key))
    text = "".join(parts)
    if text.endswith(".value"):
        text = text[: -len(".value")]
    return text.lstrip(".")


def class_of_name(name: str) -> str | None:
    """The class a flax linen module's automatic name says (``Dense_0`` -> ``Dense``)."""
    found = _AUTO_NAME.match(name)
    return found[1] if found else None


class ModuleTree:
    """The models met: each module's path and class by its identity, each array's path by its identity
    (a model's parameters, named for the arguments' leaves and the function's constants)."""

    def __init__(self) -> None:
        self.classes = module_classes()
        self.modules: dict[int, tuple[str, str]] = {}  # id(module) -> (path, class name)
        self.held: list[Any] = []  # the modules named (kept alive while their ids are keys)
        self.arrays: dict[int, str] = {}  # id(array) -> its path (``layers[0].weight``)
        #: id(array) (or a NumPy array's ``content``) -> the global name of an array that is no model's (``W``)
        self.constants: dict[Any, str] = {}
        self.tags: dict[str, tuple[str, str]] = {}  # a name-stack scope pushed -> (path, class name)
        self.linen: dict[str, str] = {}  # a flax linen module's name (its scope in the name stack) -> its class
        self.codes: set[Any] = set()  # the code of the module classes' methods
        self.roots: list[tuple[str, Any]] = []

    # --- naming ----------------------------------------------------------------------------------

    def add(self, root: Any, name: str, relative: bool = True) -> bool:
        """Name ``root``'s modules and arrays when it is a model (``relative``: paths from it,
        ``layers[0]``; else from ``name``); False when it is not one."""
        if is_variables(root):
            for keys, leaf in jax.tree_util.tree_flatten_with_path(root)[0]:
                self.arrays.setdefault(id(leaf), human_path(keys))
            return True
        if not self.classes or not is_module(root, self.classes):
            self._plain(root, name)
            return False
        self.roots.append((name, root))
        prefix = "" if relative else name
        self._walk(root, prefix, name)
        for keys, leaf in jax.tree_util.tree_flatten_with_path(root)[0]:
            self.arrays.setdefault(id(leaf), _joined(prefix, human_path(keys)))
        return True

    def _plain(self, value: Any, name: str) -> None:
        """A global array (``W``) or a container of arrays (``PARAMS['w']``) named, for the constants."""
        if isinstance(value, (np.ndarray, jax.Array)):
            self._constant(value, name)
        elif isinstance(value, (dict, list, tuple)) and value:
            for keys, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
                if isinstance(leaf, (np.ndarray, jax.Array)):
                    self._constant(leaf, name + jax.tree_util.keystr(keys))

    def _constant(self, array: Any, name: str) -> None:
        self.constants.setdefault(id(array), name)
        if isinstance(array, np.ndarray) and array.size <= CONTENT_MOST:  # (JAX closes over a copy of it)
            self.constants.setdefault(content(array), name)

    def constant_name(self, const: Any) -> str | None:
        """The global name of an array the jaxpr closed over (``W``), by identity, else (NumPy's,
        which JAX copies) by its content."""
        found = self.constants.get(id(const))
        if found is None and np.size(const) <= CONTENT_MOST:
            found = self.constants.get(content(np.asarray(const)))
        return found

    def _walk(self, root: Any, prefix: str, root_name: str) -> None:
        stack = [(root, prefix)]
        while stack:
            module, path = stack.pop()
            if id(module) in self.modules:
                continue
            self.modules[id(module)] = (path or root_name, type(module).__name__)
            self.held.append(module)
            self._codes(type(module))
            children = jax.tree_util.tree_flatten_with_path(
                module, is_leaf=lambda x, m=module: x is not m and is_module(x, self.classes)
            )[0]
            stack.extend(
                (sub, _joined(path, human_path(keys))) for keys, sub in children if is_module(sub, self.classes)
            )

    def _codes(self, cls: type) -> None:
        """The code of ``cls``'s methods (its own and its library's, not the module base classes')."""
        bases = {b for c in self.classes for b in c.__mro__}
        for klass in cls.__mro__:
            if klass in bases:
                continue
            for name, member in vars(klass).items():
                if name.startswith("__") and name != "__call__":
                    continue
                code = getattr(inspect.unwrap(member) if callable(member) else None, "__code__", None)
                if code is not None and code.co_argcount:
                    self.codes.add(code)

    def add_referred(self, function: Callable[..., Any]) -> None:
        """The models and arrays among the globals and closure cells ``function`` refers to (closed over),
        and those of the functions of its module it calls (``cell`` called by ``rnn``)."""
        functions, seen = [inspect.unwrap(function)], set()
        while functions and len(seen) < REFERRED_MOST:
            plain = functions.pop()
            if id(plain) in seen:
                continue
            seen.add(id(plain))
            names = _names_of(plain)
            for value in referred(plain):
                if isinstance(value, types.FunctionType) and value.__module__ == plain.__module__:
                    functions.append(value)
                elif id(value) not in self.modules:
                    self.add(value, names.get(id(value), type(value).__name__.lower()))

    def add_arguments(self, args: Any, names: list[str]) -> None:
        """The models among a function's arguments (as traced: the modules rebuilt from its leaves)."""
        several = sum(is_module(a, self.classes) for a in args) > 1
        for arg, name in zip(args, names):
            self.add(arg, name, relative=not several)

    # --- scopes ----------------------------------------------------------------------------------

    def tag(self, module: Any) -> str | None:
        """The name-stack scope of ``module``'s calls (its path), registered; None when not in the tree."""
        found = self.modules.get(id(module)) or self._resolved(module)
        if found is None:
            return None
        self.tags.setdefault(found[0], found)
        return found[0]

    def _resolved(self, module: Any) -> tuple[str, str] | None:
        """A module rebuilt where the function re-flattens its model (``eqx.filter_jit``, ``nnx.jit``):
        the root of the same structure met before, its modules named by their place in it."""
        if not is_module(module, self.classes):
            return None
        structure = jax.tree_util.tree_structure(module)
        for name, root in self.roots:
            if jax.tree_util.tree_structure(root) == structure:
                self._walk(module, self.modules[id(root)][0] if self.modules[id(root)][0] != name else "", name)
                return self.modules.get(id(module))
        return None

    @contextmanager
    def scopes(self) -> Iterator[None]:
        """``module_scopes`` and, where flax linen is imported, each linen module's class by its name
        (``linen``: ``encoder`` -> ``Block``), from linen's own method interceptor."""
        linen = sys.modules.get("flax.linen")
        if linen is None:
            with self.module_scopes():
                yield
            return

        def interceptor(call: Any, args: Any, kwargs: Any, context: Any) -> Any:
            module = context.module
            self.linen.setdefault(module.name or type(module).__name__, type(module).__name__)
            return call(*args, **kwargs)

        with linen.intercept_methods(interceptor), self.module_scopes():
            yield

    @contextmanager
    def module_scopes(self) -> Iterator[None]:
        """While the block runs (on this thread), each call of a method of a module of the tree runs in
        ``jax.named_scope(its path)``: the equations it makes carry its path in their name stack."""
        previous = sys.getprofile()
        if not self.classes or (previous is not None and not callable(previous)):  # (cProfile's: left alone)
            yield
            return
        thread = threading.get_ident()
        open_scopes: dict[Any, Any] = {}

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code in self.codes and threading.get_ident() == thread:
                code = frame.f_code
                tag = self.tag(frame.f_locals.get(code.co_varnames[0]))
                if tag is not None:
                    scope = jax.named_scope(tag)
                    scope.__enter__()
                    open_scopes[frame] = scope
            elif event == "return" and frame in open_scopes:
                open_scopes.pop(frame).__exit__(None, None, None)

        sys.setprofile(profile)
        try:
            yield
        finally:
            sys.setprofile(previous)
            for scope in reversed(list(open_scopes.values())):  # (a trace that raised)
                scope.__exit__(None, None, None)


#: functions of the user's module followed from the one given, for the arrays they close over
REFERRED_MOST = 64
#: elements of a NumPy global found again by its content (JAX closes over a copy of it)
CONTENT_MOST = 1 << 16


def content(array: np.ndarray) -> tuple[Any, ...]:
    return (array.shape, array.dtype.str, hash(np.ascontiguousarray(array).tobytes()))


def _names_of(function: Any) -> dict[int, str]:
    """The names ``function`` knows its globals and closure cells by, by their identity."""
    names = {id(v): k for k, v in getattr(function, "__globals__", {}).items()}
    code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None) or ()
    for name, cell in zip(code.co_freevars if code is not None else (), cells):
        try:
            names.setdefault(id(cell.cell_contents), name)
        except ValueError:  # (an empty cell)
            continue
    return names


def _joined(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"
