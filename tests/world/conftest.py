from __future__ import annotations

import pytest

_TINY = dict(size="tiny", progress=False, search_top_k=3, snippet_chars=60, visit_max_sentences=1)


@pytest.fixture(scope="session")
def world_dir(tmp_path_factory):
    from venus_utils.world import build_world

    out = tmp_path_factory.mktemp("world")
    build_world(out, seed=3, n_worlds=3, heldout_worlds=1, **_TINY)
    return out
