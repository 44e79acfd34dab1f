"""Record classes written by hand: the tables' rows and the results of a run.

A dataclass writes its ``__init__``, ``__repr__`` and ``__eq__`` as source text and compiles it
with ``exec`` when the class is defined: about 1 ms a class on this project's machine, 11 ms of
every ``gradcli eval`` for the nine records a plain evaluation loads. These classes spell the
same thing as ordinary methods, compiled once into bytecode. Each record names its fields in
``_fields`` (and an ``__init__`` with the same parameters in that order) and fills them with
``fill(self, locals())``.
"""

from __future__ import annotations

from typing import Any

_set = object.__setattr__


def fill(record: Any, values: dict[str, Any]) -> None:
    """Set each of ``record``'s fields from ``values`` (the ``__init__``'s ``locals()``)."""
    for name in record._fields:
        _set(record, name, values[name])


class Record:
    """Fields listed in ``_fields``; shown as ``Name(field=value, ...)``; equal when of the same
    class with equal fields (a dataclass's defaults)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  (mutable: as a dataclass with eq)


class Frozen(Record):
    """A record whose fields cannot be assigned after ``__init__``; hashed by its fields."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, ...]:  # pickle and copy: through __init__, not assignment
        return (type(self), self._values())

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        values = dict(zip(self._fields, self._values()))
        values.update(changes)
        return type(self)(**values)


class Row(Frozen):
    """A frozen table row compared by identity (a dataclass with ``eq=False``): rows hold
    functions, and each row is declared once."""

    __slots__ = ()
    __eq__ = object.__eq__
    __hash__ = object.__hash__
