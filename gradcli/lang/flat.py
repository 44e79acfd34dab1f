"""The flat road: a long scalar expression read into a tape and differentiated without a graph.

``gradcli eval "<100,000 terms>" --at x=0.5`` spent microseconds a node in each of four layers: the
token objects, the syntax tree, the recorded graph (a tensor and a node an operation) and the
engine's walk back over it. For the commonest large input, ONE expression of numbers, variables,
``+ - * / ^``, signs and one-argument elementwise functions, at a point where every variable is
one float64 number, this module does the same arithmetic on a flat tape instead:

- ``compile_flat`` reads the text with one regular expression and a Pratt loop that writes
  postfix code (no token or tree objects). Anything outside that subset, or any text the full
  parser would refuse, gives ``None``: the full parser then reads it (and says what is wrong).
- ``FlatProgram.value_and_grad`` runs the code forward with the primitives' own forward functions
  on the same values the graph would hold, then backward in reverse with the primitives' own
  rules, adding the contributions to each variable in the order the engine adds them. The
  numbers are the graph's, bit for bit (tests/test_parse21_flat.py compares both roads).

Whenever the graph road would have more to say, the flat road steps aside: a value that is not
finite (the graph road names the operation that made it), a variable that is not a float64
number, a seed, grad mode off, anomaly mode.
"""

from __future__ import annotations

import gc as _gc
import math
import re
from _thread import RLock
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..autograd.grad_mode import state
from ..memory import max_elements
from ..ops.operators import INFIX, PREFIX, PREFIX_POWER
from .functions import CONSTANTS, FUNCTIONS
from .library import gc

#: One capture a token (the lexer's number and name patterns, ASCII only); what lies between the
#: captures must be spaces or tabs, or the text is not for this road.
_PIECES = re.compile(r"((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*|\*\*|[-+*/^(),])")
#: Binding powers, as the operator table gives them (checked against it when the tables are built).
_BINARY = {"+": 30, "-": 30, "*": 40, "/": 40, "^": 60, "**": 60}
_SIGN_POWER = 50
_MAX_DEPTH = 100  # below the full parser's 200: text nested deeper goes to the full parser
_INF = float("inf")

# opcodes
_NUMBER, _VARIABLE, _NEG, _CALL, _BIN = range(5)

_tables: dict[str, Any] | None = None  # built on first use, once, by whichever thread comes first
_BUILDING = RLock()


def _build_tables() -> dict[str, Any]:
    """The functions and operators the flat road handles, from the same tables the graph road reads."""

    assert PREFIX_POWER == _SIGN_POWER and all(INFIX[s].power == p for s, p in _BINARY.items())
    functions = {}
    for name, f in FUNCTIONS.items():
        prim = f.primitive
        if (
            prim is not None
            and f.arities == (1,)
            and prim.arity == 1
            and prim.elementwise
            and prim.nparams == 0
            and prim.public
            and prim.saves != "meta"
            and name == prim.name
            and name not in _SPECIAL
        ):
            functions[name] = prim
    specs = {s: _binary_spec(INFIX[s].primitive, INFIX[s].fold) for s in _BINARY}
    # (power, the power at which a stacked operator pops, code): "^" is right-associative,
    # a^b^c is a^(b^c), so it pops only what binds tighter than itself
    entries = {s: (p, p + 1 if INFIX[s].right else p, (_BIN, specs[s])) for s, p in _BINARY.items()}
    # the replay evaluates complex points through a row's continuation where it has one (norm's);
    # at_points calls the forward functions, so no row of this road may have one
    rows = [*functions.values(), *(INFIX[s].primitive for s in _BINARY), PREFIX["-"].primitive]
    assert all(p.continuation is None for p in rows), "a flat row with a complex continuation"
    return {
        "entries": entries,
        "functions": {name: _unary_spec(prim) for name, prim in functions.items()},
        "names": frozenset(FUNCTIONS),
        "constants": CONSTANTS,
        "specs": specs,
        "neg_spec": _unary_spec(PREFIX["-"].primitive),
    }


def _saves(prim: Any) -> tuple[bool, bool]:
    """Whether the graph's node keeps the output, and the inputs, for the rules (as record.py decides)."""
    return prim.saves in ("output", "both"), prim.saves in ("inputs", "both")


def _unary_spec(prim: Any) -> tuple[Any, ...]:
    keeps_out, keeps_in = _saves(prim)
    return (prim.forward, prim.vjp[0], keeps_out, keeps_in)


def _binary_spec(prim: Any, fold: Any) -> tuple[Any, ...]:
    keeps_out, keeps_in = _saves(prim)
    return (prim.forward, _passes(prim.vjp[0]), _passes(prim.vjp[1]), keeps_out, keeps_in, fold)


class _Probe:
    pass


def _passes(rule: Any) -> Any:
    """``PASS`` for a rule that hands its gradient on unchanged (``+``'s): the tape skips the call."""
    if rule is None:
        return None
    probe = _Probe()
    try:
        same = rule(probe, None, None, None) is probe
    except Exception:  # a rule that computes: it is called
        same = False
    return PASS if same else rule


def _UNARY(g: Any, out: Any, x: Any) -> Any:  # noqa: N802 - marks a one-input entry of the tape
    raise AssertionError("a marker")


def PASS(g: Any, out: Any, a: Any, b: Any) -> Any:  # noqa: N802 - a marker, compared by identity
    return g


#: Functions whose library form does more than ``unary(prim, as_tensor(x))``: the graph road only.
_SPECIAL = frozenset()


def tables() -> dict[str, Any]:
    global _tables
    found = _tables
    if found is None:
        with _BUILDING:
            if _tables is None:
                _tables = _build_tables()
            found = _tables
    return found


class FlatProgram:
    """One expression as postfix code: ``(opcode, argument)`` pairs."""

    __slots__ = ("code", "text", "names", "span")

    def __init__(self, code: list[tuple[int, Any]], text: str, names: list[str], span: tuple[int, int]) -> None:
        self.code = code
        self.text = text
        self.names = names  # the names read as values, in order of first appearance
        self.span = span

    def free_variables(self, given: Sequence[str] | Mapping[str, Any] = ()) -> list[str]:
        """As ``evaluate.free_variables``: constants excluded unless given a value."""
        constants = tables()["constants"]
        return [n for n in self.names if n not in constants or n in given]

    def value_and_grad(self, values: Mapping[str, Any], names: Sequence[str]) -> Any:
        """``(value, {name: gradient or None}, inputs)`` as the graph road computes them, or ``None``
        when the graph road must run (see the module's doc)."""
        return _run(self, values, names)

    def at_points(self, values: Mapping[str, Any]) -> Any:
        """The value at a batch of points: ``values`` maps each name to a float64 number or to a 1-d
        array of points (complex for the complex step), all arrays of one length. The same forward
        functions on the same operands as the recorded graph's replay (autograd/replay.py), so the
        same numbers, without a node an operation. ``None`` where this road does not apply: a value
        of another kind."""
        t = tables()
        raw: dict[str, Any] = {}
        for name, value in values.items():
            if value.__class__ is np.ndarray and value.ndim == 1 and value.dtype in _POINT_TYPES:
                pass
            elif np.asarray(value).dtype != np.float64 or np.ndim(value) != 0:
                return None
            raw[name] = value
        if any(name not in raw and name not in t["constants"] for name in self.names):
            return None
        with np.errstate(all="ignore"):
            return _forward_points(self.code, t, raw)


def compile_flat(text: str) -> FlatProgram | None:
    """``text`` as a flat program, or ``None`` when it is not one (or is not valid: the full parser says why)."""
    if len(text) < MIN_CHARACTERS:  # a short expression gains nothing: the graph road, with all it can show
        return None
    core = text.strip(_BLANK)  # blank lines around the one expression (a file's last new line) say nothing
    pieces = _PIECES.split(core)  # [gap, token, gap, token, ..., gap]: the scanning happens in C
    if "".join(pieces[::2]).strip(_GAP):
        return None  # a character the tokens do not cover: new lines within, comments, "[", ".T", "<"...
    collecting = _gc.isenabled()
    _gc.disable()
    try:
        found = _read(pieces[1::2], tables())
    finally:
        if collecting:
            _gc.enable()
    if found is None:
        return None
    code, seen = found
    start = len(text) - len(text.lstrip(_BLANK))
    return FlatProgram(code, text, list(seen), (start, start + len(core)))


_GAP = " \t\r\f\v"  # what the lexer skips between tokens (lexer.py)
_BLANK = _GAP + "\n"

#: Below this length the graph road runs (it records every step: the graph, the tree, the names).
MIN_CHARACTERS = 2_000

_DIGITS = frozenset("0123456789.")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_OPEN = -1  # on the operator stack: "(" and a function's "(" never pop for an operator


def _read(tokens: list[str], t: dict[str, Any]) -> Any:
    """The operator-precedence loop (parser.py's precedences and associativity) writing postfix code,
    with the full parser's checks as refusals: ``(code, names seen)`` or ``None``.

    Every frame of the full parser's recursion has an entry on this loop's operator stack, so a
    stack no deeper than ``_MAX_DEPTH`` is text the full parser reads within its own limit."""
    function_names = t["names"]
    code: list[tuple[int, Any]] = []
    append = code.append
    powers: list[int] = []  # the operator stack: each entry's binding power ...
    entries: list[Any] = []  # ... and the code it writes when popped (None: nothing, "+x")
    push_power, push_entry, pop_power, pop_entry = powers.append, entries.append, powers.pop, entries.pop
    seen: dict[str, None] = {}
    operands: dict[str, tuple[int, Any]] = {}  # each variable's and number's code, made once
    operators = t["entries"]  # each binary operator's (power, code)
    deepest = _MAX_DEPTH
    operand = True  # a value is expected next
    n = len(tokens)
    i = 0
    while i < n:
        token = tokens[i]
        i += 1
        if operand:
            entry = operands.get(token)
            if entry is not None:  # "x(" is refused at "(", where an operator is expected
                append(entry)
                operand = False
                continue
            first = token[0]
            if first in _LETTERS and (i == n or tokens[i] != "("):
                if token in function_names or token == "if" or token == "else":
                    return None  # a function without its parentheses, a keyword
                seen[token] = None
                entry = operands[token] = (_VARIABLE, token)
                append(entry)
                operand = False
            elif first in _DIGITS:
                number = float(token)
                if number == _INF:  # 1e999: the full parser refuses it, with a caret
                    return None
                entry = operands[token] = (_NUMBER, number)
                append(entry)
                operand = False
            else:  # a sign, a bracket or a function's name and bracket
                i = _open(token, i, t, powers, entries)
                if i < 0:
                    return None
        else:
            found = operators.get(token)
            if found is not None:
                power, stop, entry = found
                while powers and powers[-1] >= stop:
                    pop_power()
                    popped = pop_entry()
                    if popped is not None:
                        append(popped)
                push_power(power)
                push_entry(entry)
                operand = True
                if len(powers) > deepest:
                    return None
            elif token != ")" or not _close(powers, entries, append):
                return None  # "x y", "2(", "x(", ",", an unmatched ")": the full parser says what is wrong
    if operand or not _close(powers, entries, append, last=True):
        return None
    return code, seen


def _open(token: str, i: int, t: dict[str, Any], powers: list[int], entries: list[Any]) -> int:
    """A sign, "(" or a function's "name(" where a value starts: stacked; the next token's index, or -1."""
    if token[0] in _LETTERS:  # followed by "(" (its caller looked)
        spec = t["functions"].get(token)
        if spec is None:
            return -1
        powers.append(_OPEN)
        entries.append((_CALL, spec))
        i += 1
    elif token == "-":
        powers.append(_SIGN_POWER)
        entries.append((_NEG, t["neg_spec"]))
    elif token == "+":
        powers.append(_SIGN_POWER)
        entries.append(None)
    elif token == "(":
        powers.append(_OPEN)
        entries.append(None)
    else:
        return -1
    return i if len(powers) <= _MAX_DEPTH else -1


def _close(powers: list[int], entries: list[Any], append: Any, last: bool = False) -> bool:
    """At ")": the operators down to its bracket written out, and the call if a function's; at the
    end (``last``), every operator, with no bracket left open. False when the brackets do not match."""
    while powers and powers[-1] >= 0:
        powers.pop()
        entry = entries.pop()
        if entry is not None:
            append(entry)
    if last:
        return not powers
    if not powers:
        return False
    powers.pop()
    entry = entries.pop()
    if entry is not None:  # a function's bracket: the call
        append(entry)
    return True


def _run(program: FlatProgram, values: Mapping[str, Any], names: Sequence[str]) -> Any:
    max_elements()  # its errors are said on this road as on the other
    # complex or in-place tensors elsewhere in the process change nothing here: every value on the
    # tape is a new real float64 number, which the graph's nodes also differentiate by the plain rules
    if not state.enabled or state.anomaly is not None or not set(names) <= set(values):
        return None
    t = tables()
    constants = t["constants"]
    wrt = set(names)
    inputs: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    slot_of: dict[str, int] = {}
    for name, value in values.items():
        tensor = value if isinstance(value, gc.Tensor) else gc.tensor(value)
        if tensor.requires_grad:
            return None  # a tensor of an outer computation: the graph road links to it
        v = tensor.array
        if v.__class__ is not np.float64:
            return None
        if name in wrt:
            tensor.requires_grad_(True)
            slot_of[name] = len(slot_of)
        tensor.name = name
        inputs[name] = tensor
        raw[name] = v
    for name in program.names:
        if name not in raw and name not in constants:
            return None  # an unknown name: the graph road says which
    collecting = _gc.isenabled()
    _gc.disable()  # the tape makes no cycles; collections would rescan it as it grows
    try:
        with np.errstate(all="ignore"):
            found = _forward_backward(program.code, t, raw, slot_of)
    finally:
        if collecting:
            _gc.enable()
    if found is None:
        return None
    value, kind, grads = found
    return value, kind, {n: grads[slot_of[n]] for n in names}, inputs


_NUMBER_SLOT = -2  # a Python number: folds as IEEE float64 arithmetic, as the tree's numbers do
_CONSTANT_SLOT = -1  # a tensor that needs no gradient


def _forward_backward(code: list[tuple[int, Any]], t: dict[str, Any], raw: dict[str, Any], slot_of: dict[str, int]):
    """Forward over the code, then backward over the tape it left: ``(value, differentiable, grads)``."""
    found = _forward(code, t, raw, slot_of)
    if found is None:
        return None
    value, slot, tape, n_slots = found
    grads: list[Any] = [None] * n_slots
    if slot < 0:
        return value, False, grads
    grads[slot] = np.ones_like(value)
    if not _backward(tape, grads, len(slot_of)):
        return None
    return value, True, grads


def _forward(code: list[tuple[int, Any]], t: dict[str, Any], raw: dict[str, Any], slot_of: dict[str, int]):
    """The values, on a stack; ``(value, its slot, tape, number of slots)``, or None at a value that is not finite.

    Each value has a slot: ``_NUMBER_SLOT``, ``_CONSTANT_SLOT``, or k >= 0 for the k-th value that
    requires grad (the variables first). The tape holds, per operation that requires grad, its
    rules, what its node would save, its inputs' slots and its own."""
    constants = t["constants"]
    values: list[Any] = []
    slots: list[int] = []
    push_value, push_slot, pop_value, pop_slot = values.append, slots.append, values.pop, slots.pop
    tape: list[tuple[Any, ...]] = []
    record = tape.append
    n_slots = len(slot_of)
    f64 = np.float64
    finite = math.isfinite
    number, constant = _NUMBER_SLOT, _CONSTANT_SLOT
    binary_op, variable_op, number_op = _BIN, _VARIABLE, _NUMBER
    for opcode, arg in code:
        if opcode == binary_op:
            b = pop_value()
            sb = pop_slot()
            a = values[-1]
            sa = slots[-1]
            forward, rule_a, rule_b, keeps_out, keeps_in, fold = arg
            if sa == number and sb == number:
                out = float(fold(f64(a), f64(b)))
            else:
                out = forward(a, b)
                if sa < 0:
                    rule_a = None
                if sb < 0:
                    rule_b = None
                if rule_a is not None or rule_b is not None:
                    if keeps_in:
                        record((rule_a, rule_b, out if keeps_out else None, a, b, sa, sb, n_slots))
                    else:
                        record((rule_a, rule_b, out if keeps_out else None, None, None, sa, sb, n_slots))
                    slots[-1] = n_slots
                    n_slots += 1
                else:
                    slots[-1] = constant
            values[-1] = out
        elif opcode == variable_op:
            if arg in raw:
                push_value(raw[arg])
                push_slot(slot_of.get(arg, constant))
            else:
                push_value(constants[arg])
                push_slot(number)
            continue
        elif opcode == number_op:
            push_value(arg)
            push_slot(number)
            continue
        else:  # a function, or a minus sign
            out, slots[-1], n_slots = _unary(opcode, arg, values[-1], slots[-1], record, n_slots)
            values[-1] = out
        if not finite(out):
            return None  # a NaN or an infinity: the graph road names where it appeared
    (value,) = values
    (slot,) = slots
    return value, slot, tape, n_slots


_POINT_TYPES = (np.dtype(np.float64), np.dtype(np.complex128))  # check's points: real, and the complex step's


def _forward_points(code: list[tuple[int, Any]], t: dict[str, Any], raw: dict[str, Any]) -> Any:
    """``_forward`` without a tape, its variables arrays of points: numbers fold as they do there
    (and as the syntax tree's), everything else goes through the rows' forward functions."""
    constants = t["constants"]
    values: list[Any] = []
    numbers: list[bool] = []  # which values are Python numbers (folded, never batched)
    f64 = np.float64
    for opcode, arg in code:
        if opcode == _BIN:
            b = values.pop()
            b_number = numbers.pop()
            if numbers[-1] and b_number:
                values[-1] = float(arg[5](f64(values[-1]), f64(b)))
            else:
                values[-1] = arg[0](values[-1], b)
                numbers[-1] = False
        elif opcode == _VARIABLE:
            if arg in raw:
                values.append(raw[arg])
                numbers.append(False)
            else:
                values.append(constants[arg])
                numbers.append(True)
        elif opcode == _NUMBER:
            values.append(arg)
            numbers.append(True)
        elif numbers[-1] and opcode == _NEG:
            values[-1] = -values[-1]  # a number's sign: Python's, as the tree's
        else:
            x = values[-1]
            if numbers[-1]:
                x = gc.as_tensor(x).array  # a number: the library makes it a tensor first
                numbers[-1] = False
            values[-1] = arg[0](x)
    return values[0]


def _unary(opcode: int, spec: Any, x: Any, sx: int, record: Any, n_slots: int) -> tuple[Any, int, int]:
    """``f(x)`` or ``-x``: ``(value, its slot, number of slots)``, the tape entry recorded if it requires grad."""
    if sx == _NUMBER_SLOT:
        if opcode == _NEG:
            return -x, _NUMBER_SLOT, n_slots  # a number's sign: Python's, as the tree's

        x = gc.as_tensor(x).array  # a number: the library makes it a tensor first
        sx = _CONSTANT_SLOT
    forward, rule, keeps_out, keeps_in = spec
    out = forward(x)
    if sx < 0 or rule is None:
        return out, _CONSTANT_SLOT, n_slots
    record((rule, _UNARY, out if keeps_out else None, x if keeps_in else None, None, sx, 0, n_slots))
    return out, n_slots, n_slots + 1


def _backward(tape: list[tuple[Any, ...]], grads: list[Any], n_variables: int) -> bool:
    """The tape in reverse, each contribution added where the engine adds it, in its order (a node's
    inputs in order, the nodes last made first); False when a gradient is not finite."""
    passes, unary = PASS, _UNARY
    for rule_a, rule_b, out, a, b, sa, sb, so in reversed(tape):
        g = grads[so]
        if g is None:
            continue  # its consumer passes no gradient on (a rule that is None)
        grads[so] = None
        if rule_b is unary:
            ga = rule_a(g, out, a)
            prev = grads[sa]
            grads[sa] = ga if prev is None else prev + ga
            continue
        if rule_a is not None:
            ga = g if rule_a is passes else rule_a(g, out, a, b)
            prev = grads[sa]
            grads[sa] = ga if prev is None else prev + ga
        if rule_b is not None:
            gb = g if rule_b is passes else rule_b(g, out, a, b)
            prev = grads[sb]
            grads[sb] = gb if prev is None else prev + gb
    # the graph road's anomaly check names the operation that gave a NaN or an infinity
    finite = math.isfinite
    return all(g is None or finite(g) for g in grads[:n_variables])
