"""A profile states only what differs from the notebooks' defaults (venus_utils.core.defaults): a value that repeats a
default says nothing a reader can use, and becomes wrong silently when the default changes. The seed is the one
exception: a run names its seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from venus_utils.core.defaults import SHARED, stage_defaults
from venus_utils.core.profiles import load_profile

PARAMS = sorted((Path(__file__).resolve().parents[1] / "params").glob("*.yaml"))
STATED_ANYWAY = {"seed"}


@pytest.mark.parametrize("path", PARAMS, ids=lambda p: p.name)
def test_profile_repeats_no_default(path):
    prof = load_profile(path)
    repeated = [k for k, v in prof.shared.items() if k in SHARED and SHARED[k].value == v and k not in STATED_ANYWAY]
    for stage, section in prof.sections.items():
        defaults = stage_defaults(stage)
        repeated += [f"{stage}.{k}" for k, v in section.items() if k in defaults and defaults[k] == v]
    assert not repeated, f"{path.name} repeats the notebooks' defaults: {', '.join(repeated)}"
