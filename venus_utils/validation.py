"""Type and range checks for settings, so that a bad value fails in seconds with a message naming its key.

Two sources of truth are used, never a third copy:

- a notebook's ``parameters`` cell: its default tells the type a profile or ``--set`` value must have
  (:func:`check_like_default`);
- a config dataclass (``SFTConfig``, ``IGPOConfig``): its annotations tell the types and its ``RANGES`` the allowed
  values (:func:`check_fields`), checked in ``__post_init__`` before anything heavy starts.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """Allowed numbers: ``low`` <= x <= ``high`` (``low_open``: ``low`` < x), or one of ``also``; None allowed
    wherever the field's annotation allows it."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    also: tuple = ()

    def ok(self, x: float) -> bool:
        if x in self.also:
            return True
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return self.high is None or x <= self.high

    def describe(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"<= {self.high:g}")
        text = " and ".join(parts) or "any number"
        return text + "".join(f" or {a}" for a in self.also)


POSITIVE = Range(0, low_open=True)
AT_LEAST_1 = Range(1)
NON_NEGATIVE = Range(0)
FRACTION = Range(0, 1)


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def matches(value: Any, tp: Any) -> bool:
    """Whether ``value`` fits the annotation ``tp`` (int, float, str, bool, None, unions, tuple/list, dict, Any)."""
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, arg) for arg in typing.get_args(tp))
    if tp is type(None) or tp is None:
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return _is_number(value)
    if origin in (tuple, list) or tp in (tuple, list):
        return isinstance(value, (tuple, list))
    if origin is dict or tp is dict:
        return isinstance(value, dict)
    return isinstance(value, tp) if isinstance(tp, type) else True


def check_fields(obj: Any, ranges: dict[str, Range], where: str) -> None:
    """Check every field of the dataclass instance ``obj`` against its annotation and ``ranges``; raise
    ``ValueError`` naming ``where.field``, the value and what is expected."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        tp = hints.get(f.name, Any)
        if not matches(value, tp):
            expected = str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")
            raise ValueError(f"{where}.{f.name}={value!r}: expected {expected}, got {type_name(value)}")
        rng = ranges.get(f.name)
        if rng is not None and value is not None and not rng.ok(value):
            raise ValueError(f"{where}.{f.name}={value!r}: must be {rng.describe()}")


def check_like_default(key: str, value: Any, default: Any) -> str | None:
    """Why ``value`` cannot replace a parameter whose notebook default is ``default`` (None when it can).

    The default's type is the parameter's type; null is allowed everywhere (the stage's config says where it is
    not), and a parameter whose default is null takes any value."""
    if value is None or default is None:
        return None
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = _is_number(value)
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, (list, tuple))
    else:
        ok = isinstance(value, type(default))
    if ok:
        return None
    return f"'{key}' must be {type_name(default)} like its default {default!r}, got {type_name(value)} {value!r}"


def parameter_values(namespace: dict[str, Any], names: set[str] | frozenset[str]) -> dict[str, Any]:
    """The entries of ``namespace`` (a notebook's ``globals()``, or a CLI's parameters) that are settings ``names``
    and hold parameter values (literals: numbers, strings, booleans, None, lists, tuples, dicts), so that a module
    or function imported under a setting's name is never taken for it."""
    literal = (str, int, float, bool, type(None), list, tuple, dict)
    return {k: v for k, v in namespace.items() if k in names and isinstance(v, literal)}
