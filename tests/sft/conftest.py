import pytest


@pytest.fixture(scope="session")
def micro_model_dir(tmp_path_factory):
    """A micro Qwen3 + tokenizer built offline from synthetic DR-Venus conversations (a couple of seconds)."""
    from venus_utils.modeling import build_tiny_model, synthetic_conversations

    texts = [m["content"] for c in synthetic_conversations(60, seed=3) for m in c["messages"]]
    return build_tiny_model(tmp_path_factory.mktemp("micro") / "model", texts, size="micro", vocab_size=600)
