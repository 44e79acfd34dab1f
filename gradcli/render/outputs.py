"""What a model returned, as the tensors its graph is drawn from.

A tensor is drawn as it is; a tuple, list or dict, each of its tensors (``None`` left out: attention
weights not asked for). A model's output object, Hugging Face's ``ModelOutput`` (a dict and a
dataclass), a dataclass or a named tuple of one's own, is drawn from its ``loss`` (else its
``logits``) alone, with a note naming what was left out and how to draw it: a language model's
cache (``past_key_values``) holds the keys and values of every layer, tensors inside the graph that
are not outputs one differentiates. An object of another kind (a ``DynamicCache`` passed alone) is
walked through its attributes for the tensors it holds; a module or a function in an output is
left out with a note naming it (its parameters are not outputs).

Framework-free: the caller says what a tensor is (``is_tensor``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import UsageError
from .model import first_four

#: the fields a model's output is drawn from, the first one holding a tensor
DRAWN = ("loss", "logits")
#: how deep an object's attributes are walked for tensors (a cache's layers' keys are at depth 3)
DEEPEST = 6
_PLAIN = (str, bytes, int, float, complex, bool, type(Ellipsis))


def output_tensors(value: Any, is_tensor: Callable[[Any], bool]) -> tuple[list[Any], list[str]]:
    """The tensors ``value`` (what a model or a function returned) is drawn from, and the notes on
    what was left out; none at all: a usage error naming what was given."""
    notes: list[str] = []
    found = _walk(value, is_tensor, notes, set(), 0)
    if not found:
        what = "None" if value is None else type(value).__name__
        raise UsageError(f"a graph of PyTorch tensors: got {what}, which holds no tensor to draw")
    return list({id(t): t for t in found}.values()), notes


def holds_torch(value: Any) -> bool:
    """Does ``value`` (not a tensor: a model's output object, a dict) hold a torch tensor? False
    without torch imported (then nothing holds one)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    return bool(_walk(value, lambda v: isinstance(v, torch.Tensor), [], set(), 0))


def _walk(value: Any, is_tensor: Callable[[Any], bool], notes: list[str], seen: set[int], depth: int) -> list[Any]:
    if is_tensor(value):
        return [value]
    if value is None or isinstance(value, _PLAIN) or id(value) in seen:
        return []
    seen.add(id(value))
    if type(value) in (list, tuple, dict, set, frozenset):  # (plain containers: every tensor in them)
        items = value.values() if isinstance(value, dict) else value
        return [t for v in items for t in _walk(v, is_tensor, notes, seen, depth + 1)]
    parts = _parts(value, depth)
    if parts is None:  # (a device or a dtype holds no tensor: passed over without a word)
        if callable(value) and hasattr(value, "__dict__") and not isinstance(value, type):
            notes.append(f"left out {type(value).__name__}: a module or a function; its tensors are not outputs")
        return []
    drawn = _drawn(value, parts, is_tensor, notes)
    if drawn is not None:
        return [drawn]
    return [t for _, v in parts for t in _walk(v, is_tensor, notes, seen, depth + 1)]


def _parts(value: Any, depth: int) -> list[tuple[str, Any]] | None:
    """A container's named parts: a mapping's items, a named tuple's or a dataclass's fields, an
    object's attributes; None for what is not walked (a function, an ``nn.Module``, too deep)."""
    if isinstance(value, Mapping):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return list(zip(value._fields, value))
    if isinstance(value, (list, tuple, set, frozenset)):
        return [(str(k), v) for k, v in enumerate(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    if callable(value) or depth >= DEEPEST or not hasattr(value, "__dict__"):
        return None
    return [(k, v) for k, v in vars(value).items() if not k.startswith("__")]


def _drawn(value: Any, parts: list[tuple[str, Any]], is_tensor: Callable[[Any], bool], notes: list[str]) -> Any:
    """A model's output object's ``loss`` (else ``logits``), with a note naming the parts left out;
    None for any other object (all its tensors drawn)."""
    named = dict(parts)
    field = next((f for f in DRAWN if is_tensor(named.get(f))), None)
    if field is None:
        return None
    left = [name for name, v in parts if name != field and v is not None and not isinstance(v, _PLAIN)]
    if left:
        kind = type(value).__name__
        notes.append(
            f"drawn from {kind}.{field}; left out {first_four(left)}: "
            f"gc.render.graph(out.{left[0]}) draws {'it' if len(left) == 1 else 'one of them'}"
        )
    return named[field]
