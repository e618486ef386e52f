"""A profile states only what differs from the notebooks' defaults (venus_utils.core.defaults): a value that repeats a
default says nothing a reader can use, and becomes wrong silently when the default changes. The seed is the one
exception: a run names its seed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from venus_utils.core.defaults import SHARED, stage_defaults
from venus_utils.core.profiles import STAGE_RE, load_profile

PARAMS = sorted((Path(__file__).resolve().parents[1] / "params").glob("*.yaml"))
STATED_ANYWAY = {"seed"}


@pytest.mark.parametrize("path", PARAMS, ids=lambda p: p.name)
def test_profile_repeats_no_default(path):
    """A profile without a base states no notebook default; one with a base (``base: cpu``) states nothing its base
    already gives it, down to single world knobs."""
    own = yaml.safe_load(path.read_text(encoding="utf-8"))
    if own.get("base"):
        base = load_profile(path.parent / f"{own['base']}.yaml")
        shared = {k: v for k, v in own.items() if k not in ("base", "profile", "stages") and not STAGE_RE.match(k)}
        repeated = [k for k, v in shared.items() if base.shared.get(k, MISSING) == v and k not in STATED_ANYWAY]
        for stage, section in own.items():
            if STAGE_RE.match(stage):
                repeated += _same(section or {}, base.sections.get(stage, {}), stage)
        assert not repeated, f"{path.name} repeats its base's ({own['base']}) values: {', '.join(repeated)}"
        return
    prof = load_profile(path)
    repeated = [k for k, v in prof.shared.items() if k in SHARED and SHARED[k].value == v and k not in STATED_ANYWAY]
    for stage, section in prof.sections.items():
        defaults = stage_defaults(stage)
        repeated += [f"{stage}.{k}" for k, v in section.items() if k in defaults and defaults[k] == v]
    assert not repeated, f"{path.name} repeats the notebooks' defaults: {', '.join(repeated)}"


MISSING = object()


def _same(own: dict, base: dict, where: str) -> list[str]:
    """The keys of ``own`` whose value ``base`` already has (mappings compared key by key, as they are merged)."""
    out = []
    for key, value in own.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            out += _same(value, base[key], f"{where}.{key}")
        elif base.get(key, MISSING) == value:
            out.append(f"{where}.{key}")
    return out


CONFIGS = [
    ("venus_utils/sft/config.py", "SFTConfig", "03_sft_unsloth"),
    ("venus_utils/rl/config.py", "IGPOConfig", "04_igpo_rl"),
]


@pytest.mark.parametrize("path, name, stage", CONFIGS, ids=[c[1] for c in CONFIGS])
def test_a_config_default_equal_to_the_lesson_value_is_read_from_the_lesson_table(path, name, stage):
    """DR-Venus's value lives in the config class and the lesson's in venus_utils/core/defaults.py; where they are the
    same value it is written once, in the lesson table, and the class reads it (``LESSON["kl_coef"]``)."""
    source = (Path(__file__).resolve().parents[1] / path).read_text()
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name)
    lesson = stage_defaults(stage)
    written_twice, read = [], []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None):
            continue
        field = node.target.id
        call = node.value
        default = (
            next((k.value for k in call.keywords if k.arg == "default"), None) if isinstance(call, ast.Call) else call
        )
        if default is None:
            continue
        text = ast.unparse(default)
        if text == f"LESSON[{field!r}]":
            read.append(field)
        elif field in lesson and _literal(default) == lesson[field]:
            written_twice.append(f"{field} = {text}")
    assert not written_twice, f"{name} repeats the lesson's value of: {', '.join(written_twice)}"
    assert read, f"{name} reads no default from the lesson table"


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return object()  # an expression: not a repeated literal
