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

from ..errors import UsageError
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

    def random_difference(self, values: Mapping[str, Any], wrt: Sequence[str] = ()) -> float | None:
        """Whether the program is random at ``values``: the largest difference between the outputs of two
        runs there, or None where they agree (a program of the language always does)."""
        return None


class Parameter:
    """One parameter of a user's function, as ``--at`` fills it: ``default`` (``NO_DEFAULT``: required;
    with one, optional: left out of the call unless given), and ``number``: None for a tensor, or the
    kind of Python number it is passed as ("number" for ``jax.jit``'s static arguments, else the TorchScript type: "int", "float", "bool") where the function takes
    a plain number (``jax.jit``'s static arguments, a ``@torch.jit.script`` ``float``): never differentiated."""

    __slots__ = ("name", "default", "number")

    def __init__(self, name: str, default: Any = inspect.Parameter.empty, number: str | None = None) -> None:
        self.name, self.default, self.number = name, default, number

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty

    def __repr__(self) -> str:
        kind = "" if self.number is None else " (static)" if self.number == "number" else f" ({self.number})"
        return self.name + ("" if self.required else f"={self.default!r}") + kind


NO_DEFAULT = inspect.Parameter.empty


def parameters_of(function: Callable[..., Any], origin: str) -> list[Parameter]:
    """``function``'s parameters as ``--at`` fills them: a ``@torch.jit.script`` function's from its
    schema (its ``float``/``int``/``bool`` arguments are Python numbers), a ``jax.jit`` function's
    static arguments as Python numbers, any other's from its signature. A parameter that cannot be
    given by name (``*args``, ``**kwargs``, positional-only) is refused: gradcli passes each by its name."""
    schema = getattr(function, "schema", None)
    if schema is not None and hasattr(schema, "arguments"):  # TorchScript: no Python signature
        return [Parameter(a.name, a.default_value if a.has_default_value() else NO_DEFAULT, _script_number(a.type))
                for a in schema.arguments]  # fmt: skip
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as failed:
        raise UsageError(f"{origin}: cannot read its parameters ({failed})") from None
    parameters = list(signature.parameters.values())
    odd = [p for p in parameters if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)]
    if odd:
        raise UsageError(
            f"{origin} takes {odd[0]}: gradcli passes each --at value by its parameter's name, "
            "so every parameter needs a plain name"
        )
    static = _static_names(function, [p.name for p in parameters])
    return [Parameter(p.name, p.default, "number" if p.name in static else None) for p in parameters]


def _script_number(kind: Any) -> str | None:
    """A TorchScript argument's type -> None for a tensor, else the Python number it takes."""
    text = str(kind).removeprefix("Optional[").removesuffix("]")
    return None if text == "Tensor" else text


def _static_names(function: Callable[..., Any], names: list[str]) -> set[str]:
    """The parameters ``jax.jit`` was told are static (``static_argnames``, ``static_argnums``)."""
    info = getattr(function, "_jit_info", None)  # (jax.jit's wrapper keeps them there, and nowhere public)
    if info is None:
        return set()
    found = {n for n in getattr(info, "static_argnames", ()) or () if isinstance(n, str)}
    found |= {
        names[k]
        for k in getattr(info, "static_argnums", ()) or ()
        if isinstance(k, int) and -len(names) <= k < len(names)
    }
    return found


class PythonFunction(Program, made_by="function"):
    """A Python function of the user's (its parameters are the variables), run by python.py.

    ``variables`` are every parameter ``--at`` may give; ``free_variables(given)`` those differentiated
    by default: the required ones and the optional ones given, Python-number ones excepted."""

    replayable = False

    def __init__(self, origin: str, function: Callable[..., Any], escapes: list[str] | None = None) -> None:
        self.origin = origin
        self.function = function
        self.escapes = [] if escapes is None else escapes
        self._parameters: list[Parameter] | None = None

    @property
    def parameters(self) -> list[Parameter]:
        """The function's parameters, read once (``parameters_of``)."""
        if self._parameters is None:
            assert self.function is not None
            self._parameters = parameters_of(self.function, self.origin)
        return self._parameters

    @property
    def name(self) -> str:
        """The function's name, as outputs are labelled (a TorchScript function's too)."""
        scripted = getattr(self.function, "schema", None) is not None  # (TorchScript's __name__ is its class's)
        found = getattr(self.function, "name" if scripted else "__name__", None)
        return found if isinstance(found, str) and found else self.origin.rpartition(":")[2]

    @property
    def variables(self) -> list[str]:
        return [p.name for p in self.parameters]

    def free_variables(self, given: Any = ()) -> list[str]:
        return [p.name for p in self.parameters if p.number is None and (p.required or p.name in given)]

    def _run(self, values: Mapping[str, Any], wrt: Sequence[str], record_steps: bool) -> Evaluation:
        from .python import run_function  # lazy: start-up, an expression never runs a Python function

        return run_function(self, values, wrt)

    def random_difference(self, values: Mapping[str, Any], wrt: Sequence[str] = ()) -> float | None:
        from .python import random_difference  # lazy: start-up, as run

        return random_difference(self, values, wrt)
