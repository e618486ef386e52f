from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def world_dir(tmp_path_factory):
    from venus_utils.world import build_world

    out = tmp_path_factory.mktemp("world")
    build_world(out, seed=5, size="tiny", progress=False, search_top_k=4, snippet_chars=70, visit_max_sentences=1)
    return out


@pytest.fixture()
def stub():
    from venus_utils.tools.stub_server import StubServer

    with StubServer(hang_s=20, slow_s=6) as server:
        yield server


@pytest.fixture()
def keys(monkeypatch):
    values = {"SERPER_KEY_ID": "serper-SECRET-1111", "JINA_API_KEYS": "jina-SECRET-2222", "API_KEY": "llm-SECRET-3333"}
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return values
