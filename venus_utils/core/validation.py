"""Type and range checks for settings, so that a bad value fails in seconds with a message naming its key.

Two sources of truth are used, never a third copy:

- a notebook's ``parameters`` cell: its default tells the type a profile or ``--set`` value must have
  (:func:`check_like_default`);
- a config dataclass (``SFTConfig``, ``IGPOConfig``, ``WorldConfig``): each setting's record is its field (annotation,
  default, and in its metadata ``help``, ``range``, ``choices`` and, for RL, ``trl``, the name TRL's config gives it),
  checked in ``__post_init__`` before anything heavy starts (:func:`check_fields`, :func:`field_limits`).

The parameters that no config class holds are described by :class:`Setting` (``venus_utils.run.schemas.PARAMETERS``).
A number is always finite: ``.nan``, ``.inf`` and ``1.0e+400`` (which YAML reads as infinity) are refused everywhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import reprlib
import types
import typing
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, fields
from typing import Any

#: How much of a refused value a message quotes (:func:`quote`): a value of millions of items, or one nested deep, is
#: named by a short prefix, never echoed whole.
QUOTE_CHARS = 120
_QUOTER = reprlib.Repr()
_QUOTER.maxlevel, _QUOTER.maxlist, _QUOTER.maxtuple, _QUOTER.maxdict, _QUOTER.maxset = 3, 6, 6, 4, 6
_QUOTER.maxstring, _QUOTER.maxlong, _QUOTER.maxother = 60, 40, 60


def described(value: Any) -> str:
    """A value for a message with its type: ``str '0.5'``, ``list [0.1, 0.2]``, ``None`` (:func:`quote`)."""
    return "None" if value is None else f"{type(value).__name__} {quote(value)}"


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` for a message, at most ``limit`` characters: the first items of a long list, the start of a
    long string, ``...`` for the rest (``reprlib``: the cost does not grow with the value's size)."""
    text = _QUOTER.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Range:
    """Allowed numbers: ``low`` <= x <= ``high`` (``low_open``: ``low`` < x; ``high_open``: x < ``high``), or one of
    ``also``; None allowed wherever the field's annotation allows it.  NaN is in no range."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    also: tuple = ()
    high_open: bool = False

    def ok(self, x: float) -> bool:
        if x in self.also:
            return True
        if x != x:  # NaN compares false with everything
            return False
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return self.high is None or (x < self.high if self.high_open else x <= self.high)

    def describe(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {_number(self.low)}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {_number(self.high)}")
        text = " and ".join(parts) or "any number"
        return text + "".join(f" or {a}" for a in self.also)


def _number(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


POSITIVE = Range(0, low_open=True)
AT_LEAST_1 = Range(1)
NON_NEGATIVE = Range(0)
FRACTION = Range(0, 1)
#: A share that cannot be the whole: 0 <= x < 1.
PROPER_FRACTION = Range(0, 1, high_open=True)
#: Seeds: what every generator of the project takes (numpy's and torch's take up to 2**64 - 1, Python's ``hash`` of a
#: seed string anything; a signed 64-bit integer is what all of them, and a JSON reader, keep exactly).
SEED = Range(0, 2**63 - 1)
#: Where models run: ``auto`` is CUDA when available, else the CPU.
DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class Setting:
    """A parameter that no config class holds: its type (an annotation; ``int | None`` where null is allowed), its
    allowed numbers (``range``, for a list: of each item) and its allowed words (``choices``).  ``range`` and
    ``choices`` may be functions returning them, so that a limit is read from the module that uses it, when checked."""

    type: Any = Any
    range: Range | Callable[[], Range] | None = None
    choices: Collection | Callable[[], Collection] | None = None

    def allowed(self) -> Collection | None:
        return self.choices() if callable(self.choices) else self.choices

    def numbers(self) -> Range | None:
        return self.range() if callable(self.range) else self.range

    def problem(self, value: Any) -> str | None:
        """Why ``value`` cannot be this setting's value (``must be ..., got ...``), or None."""
        if not matches(value, self.type):
            return f"must be {annotation_name(self.type)}, got {type_name(value)}" + (
                "" if value is None else f" {quote(value)}"
            )
        bad = non_finite(value)
        if bad is not None:
            return f"must be a finite number, got {bad[1]}" + (f" at {bad[0]}" if bad[0] else "")
        rng = self.numbers()
        if rng is not None and value is not None:
            for x in value if isinstance(value, (list, tuple)) else [value]:
                if _is_number(x) and not rng.ok(x):
                    return f"must be {rng.describe()}, got {quote(value)}"
        allowed = self.allowed()
        if allowed is not None and value is not None and value not in allowed:
            return f"must be one of {tuple(allowed)}, got {quote(value)}"
        return None


def non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """``(where, x)`` of the first NaN or infinite number ``x`` in ``value``, searched through lists, tuples and dict
    values (``where``: ``""`` for ``value`` itself, else e.g. ``".rl_frac"`` or ``"[2]"``), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where, value)
    if isinstance(value, (list, tuple)):
        items = [(f"{where}[{i}]", item) for i, item in enumerate(value)]
    elif isinstance(value, dict):
        items = [(f"{where}.{k}", item) for k, item in value.items()]
    else:
        return None
    for inner, item in items:
        found = non_finite(item, inner)
        if found is not None:
            return found
    return None


def annotation_name(tp: Any) -> str:
    """``int | None`` -> ``"int or null"``: an annotation as a profile's reader knows the types."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(annotation_name(arg) for arg in typing.get_args(tp))
    if tp is type(None) or tp is None:
        return "null"
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


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


def field_limits(cls: type) -> tuple[dict[str, Range], dict[str, Collection]]:
    """The allowed numbers and words of a config class's settings, as each field's metadata states them (``range``: a
    :class:`Range`; ``choices``: the allowed words): a setting's record is its field."""
    ranges = {f.name: f.metadata["range"] for f in dataclasses.fields(cls) if "range" in f.metadata}
    choices = {f.name: f.metadata["choices"] for f in dataclasses.fields(cls) if "choices" in f.metadata}
    return ranges, choices


def check_fields(obj: Any, where: str) -> None:
    """Check every field of the dataclass instance ``obj`` against its annotation and the range or words its metadata
    allows (:func:`field_limits`; numbers must also be finite); raise ``ValueError`` naming ``where.field``, the value
    and what is expected."""
    ranges, choices = field_limits(type(obj))
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        tp = hints.get(f.name, Any)
        if not matches(value, tp):
            expected = str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")
            raise ValueError(f"{where}.{f.name}={quote(value)}: expected {expected}, got {type_name(value)}")
        bad = non_finite(value)
        if bad is not None:
            raise ValueError(f"{where}.{f.name}{bad[0]}={bad[1]!r}: must be a finite number")
        rng = ranges.get(f.name)
        if rng is not None and value is not None and not rng.ok(value):
            raise ValueError(f"{where}.{f.name}={quote(value)}: must be {rng.describe()}")
        allowed = choices.get(f.name)
        if allowed is not None and value is not None and value not in allowed:
            raise ValueError(f"{where}.{f.name}={quote(value)}: expected one of {tuple(allowed)}")


def check_like_default(key: str, value: Any, default: Any) -> str | None:
    """Why ``value`` cannot replace a parameter whose notebook default is ``default`` (None when it can).

    The default's type is the parameter's type (a list's items: the type its items share); null is allowed everywhere
    (the stage's config says where it is not), and a parameter whose default is null takes any value.  A number is
    finite, wherever it sits."""
    bad = non_finite(value)
    if bad is not None:
        return f"'{key}{bad[0]}' must be a finite number, got {bad[1]}"
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
    if ok and isinstance(default, (list, tuple)) and default and len({type(d) for d in default}) == 1:
        for item in value:
            problem = check_like_default(key, item, default[0])
            if problem or item is None:
                return (
                    f"'{key}' must be a list of {type_name(default[0])} like its default {quote(default)}, got "
                    f"{type_name(item)} {quote(item)} in {quote(value)}"
                )
    if ok:
        return None
    return (
        f"'{key}' must be {type_name(default)} like its default {quote(default)}, got {type_name(value)} "
        f"{quote(value)}"
    )


def parameter_values(namespace: dict[str, Any], names: set[str] | frozenset[str]) -> dict[str, Any]:
    """The entries of ``namespace`` (a notebook's ``globals()``, or a CLI's parameters) that are settings ``names``
    and hold parameter values (literals: numbers, strings, booleans, None, lists, tuples, dicts), so that a module
    or function imported under a setting's name is never taken for it."""
    literal = (str, int, float, bool, type(None), list, tuple, dict)
    return {k: v for k, v in namespace.items() if k in names and isinstance(v, literal)}


class StageSettings:
    """What every stage config (a dataclass of settings: ``SFTConfig``, ``IGPOConfig``) is built and read back with,
    the same way: :meth:`from_params` takes the settings out of a notebook's ``globals()`` or a command line's
    parameters (other keys ignored: they are other things), :meth:`from_dict` takes a mapping of settings only (an
    unknown key is an error naming it), :meth:`to_dict` gives them back."""

    LABEL = "stage"  # how messages name the config's settings ("unknown SFT setting(s) ...")

    def check_settings(self) -> None:
        """Each setting against its type and the range or words its field's metadata allows (:func:`check_fields`);
        the subclass's ``__post_init__`` calls it, then checks what involves several settings."""
        check_fields(self, type(self).__name__)

    @classmethod
    def from_params(cls, params: dict[str, Any], **overrides: Any):
        """From a notebook's parameters (``globals()``) or a command line's: the keys that are settings and hold
        parameter values (:func:`parameter_values`), then ``overrides``. One call: a new setting needs no retyping."""
        return cls(**{**parameter_values(params, {f.name for f in fields(cls)}), **overrides})

    @classmethod
    def from_dict(cls, values: dict[str, Any]):
        """From a mapping of settings only (a saved ``to_dict``); an unknown key is an error that names it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown {cls.LABEL} setting(s) {unknown}; known: {sorted(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def number_argument(rng: Range, kind: type = int) -> Callable[[str], Any]:
    """An argparse ``type=`` for a count or size on a command line: the text as ``kind`` (int or float), finite and
    within ``rng`` (the ranges the config classes and profiles check), else argparse's one-line usage error naming
    the option, before anything loads."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {quote(text)}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {quote(text)}")
        if not rng.ok(value):
            raise argparse.ArgumentTypeError(f"must be {rng.describe()}, got {quote(value)}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def parse_shard(shard: str | tuple[int, int], name: str = "shard") -> tuple[int, int]:
    """``"1/4"`` or ``(1, 4)`` -> ``(1, 4)``, checked (the cleaner's ``--shard``, the evaluation's shards);
    ``name`` is what an error calls it."""
    if isinstance(shard, str):
        i, sep, n = shard.partition("/")
        if not (sep and i.strip().isdigit() and n.strip().isdigit()):
            raise ValueError(f"{name} {shard!r}: expected I/N with 0 <= I < N, e.g. 0/4")
        shard = (int(i), int(n))
    i, n = shard
    if not 0 <= i < n:
        raise ValueError(f"{name} {i}/{n}: expected I/N with 0 <= I < N, e.g. 0/4")
    return int(i), int(n)
