import json
import os

import pytest

from venus_utils.core import env
from venus_utils.core.io import atomic_dir, atomic_path, atomic_write, read_json, read_jsonl, write_json, write_jsonl


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "a.txt"
    atomic_write(target, "one")
    atomic_write(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["a.txt"]


def test_atomic_path_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "a.json"
    write_json(target, {"v": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert read_json(target) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_atomic_dir_swaps_in_whole_folders(tmp_path):
    target = tmp_path / "model"
    with atomic_dir(target) as tmp:
        (tmp / "config.json").write_text("{}")
    assert (target / "config.json").exists()
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "weights.bin").write_text("half")
            raise RuntimeError("killed")
    assert sorted(p.name for p in target.iterdir()) == ["config.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_json_helpers_and_errors(tmp_path):
    import numpy as np

    write_json(tmp_path / "n.json", {"x": np.int64(3), "y": np.array([1.5])})
    assert read_json(tmp_path / "n.json") == {"x": 3, "y": [1.5]}
    write_jsonl(tmp_path / "r.jsonl", [{"a": 1}, {"a": 2}])
    assert read_jsonl(tmp_path / "r.jsonl") == [{"a": 1}, {"a": 2}]
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        read_jsonl(tmp_path / "bad.jsonl")


def test_secrets_from_dotenv_and_redaction(tmp_path, monkeypatch):
    monkeypatch.delenv("SERPER_KEY_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("SERPER_KEY_ID=sk-dotenv-secret-42\n")
    assert env.secret("SERPER_KEY_ID") == "sk-dotenv-secret-42"
    assert env.redact("calling with key sk-dotenv-secret-42 now") == "calling with key *** now"
    monkeypatch.setenv("JINA_API_KEYS", "jina-aaaa,jina-bbbb")
    assert env.redact("jina-bbbb and jina-aaaa") == "*** and ***"
    monkeypatch.delenv("SERPER_KEY_ID")


def test_describe_machine_and_profile_suggestion():
    info = env.describe_machine()
    assert info["cpu_count"] >= 1 and "version_torch" in info
    assert isinstance(info["cpu_bf16_native"], bool) and "cpu_model" in info
    json.dumps(info)
    assert env.suggest_profile({"cuda_available": False, "cpu_count": 2}) == "cpu"
    assert env.suggest_profile({"cuda_available": True, "gpu_memory_gb": 15}) == "colab"
    assert env.suggest_profile({"cuda_available": True, "gpu_memory_gb": 80, "vllm_installed": True}) == "paper"


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_atomic_writes_get_the_mode_the_umask_gives(tmp_path, umask):

    from venus_utils.core.io import atomic_dir, atomic_write

    old = os.umask(umask)
    try:
        f = atomic_write(tmp_path / "a.json", "{}")
        with atomic_dir(tmp_path / "model") as tmp:
            (tmp / "x").write_text("1")
    finally:
        os.umask(old)
    assert f.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600: other users of the run can read it
    assert (tmp_path / "model").stat().st_mode & 0o777 == 0o777 & ~umask
