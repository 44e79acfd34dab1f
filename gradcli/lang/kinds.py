"""What every kind of program answers (``Program``), and the kind that is a Python function of the
user's (``PythonFunction``; what running one does is python.py's).

The language's kinds (``TreeProgram``, ``FlatTape``) and ``load``, which chooses a kind, are
program.py's; a function computing with PyTorch or JAX is frameworks/function.py's
``FrameworkFunction``, a ``PythonFunction`` too. This module imports none of them, so that
program.py may import the framework's kind without a circle.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import ast
from .evaluate import Evaluation
from .flat import FlatProgram


class Program:
    """What to differentiate: the interface every kind of program answers.

    ``Program(origin, tree=...)``, ``Program(origin, function=...)`` and ``Program(origin, flat=...)``
    make the kind named (as ``pathlib.Path`` makes a ``PosixPath``); ``load`` chooses it from the input.
    The attributes ``tree``, ``flat`` and ``function`` are None where the kind has no such thing."""

    origin: str  # the name messages give it: "expression", a file, FILE.py:func
    source: str | None = None  # the file the program was read from (-f, FILE.py:func)
    tree: ast.SyntaxTree | None = None  # the syntax tree (a function has none)
    flat: FlatProgram | None = None  # the flat tape of one long scalar expression
    function: Callable[..., Any] | None = None  # the user's Python function
    framework: str | None = None  # what the function computes with: "torch", "jax" (None: gradcli)
    escapes: list[str]  # how a run left autograd's sight (float(), .item()...): a function's only
    #: its recording may be replayed at other points (a function is called again at each: its branches may differ)
    replayable = True

    #: the kinds by the keyword that makes them: "tree", "flat", "function" (a class statement's
    #: ``made_by=``; program.py defines the language's two)
    kinds: dict[str, type[Program]] = {}

    def __init_subclass__(cls, made_by: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if made_by is not None:
            Program.kinds[made_by] = cls

    def __new__(cls, *args: Any, **kwargs: Any) -> Program:
        if cls is Program:  # the kind the keyword names
            made_by = (
                "function"
                if kwargs.get("function") is not None
                else "flat"
                if kwargs.get("flat") is not None
                else "tree"
            )
            cls = Program.kinds[made_by]
        return object.__new__(cls)

    def __repr__(self) -> str:
        return f"Program(origin={self.origin!r}, tree={self.tree!r}, function={self.function!r})"

    @property
    def text(self) -> str | None:
        """The program's source text (None for a Python function)."""
        return None

    @property
    def symbolic(self) -> bool:
        """Whether the program has a SymPy form (``diff``, ``check``'s SymPy method)."""
        return self.tree is not None

    @property
    def variables(self) -> list[str]:
        """Free variables in order of first appearance (a function's parameters)."""
        raise NotImplementedError

    def free_variables(self, given: Any = ()) -> list[str]:
        """``evaluate.free_variables`` of the program's text (constants count when ``given`` a value);
        a function's parameters."""
        return self.variables

    def run(self, values: Mapping[str, Any], wrt: Sequence[str] = (), record_steps: bool = False) -> Evaluation:
        """The program at ``values`` as tensors, those named in ``wrt`` requiring grad."""
        return self._run(values, wrt, record_steps)

    def _run(self, values: Mapping[str, Any], wrt: Sequence[str], record_steps: bool) -> Evaluation:
        raise NotImplementedError

    def quick_gradient(self, values: Mapping[str, Any], names: Sequence[str]) -> Any:
        """The evaluation and gradient of a scalar output by a faster road than ``run`` and the engine, or
        None where there is none: ``(evaluation, {name: gradient, None where the output does not use it})``."""
        return None

    def values_at_points(self, values: Mapping[str, Any]) -> Any:
        """The scalar output at every point (``values``' arrays), by a faster road than a replay, or None."""
        return None


class PythonFunction(Program, made_by="function"):
    """A Python function of the user's (its parameters are the variables), run by python.py."""

    replayable = False

    def __init__(self, origin: str, function: Callable[..., Any], escapes: list[str] | None = None) -> None:
        self.origin = origin
        self.function = function
        self.escapes = [] if escapes is None else escapes

    @property
    def variables(self) -> list[str]:
        assert self.function is not None
        return [
            p.name
            for p in inspect.signature(self.function).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]

    def _run(self, values: Mapping[str, Any], wrt: Sequence[str], record_steps: bool) -> Evaluation:
        from .python import run_function  # lazy: start-up, an expression never runs a Python function

        return run_function(self, values, wrt)
