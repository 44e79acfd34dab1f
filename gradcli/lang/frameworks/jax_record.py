"""A JAX function's graph with its numbers: every equation of its jaxpr, each value and cotangent.

``jax.make_jaxpr`` gives the equations; each is then evaluated here (``primitive.bind``, as
``jax.core.eval_jaxpr`` does) so that every variable gets its value. Calls are equations holding a
jaxpr of their own: ``jit`` (``pjit``), ``closed_call`` and ``remat`` are opened, their equations
evaluated one by one inside a box named by the call; a ``custom_vjp`` / ``custom_jvp`` call is
evaluated as one, so that the user's rule is the one differentiated, and its inner equations are
evaluated apart to be shown in its box; ``scan``, ``while`` and ``cond`` stay one equation each,
in a box named by the primitive.

The cotangents (d output / d every variable) come from ONE ``jax.vjp`` of the evaluation with a
zero added to every evaluated equation's outputs: the cotangent of that zero is the variable's. A
large jaxpr's evaluation is compiled as one program (its equations bound one by one while it is
traced), a small one's runs equation by equation.
Inside a custom rule's box, the inner equations' cotangents come from the vjp of its inner
equations, seeded with the call's outputs' cotangents.

Importing this module imports JAX (``require``: float64 on, or the install line and exit 3).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import UsageError
from . import require
from .jax_modules import ModuleTree, class_of_name, human_path, is_module, is_variables

jax = require("jax")
import jax.numpy as jnp  # noqa: E402  (after require: float64 is on before any array is made)
from jax.extend import source_info_util  # noqa: E402
from jax.extend.core import ClosedJaxpr, DropVar, Literal  # noqa: E402

from .jax_loops import cond_branch, scan_run, while_run  # noqa: E402

#: calls opened into their equations (the box takes the call's kind as its name's first part)
OPENED = {"pjit": "pjit", "jit": "jit", "closed_call": "call", "core_call": "call", "remat2": "remat",
          "checkpoint": "remat", "remat": "remat"}  # fmt: skip
#: calls evaluated as one whose inner equations are shown: the user's derivative rule is the one used
CUSTOM = {"custom_vjp_call": "custom_vjp", "custom_vjp_call_jaxpr": "custom_vjp", "custom_jvp_call": "custom_jvp"}
#: loops and branches: one equation each, drawn in a box named by the primitive
LOOPS = ("scan", "while", "cond")


@dataclass
class JaxValue:
    """One variable of the jaxpr (or a literal, or a constant the function closed over)."""

    kind: str  # "input", "constant" (an array the function closed over), "literal", "result"
    shape: tuple[int, ...]
    dtype: Any
    name: str | None = None  # an input's parameter name ("w", "params['b']")
    value: np.ndarray | None = None
    cotangent: np.ndarray | None = None  # d output / d this value
    producer: int | None = None  # the equation computing it (index into JaxTrace.equations)
    differentiable: bool = False  # an input differentiated (``wrt``), or a floating result
    dropped: bool = False  # an output the jaxpr drops (``_``)
    key: Any = None  # a PRNG key: the key itself, to compute with (``value`` holds its key data, to be shown)


@dataclass
class JaxEquation:
    """One equation: a primitive applied to values (ids into ``JaxTrace.values``)."""

    primitive: str  # "sin", "dot_general", "scan", "custom_vjp_call"
    inputs: list[int]
    outputs: list[int]
    eqn: Any  # the jaxpr's own equation (its primitive and params: bound again for local derivatives)
    scope: str | None  # the names of the calls around it: "jit:layer/custom_vjp:safe_log"
    call: int | None  # the innermost call around it (index into JaxTrace.calls)
    line: str | None  # the line of the user's code that made it: "model.py:12"
    shown: bool = True  # a node of the graph (a custom call is drawn by its inner equations instead)
    #: an equation of a loop's body or a branch, drawn once in its box with the values of one iteration
    #: (not one of the function's own steps); ``carry``, ``slice`` and ``result`` (``eqn`` None) draw
    #: the body's inputs and the loop's outputs
    body: bool = False


@dataclass
class JaxCall:
    """A call holding a jaxpr: a box of the graph."""

    kind: str  # "jit", "call", "remat", "custom_vjp", "custom_jvp", "scan", "while", "cond"
    name: str  # the function's name ("layer", "safe_log"), or the primitive's for a loop
    scope: str  # its path: "jit:layer/custom_vjp:safe_log"
    parent: int | None
    line: str | None
    equation: int  # the equation that calls it (for a custom rule: the call evaluated as one)
    repeat: int | None = None  # a loop's iterations (None: not known)
    iteration: int | None = None  # the iteration whose values its body's nodes show (1: the first)
    #: a loop's carried values: (the body's output carried, the body's input it becomes)
    carries: list[tuple[int, int]] = field(default_factory=list)
    norms: list[list[float]] = field(default_factory=list)  # per iteration, each floating carry's norm
    stats: list[dict[str, float]] = field(default_factory=list)  # per iteration, the carries' statistics
    grads: list[dict[str, float]] | None = None  # per iteration, those of d output / d the carries after it
    branch: tuple[int, int] | None = None  # a cond's branch taken, and how many it has
    module: str | None = None  # a module's class ("Linear"), where known

    @property
    def label(self) -> str:
        if self.kind == "module":
            return self.name
        return self.kind if self.kind in LOOPS else f"{self.kind}:{self.name}"


@dataclass
class _Block:
    """Equations evaluated together: the function's own (calls opened), or a custom rule's inner ones."""

    steps: list[int] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    inner: dict[int, _Block] = field(default_factory=dict)  # a custom call's equation -> its inner block
    call: int | None = None  # a loop's or a branch's block: its call (JaxTrace.calls)
    branches: dict[int, list[_Block]] = field(default_factory=dict)  # a cond's equation -> its branches
    span: tuple[int, int] = (0, 0)  # a branch's equations (drawn only where it ran)


@dataclass
class JaxTrace:
    values: list[JaxValue]
    equations: list[JaxEquation]
    calls: list[JaxCall]
    inputs: list[int]
    outputs: list[int]
    #: a custom call's output -> the value of its inner equations drawn for it
    shown_as: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    has_cotangents: bool = False


def trace_jax(
    function: Callable[..., Any],
    args: Sequence[Any],
    names: Sequence[str] | None = None,
    wrt: Sequence[str] | None = None,
    seed: Any = None,
    cotangents: bool = True,
    refers: Callable[..., Any] | None = None,
) -> JaxTrace:
    """``function(*args)``'s jaxpr, evaluated equation by equation: every value, and with a single
    output (a scalar, or ``seed`` as its cotangent) every cotangent. ``names``: the parameters'
    names (default the function's own); ``wrt``: the inputs differentiated (default every floating
    one; the others are constants); ``cotangents`` False: values alone. An argument may be a pytree
    of arrays: its leaves are inputs named by their path (``params['w']``; a model's by its module
    path, ``layers[0].weight``), its other leaves (an activation function) passed as they are. A
    model the function (``refers``: the function the user gave) closes over has its arrays named by
    their path and differentiated too; ``function`` a model itself (``graph(model, x)``): the model is
    its first argument (named ``model``), its arrays inputs named by their paths."""
    if is_module(function):
        function, args, names, refers = _model_called(function, args, names, refers)
    leaves, treedef, names, arrays = _flat_arguments(function, args, names)
    unknown = [w for w in wrt or () if not any(_chosen(name, [w]) for name in names)]
    if unknown:
        raise UsageError(f"--wrt {unknown[0]}: the function has no input {unknown[0]!r} (inputs: {', '.join(names)})")
    traced = [a and _chosen(name, wrt) for name, a in zip(names, arrays)]  # (others: plain values, nondiff_argnums)
    recorder = _Recorder(refers or function)
    positions = parameter_names(function, len(args))

    def flat(*xs: Any) -> Any:
        given = iter(xs)
        whole = [next(given) if t else leaf for leaf, t in zip(leaves, traced)]
        rebuilt = jax.tree_util.tree_unflatten(treedef, whole)
        recorder.tree.add_arguments(rebuilt, positions)
        kept = _arrays_of(function(*rebuilt), refers or function, recorder.left_out)
        recorder.refused = None if kept else recorder.left_out.pop()
        return kept

    with recorder.tree.scopes():
        closed = jax.make_jaxpr(flat)(*(leaf for leaf, t in zip(leaves, traced) if t))
    if recorder.refused:  # (raised here: JAX adds lines of its own to what is raised inside a trace)
        raise UsageError(recorder.refused)
    inputs, top = [], _Block()
    for leaf, name, t, a in zip(leaves, names, traced, arrays):
        if a:
            index = recorder.value("input", leaf, name=name)
            recorder.values[index].value, recorder.values[index].key = host(leaf)
            recorder.values[index].differentiable = _floating(leaf.dtype) and t
            inputs.append(index)
            if t:
                top.inputs.append(index)
            else:
                recorder.bound[id(leaf)] = index  # (closed over: constants)
    top.outputs = recorder.walk(closed, top.inputs, None, None, top)
    top.inputs += recorder.parameters
    trace = JaxTrace(recorder.values, recorder.equations, recorder.calls, inputs, top.outputs, recorder.shown_as)
    trace.notes += recorder.left_out
    _drop_unused(trace)
    seed = _seed_of(trace, seed) if cotangents else None
    _evaluate(trace, top, None if seed is None else [seed])
    return trace


def _model_called(model: Any, args: Sequence[Any], names: Sequence[str] | None,
                  refers: Any) -> tuple[Callable[..., Any], tuple[Any, ...], list[str], Any]:  # fmt: skip
    """``graph(model, x)``: the model made the first argument (``model``) of a function calling it."""
    given = list(names) if names is not None else parameter_names(model, len(args))
    return _call_model, (model, *args), ["model", *given], refers or _call_model


def _call_model(model: Any, *args: Any) -> Any:
    return model(*args)


def _arrays_of(out: Any, function: Callable[..., Any], notes: list[str]) -> list[Any]:
    """The arrays (and numbers) among what ``function`` returned, its other leaves (a name, a
    string) left out with a note in ``notes``; none at all: none, and the refusal its last note."""
    paths = jax.tree_util.tree_flatten_with_path(out)[0]
    kept = [leaf for _, leaf in paths if isinstance(leaf, (jax.Array, np.ndarray, np.generic, int, float, complex))]
    name = getattr(function, "__name__", "the function")
    if not kept:
        what = "None" if out is None else type(out if not paths else paths[0][1]).__name__
        notes.append(f"{name} returned {what}, not JAX arrays: nothing to draw")
        return []
    left = [
        f"{jax.tree_util.keystr(p) or 'the output'} ({type(v).__name__})"
        for p, v in paths
        if not any(v is k for k in kept)
    ]
    if left:
        notes.append(f"left out what {name} returned that is not an array: {_first_four(left)}")
    return kept


def _first_four(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _drop_unused(trace: JaxTrace) -> None:
    """Outputs nothing uses (a loop's counter, which the jaxpr prints as ``_``) are not drawn."""
    used = {i for e in trace.equations for i in e.inputs} | set(trace.outputs)
    used |= {out for c in trace.calls for out, _ in c.carries}  # (carried to the next iteration)
    used |= {trace.shown_as[i] for i in used if i in trace.shown_as}
    for o in (o for e in trace.equations for o in e.outputs if o not in used):
        trace.values[o].dropped = True


def trace_values(
    function: Callable[..., Any],
    values: Mapping[str, Any],
    wrt: Sequence[str] | None = None,
    seed: Any = None,
    cotangents: bool = True,
) -> JaxTrace:
    """``trace_jax`` of ``function(**values)``, each value made a float64 array (as the CLI's ``--at``)."""
    names = list(values)
    args = [np.asarray(values[n], dtype=np.float64) for n in names]
    return trace_jax(lambda *xs: function(**dict(zip(names, xs))), args, names, wrt, seed, cotangents, function)


def _chosen(name: str, wrt: Sequence[str] | None) -> bool:
    """Is the input ``name`` differentiated: all are without ``wrt``; a pytree's leaves with its name."""
    return wrt is None or name in wrt or name.partition("[")[0] in wrt


def _flat_arguments(function: Callable[..., Any], args: Sequence[Any],
                    names: Sequence[str] | None) -> tuple[list[Any], Any, list[str], list[bool]]:  # fmt: skip
    """The arguments' leaves (arrays, and the others as they are), their tree, each leaf's name (a
    model's by its path in the model, ``layers[0].weight``; with several models, after the argument's
    name) and which leaves are arrays."""
    names = list(names) if names is not None else parameter_names(function, len(args))
    paths, treedef = jax.tree_util.tree_flatten_with_path(tuple(args))
    models = [is_module(a) or is_variables(a) for a in args]
    several = sum(is_module(a) for a in args) > 1
    leaves, leaf_names, arrays = [], [], []
    for path, leaf in paths:
        position = path[0].idx  # (a SequenceKey: the argument's position)
        name = names[position] if position < len(names) else f"x{position}"
        if models[position]:
            inside = human_path(path[1:])
            leaf_names.append(f"{name}.{inside}" if several and is_module(args[position]) else inside or name)
        else:
            leaf_names.append(name + jax.tree_util.keystr(tuple(path[1:])))
        # (a Python int or bool is static, as jit's static arguments: a count, a flag, a layer's size)
        array = isinstance(leaf, (jax.Array, np.ndarray, np.generic, float, complex))
        leaves.append(jnp.asarray(leaf) if array else leaf)
        arrays.append(array)
    return leaves, treedef, leaf_names, arrays


def parameter_names(function: Callable[..., Any], count: int) -> list[str]:
    """The names of ``function``'s first ``count`` positional parameters (``x0``, ``x1``, ... beyond
    them, and for ``*args``)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # (a builtin without a signature)
        parameters = []
    found = []
    for p in parameters:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        found.append(p.name)
    return [found[k] if k < len(found) else f"x{k}" for k in range(count)]


def _floating(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.floating))


def host(value: Any) -> tuple[np.ndarray, Any]:
    """A value as NumPy holds it, to be shown, and a PRNG key itself (None for any other value): a
    key's NumPy value is its key data (NumPy has no key type), the key is what equations compute with."""
    if jnp.issubdtype(getattr(value, "dtype", np.float64), jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(value)), value
    return np.asarray(value), None


def operand(value: JaxValue) -> Any:
    """What an equation is given for ``value``: its NumPy value, or the PRNG key itself."""
    return value.value if value.key is None else value.key


class _Recorder:
    """Walks a jaxpr into values, equations and calls (the structure: values come afterwards)."""

    def __init__(self, referring: Callable[..., Any]) -> None:
        """``referring``: the function the user gave, naming the models it closes over (the model
        itself, where the CLI's ``FILE.py:model`` gave one)."""
        self.values: list[JaxValue] = []
        self.equations: list[JaxEquation] = []
        self.calls: list[JaxCall] = []
        self.shown_as: dict[int, int] = {}
        self.bound: dict[int, int] = {}  # an input passed as a plain array (id) -> its value, where closed over
        self.tree = ModuleTree()  # the models met: their modules' name-stack scopes, their arrays' paths
        self.left_out: list[str] = []  # notes on what the function returned that is not drawn
        self.refused: str | None = None  # why nothing it returned can be drawn
        self.parameters: list[int] = []  # a model's arrays the function closed over: differentiated too
        self.in_body = 0  # inside a loop's body or a branch (their equations are drawn, not evaluated as steps)
        self.in_rule = 0  # inside a custom rule's own equations
        self.tree.add_referred(referring)
        if is_module(referring):  # (the CLI's FILE.py:model: the model called, closed over by the call)
            self.tree.add(referring, "model")

    def value(self, kind: str, aval: Any, **fields: Any) -> int:
        self.values.append(JaxValue(kind, tuple(getattr(aval, "shape", ())), getattr(aval, "dtype", None), **fields))
        return len(self.values) - 1

    def walk(self, jaxpr: Any, inputs: list[int], scope: str | None, call: int | None, block: _Block) -> list[int]:
        """Record ``jaxpr``'s equations (its inputs being the values ``inputs``) into ``block``;
        the values of its outputs."""
        closed = jaxpr if isinstance(jaxpr, ClosedJaxpr) else None
        inner = closed.jaxpr if closed is not None else jaxpr
        env: dict[Any, int] = {}
        for var, const in zip(inner.constvars, closed.consts if closed is not None else ()):
            env[var] = self.constant(var, const)
        env.update(zip(inner.invars, inputs))
        boxes: list[tuple[str, int, str]] = []  # the name-stack scopes open: (name, call, scope)
        for eqn in inner.eqns:
            ins = [self.atom(a, env) for a in eqn.invars]
            name = eqn.primitive.name
            where, around = self.scoped(eqn, boxes, scope, call)
            if name in OPENED and sub_jaxpr(eqn) is not None:
                outs = self.opened(eqn, ins, where, around, block)
            elif name in CUSTOM:
                outs = self.custom(eqn, ins, where, around, block)
            elif name in ("scan", "while"):
                outs = self.loop(eqn, ins, where, around, block)
            elif name == "cond":
                outs = self.branches(eqn, ins, where, around, block)
            else:
                outs = self.equation(eqn, ins, where, around, block)
            env.update(zip(eqn.outvars, outs))
        return [self.atom(a, env) for a in inner.outvars]

    def constant(self, var: Any, const: Any) -> int:
        """An array the jaxpr closed over: the input it is, else a constant (a model's parameter named
        by its path, and differentiated, where it is one)."""
        known = self.bound.get(id(const))
        if known is not None:
            return known
        name = self.tree.arrays.get(id(const))
        index = self.value("constant", var.aval, name=name or self.tree.constant_name(const))
        self.values[index].value, self.values[index].key = host(const)
        if name is not None and _floating(var.aval.dtype) and not self.in_rule:
            self.values[index].differentiable = True
            self.parameters.append(index)
            self.bound[id(const)] = index
        return index

    def scoped(self, eqn: Any, boxes: list[tuple[str, int, str]], scope: str | None,
               call: int | None) -> tuple[str | None, int | None]:  # fmt: skip
        """The scope and the innermost call of ``eqn`` once the boxes of its name stack are open (a
        module's, ``layers[0]``, or a ``jax.named_scope``'s), those it is not in closed."""
        names = self.scope_names(eqn)
        common = 0
        while common < min(len(names), len(boxes)) and boxes[common][0] == names[common]:
            common += 1
        del boxes[common:]
        for name in names[common:]:
            outer_scope, outer = (boxes[-1][2], boxes[-1][1]) if boxes else (scope, call)
            found = self.tree.tags.get(name)
            known = self.tree.linen.get(name) or class_of_name(name)
            if found is None and len(boxes) > 1:  # (a scope inside a module's: its path goes on from it)
                found = (f"{self.calls[boxes[-1][1]].name}.{name}", known)
            k, path = self.new_call("module", found[0] if found else name, eqn, outer_scope, outer)
            self.calls[k].module = found[1] if found else known
            boxes.append((name, k, path))
        return (boxes[-1][2], boxes[-1][1]) if boxes else (scope, call)

    def scope_names(self, eqn: Any) -> list[str]:
        """The named scopes of ``eqn``'s name stack (transformations such as ``vmap()`` left out; a
        library's scope of a module's class, equinox's ``eqx.nn.Linear``, left for its path)."""
        stack = getattr(getattr(eqn.source_info, "name_stack", None), "stack", ())
        names = [s.name for s in stack if type(s).__name__ == "Scope"]
        tags = self.tree.tags
        return [
            n for k, n in enumerate(names)
            if n in tags or k + 1 >= len(names) or names[k + 1] not in tags
            or not n.endswith(tags[names[k + 1]][1])
        ]  # fmt: skip

    def atom(self, atom: Any, env: dict[Any, int]) -> int:
        if isinstance(atom, Literal):
            return self.value("literal", atom.aval, value=np.asarray(atom.val, dtype=atom.aval.dtype))
        return env[atom]

    def new_call(self, kind: str, name: str, eqn: Any, scope: str | None, parent: int | None) -> tuple[int, str]:
        label = kind if kind in LOOPS else name if kind == "module" else f"{kind}:{name}"
        path = f"{scope}/{label}" if scope else label
        self.calls.append(JaxCall(kind, name, path, parent, user_line(eqn), len(self.equations)))
        return len(self.calls) - 1, path

    def equation(self, eqn: Any, ins: list[int], scope: str | None, call: int | None, block: _Block | None,
                 shown: bool = True) -> list[int]:  # fmt: skip
        """``eqn`` recorded (evaluated in ``block``; None: a step of no block, its values set apart)."""
        name = eqn.primitive.name
        index = len(self.equations)
        outs = []
        for var in eqn.outvars:
            out = self.value("result", var.aval, producer=index, dropped=isinstance(var, DropVar))
            self.values[out].differentiable = _floating(self.values[out].dtype)
            outs.append(out)
        self.equations.append(JaxEquation(name, ins, outs, eqn, scope, call, user_line(eqn), shown, self.in_body > 0))
        if block is not None:
            block.steps.append(index)
        return outs

    def drawn(self, kind: str, source: int, out: int | None, scope: str | None, call: int | None,
              line: str | None, aval: Any = None) -> int:  # fmt: skip
        """A step of no block drawing a loop's input or output (``carry``, ``slice``, ``result``): its
        output ``out`` (a new value of ``aval`` where None)."""
        if out is None:
            out = self.value(kind, aval)
            self.values[out].differentiable = _floating(aval.dtype)
        self.values[out].producer = len(self.equations)
        self.equations.append(JaxEquation(kind, [source], [out], None, scope, call, line, True, True))
        return out

    def loop(self, eqn: Any, ins: list[int], scope: str | None, call: int | None, block: _Block) -> list[int]:
        """A ``scan`` or ``while`` evaluated as one (in ``block``), in a box of its own holding its body
        drawn once: its carried inputs (``carry``) and the slices of its scanned ones (``slice``), its
        equations, and the loop's outputs (``result``), each from the body's output computing it."""
        name = eqn.primitive.name
        call, scope = self.new_call(name, name, eqn, scope, call)
        outs = self.equation(eqn, ins, scope, call, block, shown=False)
        index = block.steps[-1]
        line = user_line(eqn)
        p = eqn.params
        if name == "scan":
            jaxpr, consts, carry_n = p["jaxpr"], p["num_consts"], p["num_carry"]
            self.calls[call].repeat = p["length"]
        else:
            jaxpr, consts, carry_n = p["body_jaxpr"], p["body_nconsts"], len(outs)
            ins = ins[p["cond_nconsts"] :]
        self.in_body += 1
        avals = [v.aval for v in getattr(jaxpr, "jaxpr", jaxpr).invars]
        body = [
            i if k < consts else self.drawn("carry" if k < consts + carry_n else "slice", i, None, scope, call, line, a)
            for k, (i, a) in enumerate(zip(ins, avals))
        ]
        inner = _Block(inputs=body, call=call)
        inner.outputs = self.walk(jaxpr, body, scope, call, inner)
        self.calls[call].carries = [(inner.outputs[k], body[consts + k]) for k in range(carry_n)]
        for out, made in zip(outs, inner.outputs):
            if not self.values[out].dropped:
                self.drawn("result", made, out, scope, call, line)
        self.in_body -= 1
        block.inner[index] = inner
        return outs

    def branches(self, eqn: Any, ins: list[int], scope: str | None, call: int | None, block: _Block) -> list[int]:
        """A ``cond`` evaluated as one (in ``block``), in a box of its own; each branch recorded, not
        drawn until the evaluation says which one ran (its outputs drawn as the cond's by ``result``)."""
        call, scope = self.new_call("cond", "cond", eqn, scope, call)
        outs = self.equation(eqn, ins, scope, call, block, shown=False)
        index = block.steps[-1]
        self.in_body += 1
        block.branches[index] = []
        for branch in eqn.params["branches"]:
            inner = _Block(inputs=ins[1:], call=call)
            first = len(self.equations)
            inner.outputs = self.walk(branch, ins[1:], scope, call, inner)
            for out, made in zip(outs, inner.outputs):
                if not self.values[out].dropped:
                    self.drawn("result", made, out, scope, call, user_line(eqn))
            inner.span = (first, len(self.equations))
            block.branches[index].append(inner)
        self.in_body -= 1
        return outs

    def opened(self, eqn: Any, ins: list[int], scope: str | None, call: int | None, block: _Block) -> list[int]:
        kind = OPENED[eqn.primitive.name]
        call, scope = self.new_call(kind, call_name(eqn, kind), eqn, scope, call)
        return self.walk(sub_jaxpr(eqn), ins, scope, call, block)

    def custom(self, eqn: Any, ins: list[int], scope: str | None, call: int | None, block: _Block) -> list[int]:
        """The call evaluated as one (in ``block``); its inner equations in a block of their own, shown
        in its box, each of the call's outputs drawn as the inner equation computing it."""
        kind = CUSTOM[eqn.primitive.name]
        call, scope = self.new_call(kind, call_name(eqn, kind), eqn, scope, call)
        outs = self.equation(eqn, ins, scope, call, block, shown=False)
        index = block.steps[-1]
        first = len(self.equations)
        inner = _Block(inputs=ins)
        self.in_rule += 1
        inner.outputs = self.walk(eqn.params["call_jaxpr"], ins, scope, call, inner)
        self.in_rule -= 1
        block.inner[index] = inner
        taken = set()
        for out, drawn in zip(outs, inner.outputs):
            producer = self.values[drawn].producer
            if producer is not None and producer >= first and drawn not in taken:
                self.shown_as[out] = drawn
                taken.add(drawn)
            else:  # (an input passed through, a literal): the call itself draws it
                self.equations[index].shown = True
        return outs


def sub_jaxpr(eqn: Any) -> Any:
    return eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))


def call_name(eqn: Any, kind: str) -> str:
    """A call's name: jit's ``name``, else the wrapped function's (``safe_log``), else its kind."""
    name = eqn.params.get("name")
    if isinstance(name, str) and name:
        return name
    sub = sub_jaxpr(eqn)
    info = getattr(getattr(sub, "jaxpr", sub), "debug_info", None)
    found = getattr(info, "func_name", None)
    return found if isinstance(found, str) and found and found != "<unknown>" else kind


_SUMMARY = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?::\d+)?(?: \(.*\))?$")


def user_line(eqn: Any) -> str | None:
    """The line of the user's code that made ``eqn`` (``model.py:12``), from JAX's own summary of its
    source; None where it has none."""
    try:
        text = source_info_util.summarize(eqn.source_info)
    except Exception:  # (a source JAX cannot summarise: no line)
        return None
    found = _SUMMARY.match(text or "")
    if found is None:
        return None
    return f"{Path(found['file']).name}:{found['line']}"


# --- values and cotangents ---------------------------------------------------------------------


def bind(eqn: Any, inputs: Sequence[Any]) -> list[Any]:
    """``eqn`` applied to ``inputs`` (as ``jax.core.eval_jaxpr`` applies it): its outputs, as a list."""
    params = eqn.primitive.get_bind_params(eqn.params)
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*inputs, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _run(trace: JaxTrace, block: _Block, env: dict[int, Any], eps: dict[int, Any]) -> list[Any]:
    """Evaluate ``block``'s equations, adding ``eps`` to the outputs it holds a zero for."""
    for k in block.steps:
        equation = trace.equations[k]
        for out, value in zip(equation.outputs, bind(equation.eqn, [env[i] for i in equation.inputs])):
            env[out] = value + eps[out] if out in eps else value
    return [env[i] for i in block.outputs]


def _seed_of(trace: JaxTrace, seed: Any) -> Any:
    """The output's cotangent: 1 for a scalar, ``seed`` else; None (with a note) where there is none."""
    if len(trace.outputs) != 1:
        trace.notes.append("gradients are shown for a single output")
        return None
    out = trace.values[trace.outputs[0]]
    if not _floating(out.dtype):
        return None
    if seed is None:
        if int(np.prod(out.shape)) != 1:
            trace.notes.append(f"the output has shape {out.shape}: give --seed for gradients")
            return None
        return np.ones(out.shape, out.dtype)
    return jnp.broadcast_to(jnp.asarray(seed, dtype=out.dtype), out.shape)


def _evaluate(trace: JaxTrace, block: _Block, seeds: list[Any] | None, top: bool = True) -> None:
    """Values of ``block``'s equations and, with ``seeds`` (its outputs' cotangents), the cotangents of
    every value they compute (and of its inputs, at the ``top``), by one vjp with a zero added to each
    output (compiled as one program: a jaxpr's equations bound one by one would each be compiled);
    then each custom call's inner block, seeded with the cotangents of the call's outputs."""
    moving = [i for i in dict.fromkeys(block.inputs)  # (inside a rule: every floating input)
              if (trace.values[i].differentiable if top else _floating(trace.values[i].dtype))]  # fmt: skip
    computed = [o for k in block.steps for o in trace.equations[k].outputs]
    used = {i for k in block.steps for i in trace.equations[k].inputs} | set(block.outputs)
    fixed = {i: operand(trace.values[i]) for i in used.difference(moving, computed)}

    def run(given: dict[int, Any], xs: list[Any], eps: dict[int, Any]) -> tuple[list[Any], dict[int, Any]]:
        env = {**given, **dict(zip(moving, xs))}
        outs = _run(trace, block, env, eps)
        return outs, {o: env[o] for o in computed}

    xs = [trace.values[i].value for i in moving]
    found = None if seeds is None else _pullback(trace, block, run, (fixed, xs), computed, seeds, top)
    values = _compiled(block, lambda given, xs: run(given, xs, {})[1])(fixed, xs) if found is None else found[0]
    _store(trace, values, moving, found, top)
    for k, inner in block.inner.items():
        if inner.call is not None:
            _evaluate_loop(trace, k, inner)
            continue
        grads = [trace.values[o].cotangent for o in trace.equations[k].outputs]
        _evaluate(trace, inner, grads if any(g is not None for g in grads) else None, top=False)
    for k, branches in block.branches.items():
        _evaluate_branch(trace, k, branches)


def _evaluate_loop(trace: JaxTrace, index: int, body: _Block) -> None:
    """A loop's body evaluated at its first iteration (its inputs and, where there are cotangents, its
    outputs' from ``jax_loops``), with each iteration's norms and the trip count on its call."""
    equation, call = trace.equations[index], trace.calls[body.call]  # type: ignore[index]
    values = [operand(trace.values[i]) for i in equation.inputs]
    grads = [trace.values[o].cotangent for o in equation.outputs]
    try:
        if equation.primitive == "scan":
            run = scan_run(equation.eqn, values, grads if any(g is not None for g in grads) else None)
        else:
            run = while_run(equation.eqn, values)
    except Exception as failed:  # (a body JAX cannot run apart): the box without values
        trace.notes.append(f"the body of {call.scope} is drawn without its values: {_first_line(failed)}")
        return
    call.repeat, call.norms, call.stats, call.grads = run.count, run.norms, run.stats, run.grads
    if run.note:
        trace.notes.append(f"{call.scope}: {run.note}")
    if not run.count:
        trace.notes.append(f"the body of {call.scope} never ran: it is drawn without values")
        return
    call.iteration = 1
    outer = equation.inputs[len(equation.inputs) - len(body.inputs) :]  # (a while's cond consts left out)
    for i, source, value in zip(body.inputs, outer, run.first):
        made = trace.values[i]
        if made.kind in ("carry", "slice"):
            made.value = np.asarray(value)
            given = trace.values[source].cotangent
            if given is not None:
                first = len(given) - 1 if equation.eqn.params.get("reverse") else 0
                made.cotangent = np.asarray(given if made.kind == "carry" else given[first])
    _evaluate(trace, body, run.seeds, top=False)


def _evaluate_branch(trace: JaxTrace, index: int, branches: list[_Block]) -> None:
    """The branch a cond took evaluated (seeded with the cond's outputs' cotangents), the others hidden."""
    equation = trace.equations[index]
    taken = cond_branch([trace.values[equation.inputs[0]].value], len(branches))
    trace.calls[branches[taken].call].branch = (taken, len(branches))  # type: ignore[index]
    for k, branch in enumerate(branches):
        for hidden in trace.equations[branch.span[0] : branch.span[1]] if k != taken else ():
            hidden.shown = False
    grads = [trace.values[o].cotangent for o in equation.outputs]
    _evaluate(trace, branches[taken], grads if any(g is not None for g in grads) else None, top=False)


#: equations from which a block is compiled as one program: below, bound one by one (each primitive's
#: kernel is compiled once and kept, where compiling a small program costs more than running it)
COMPILED_FROM = 24


def _compiled(block: _Block, function: Callable[..., Any]) -> Callable[..., Any]:
    return jax.jit(function) if len(block.steps) >= COMPILED_FROM else function


def _store(trace: JaxTrace, values: dict[int, Any], moving: list[int], found: Any, top: bool) -> None:
    """The values a block computed, and with ``found`` (``_pullback``'s) the cotangents."""
    for o, value in values.items():
        trace.values[o].value, trace.values[o].key = host(value)
    if found is not None:
        trace.has_cotangents = trace.has_cotangents or top
        for i, g in zip(moving, found[1]) if top else ():
            trace.values[i].cotangent = np.asarray(g)
        for o, g in found[2].items():
            trace.values[o].cotangent = np.asarray(g)


def _pullback(trace: JaxTrace, block: _Block, run: Callable[..., Any], args: tuple[Any, Any], computed: list[int],
              seeds: list[Any], top: bool) -> tuple[dict[int, Any], list[Any], dict[int, Any]] | None:  # fmt: skip
    """One vjp of ``run`` with a zero added to each floating value it computes: the values, the
    inputs' cotangents and each value's; None (a note at the ``top``) where JAX cannot differentiate."""
    floating = [o for o in computed if trace.values[o].differentiable]
    zeros = {o: np.zeros(trace.values[o].shape, trace.values[o].dtype) for o in floating}

    def both(given: dict[int, Any], xs: list[Any], eps: dict[int, Any], cotangents: list[Any]) -> Any:
        outs, pullback, values = jax.vjp(lambda xs, eps: run(given, xs, eps), xs, eps, has_aux=True)
        return values, *pullback([jnp.zeros_like(o) if g is None else g for o, g in zip(outs, cotangents)])

    try:
        return _compiled(block, both)(*args, zeros, seeds)
    except Exception as failed:  # (a while loop, a primitive without a transpose): values alone
        if top:
            trace.notes.append(f"no gradients: JAX cannot differentiate this function: {_first_line(failed)}")
        return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def local_derivatives(trace: JaxTrace, index: int) -> list[np.ndarray | None]:
    """d output / d each input of equation ``index`` (one output), from ``jax.vjp`` of that equation
    alone with cotangent 1 (None for an input that is not floating, or where JAX cannot say)."""
    equation = trace.equations[index]
    values = [operand(trace.values[i]) for i in equation.inputs]
    moving = [k for k, i in enumerate(equation.inputs) if _floating(trace.values[i].dtype)]
    out = trace.values[equation.outputs[0]]
    if len(equation.outputs) != 1 or not moving or not _floating(out.dtype) or out.value is None:
        return [None] * len(values)

    def alone(*xs: Any) -> Any:
        given = list(values)
        for k, x in zip(moving, xs):
            given[k] = x
        return bind(equation.eqn, given)[0]

    try:
        _, pullback = jax.vjp(alone, *[values[k] for k in moving])
        found = pullback(np.ones(out.shape, out.dtype))
    except Exception:  # (a primitive JAX cannot differentiate here: the edge stays unlabelled)
        return [None] * len(values)
    grads: list[np.ndarray | None] = [None] * len(values)
    for k, g in zip(moving, found):
        grads[k] = np.asarray(g)
    return grads
