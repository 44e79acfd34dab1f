"""A program to differentiate, as the user gave it: text -> tree -> tensors.

``load`` reads what the user typed (EXPR, ``-``, ``-f FILE``, ``FILE.py:func``, ``--python``) and
chooses the program's kind once: a ``TreeProgram`` of the language, a ``FlatTape`` (one long scalar
expression, lang/flat.py, parsed into a tree only when something asks for it) or a ``PythonFunction``
(lang/python.py). Every kind answers the same small interface, ``Program`` (lang/kinds.py): its variables, a run at
a point into tensors, its text and origin for messages, and the few capabilities that differ
(``tree``, ``symbolic``, ``replayable``, ``quick_gradient``, ``values_at_points``). What the commands
compute from a program (gradients, Jacobians, derivatives by SymPy) is gradcli.lang.compute's.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from _thread import RLock
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import Source, UsageError, note_user_code, raised
from . import ast
from .evaluate import Evaluation, check_names, evaluate, free_variables, suggest
from .flat import FlatProgram, compile_flat
from .kinds import Program, PythonFunction, parameters_of
from .library import gc
from .parser import MAX_CHARACTERS, check_size, parse
from .values import decode, program_too_long, read_bounded, read_text, text_bytes_limit

#: EXPR names a Python function only when the whole argument (stripped) is FILE.py:FUNC with no
#: whitespace or '#' in FILE, and FILE exists: anything else is an expression, so text that merely
#: holds "helper.py:f" (a comment) is never run. ``--python FILE:FUNC`` takes any path.
_PYTHON_FUNCTION = re.compile(r"^(?P<path>[^\s#]+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)$")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TreeProgram(Program, made_by="tree"):
    """A program of the language, parsed."""

    def __init__(self, origin: str, tree: ast.SyntaxTree) -> None:
        self.origin = origin
        self.tree = tree
        self.escapes: list[str] = []

    @property
    def text(self) -> str | None:
        return self.tree.text if self.tree is not None else None

    @property
    def variables(self) -> list[str]:
        return free_variables(self.tree)

    def free_variables(self, given: Any = ()) -> list[str]:
        return free_variables(self.tree, given)

    def _run(self, values: Mapping[str, Any], wrt: Sequence[str], record_steps: bool) -> Evaluation:
        tree = self.tree
        assert tree is not None
        check_names(tree, values)
        with np.errstate(all="ignore"):
            return evaluate(tree, values, wrt, record_steps=record_steps)


class FlatTape(TreeProgram, made_by="flat"):
    """One long scalar expression on the flat road (flat.py): parsed into a syntax tree only when
    something asks for ``tree``, which ``eval`` at a point of float numbers never does."""

    def __init__(self, origin: str, flat: FlatProgram) -> None:
        self.origin = origin
        self.flat = flat
        self._tree: ast.SyntaxTree | None = None
        self.escapes = []

    @property  # type: ignore[override]
    def tree(self) -> ast.SyntaxTree:
        if self._tree is None:
            self._tree = parse(self.flat.text, self.origin)  # the origin messages name
        return self._tree

    @property
    def text(self) -> str:
        return self.flat.text

    @property
    def symbolic(self) -> bool:
        return True

    @property
    def variables(self) -> list[str]:
        return self.flat.free_variables() if self._tree is None else free_variables(self._tree)

    def free_variables(self, given: Any = ()) -> list[str]:
        return self.flat.free_variables(given) if self._tree is None else free_variables(self._tree, given)

    def quick_gradient(self, values: Mapping[str, Any], names: Sequence[str]) -> Any:
        found = self.flat.value_and_grad(values, names)
        if found is None:
            return None
        value, _, grads, inputs = found
        start, end = self.flat.span
        return Evaluation([gc.tensor(value)], inputs, {}, [Source(self.flat.text).excerpt(start, end)]), grads

    def values_at_points(self, values: Mapping[str, Any]) -> Any:
        return self.flat.at_points(values)


def _from_text(text: str, origin: str) -> Program:
    """A program of the language: on the flat road when it is one long scalar expression (flat.py)."""
    check_size(Source(text, origin))  # the flat road's estimate; the full parser counts the tokens
    flat = compile_flat(text)
    if flat is not None:
        return FlatTape(origin, flat)
    return TreeProgram(origin, parse(text, origin))


def load(
    expression: str | None, file: str | None = None, python: str | None = None, framework: str | None = None
) -> Program:
    """The program named on the command line: EXPR, ``-`` (stdin), ``-f FILE``, ``file.py:func``
    or ``--python FILE:FUNC``; ``program.source`` is the file it was read from (None for EXPR or stdin).
    A function computing with PyTorch or JAX (``framework``: "torch", "jax", "gradcli", or None to
    tell from what the function uses) is a ``FrameworkFunction``."""
    if framework is not None:
        from .frameworks import checked_framework  # lazy: start-up, an expression has no framework

        framework = checked_framework(framework) or "gradcli"
    program = _load(expression, file, python)
    if isinstance(program, PythonFunction):
        program = _in_framework(program, framework)
    elif framework not in (None, "gradcli"):
        raise UsageError(f"--framework {framework}: only a Python function (FILE.py:func) computes with a framework")
    if python is not None:
        program.source = python.rpartition(":")[0]
    elif file is not None:
        program.source = None if file == "-" else file
    elif isinstance(program, PythonFunction):
        program.source = expression.strip().rpartition(":")[0]  # type: ignore[union-attr]
    return program


def _load(expression: str | None, file: str | None, python: str | None) -> Program:
    if python is not None:
        if file is not None or expression not in (None, ""):
            other = "-f FILE" if file is not None else "EXPR"
            raise UsageError(f"give the program either as {other} or with --python FILE:FUNC, not both")
        path, colon, name = python.rpartition(":")
        if not colon or not path or not _IDENTIFIER.fullmatch(name):
            raise UsageError(f"--python {python!r}: give FILE:FUNC, a Python file and the name of a function in it")
        return PythonFunction(python, load_function(path, name))
    if file is not None and expression not in (None, ""):
        raise UsageError("give the expression either as EXPR or with -f FILE, not both")
    if file is not None:
        text = read_stdin() if file == "-" else read_text(file, "-f", text_bytes_limit(), program_too_long(file))
        return _from_text(text.removeprefix("\ufeff"), file)  # a BOM, as --points takes it
    if expression is None:
        raise UsageError("missing EXPR: give an expression, - to read standard input, or -f FILE")
    if expression == "-":
        return _from_text(read_stdin().removeprefix("\ufeff"), "<stdin>")
    match = _PYTHON_FUNCTION.match(expression.strip())
    if match and _is_file(match["path"]):
        return PythonFunction(expression, load_function(match["path"], match["name"]))
    try:
        return _from_text(expression, "expression")
    except UsageError:
        if match:  # meant as a function, surely: say what is missing rather than a syntax error
            raise UsageError(f"{match['path']}: no such file") from None
        raise


def function_program(function: Callable[..., Any], framework: str | None = None, given: Sequence[Any] = ()) -> Program:
    """A Python function of the caller's as a program (the library's ``gc.check(f, ...)``,
    ``gc.why(f, ...)``): a ``FrameworkFunction`` when it computes with PyTorch or JAX, or is
    ``given`` their tensors."""
    origin = getattr(function, "__name__", None) or type(function).__name__
    return _in_framework(PythonFunction(origin, function), framework, given)


def _in_framework(program: PythonFunction, framework: str | None, given: Sequence[Any] = ()) -> Program:
    """The function as a ``FrameworkFunction`` when it computes with PyTorch or JAX."""
    from .frameworks import framework_of  # lazy: start-up, an expression has no framework

    assert program.function is not None
    chosen = (
        (None if framework == "gradcli" else framework)
        if framework is not None
        else framework_of(program.function, given)
    )
    if chosen is None:
        return program
    from .frameworks.function import FrameworkFunction  # lazy: imports the framework itself

    return FrameworkFunction(program.origin, program.function, chosen)


def _is_file(path: str) -> bool:
    from pathlib import Path  # lazy: start-up, a plain expression never names a file

    return Path(path).is_file()


def read_stdin() -> str:
    """Standard input as UTF-8 text (bytes, so that a bad byte is named rather than escaped),
    read no further than a program's size limit."""
    if sys.stdin is None:  # closed (`gradcli eval - <&-`)
        raise UsageError("standard input is closed: nothing to read (give EXPR, or -f FILE)")
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # replaced by a text stream (tests)
        text = sys.stdin.read(MAX_CHARACTERS + 1)
        if len(text) > MAX_CHARACTERS:
            raise UsageError(program_too_long("<stdin>"))
        return text
    data = read_bounded(stream, "standard input", text_bytes_limit(), program_too_long("<stdin>"))
    return decode(data, "standard input")


def load_function(path: str, name: str) -> Callable[..., Any]:
    """Import ``path`` (the user's own code, as pytest imports tests: its folder importable meanwhile,
    ``import helper`` of a module beside it works) and take ``name``."""
    import importlib.util  # lazy: start-up, as pathlib: a plain expression does without them
    from pathlib import Path

    from .frameworks import before_import  # lazy: start-up, an expression imports nothing

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"_gradcli_user_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    try:
        before_import(file.read_text(errors="replace"))  # (JAX in float64 before the file makes its arrays)
        with importable(file.resolve().parent):
            spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise UsageError(f"{path}, line {exc.lineno}: {exc.msg}") from None
    except ModuleNotFoundError as exc:  # PyTorch or JAX missing: how to install it (exit 3)
        from .frameworks import missing  # lazy: start-up, an expression imports nothing

        missing(exc.name or "")
        raise UsageError(f"{path}: importing it raised {raised(exc)}") from None
    except Exception as exc:  # the user's module failed while importing
        raise UsageError(f"{path}: importing it raised {raised(exc)}") from None
    function = getattr(module, name, None)
    if not callable(function):
        defined = [n for n, f in vars(module).items() if inspect.isfunction(f) and not n.startswith("_")]
        raise UsageError(f"{path} has no function {name!r}{suggest(name, defined)}")
    parameters_of(function, f"{path}:{name}")  # (refused now when a parameter has no plain name)
    note_user_code(f"{path}:{name}")
    return function


_IMPORTING = RLock()  # one user's file imported at a time: sys.path is the process's


@contextmanager
def importable(folder: Any) -> Iterator[None]:
    """``folder`` first on ``sys.path`` while a user's file in it is imported (as pytest's ``prepend``
    import mode puts a test's folder there), so that it can ``import helper`` from beside it. After,
    ``sys.path`` is as it was, and the modules imported from ``folder`` leave ``sys.modules`` (the
    file keeps them), so that another folder's ``helper`` is its own (``check --cases``)."""
    entry = str(folder)
    with _IMPORTING:
        before = set(sys.modules)
        added = entry not in sys.path
        if added:
            sys.path.insert(0, entry)
        try:
            yield
        finally:
            if added and entry in sys.path:
                sys.path.remove(entry)
            for module_name in set(sys.modules) - before:
                found = getattr(sys.modules.get(module_name), "__file__", None) or ""
                if added and found.startswith(entry + os.sep):
                    del sys.modules[module_name]
