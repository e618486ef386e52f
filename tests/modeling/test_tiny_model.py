"""The tiny model folder: built offline, loads with the Auto classes, Qwen3 special tokens, digit splitting."""

import json

import pytest

from venus_utils.modeling import QWEN3_ADDED_TOKENS, SIZES, load_metadata


@pytest.fixture(scope="module")
def tok(micro_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(micro_model_dir)


def test_folder_loads_with_auto_classes_and_generates(micro_model_dir, tok):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(micro_model_dir)
    assert config.architectures == ["Qwen3ForCausalLM"] and config.model_type == "qwen3"
    assert config.vocab_size % 64 == 0 and config.vocab_size >= len(tok)
    assert config.hidden_size == SIZES["micro"].hidden_size and config.tie_word_embeddings
    model = AutoModelForCausalLM.from_pretrained(micro_model_dir)
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] == ids["input_ids"].shape[1] + 5 or out[0, -1].item() in model.generation_config.eos_token_id
    gen = json.loads((micro_model_dir / "generation_config.json").read_text())
    assert gen["eos_token_id"] == [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    assert load_metadata(micro_model_dir)["size"] == "micro"
    assert torch.isfinite(model(**ids).logits).all()


def test_every_qwen3_added_token_is_one_id_in_qwen_order(tok):
    ids = [tok.convert_tokens_to_ids(t) for t, _ in QWEN3_ADDED_TOKENS]
    assert ids == list(range(ids[0], ids[0] + len(QWEN3_ADDED_TOKENS)))  # contiguous, like 151643..151668
    assert len(QWEN3_ADDED_TOKENS) == 26
    for text, _ in QWEN3_ADDED_TOKENS:
        assert tok(text, add_special_tokens=False)["input_ids"] == [tok.convert_tokens_to_ids(text)]
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


def test_protocol_tags_survive_skip_special_tokens(tok):
    text = "<think>\nr\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>"
    assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text.replace("<|im_end|>", "")


def test_digits_are_single_tokens_and_names_split_into_short_pieces(tok):
    pieces = tok.convert_ids_to_tokens(tok("born in 1931 in Krashaithvor", add_special_tokens=False)["input_ids"])
    assert [p for p in pieces if p.strip("Ġ").isdigit()] == ["1", "9", "3", "1"]
    assert all(len(p.replace("Ġ", " ")) <= 4 for p in pieces)
    assert tok.decode(tok("born in 1931 in Krashaithvor")["input_ids"]) == "born in 1931 in Krashaithvor"


def test_cli_builds_a_loadable_folder(tmp_path):
    from venus_utils.modeling.__main__ import main

    world = tmp_path / "world"
    world.mkdir()
    (world / "pages.jsonl").write_text(
        "".join(
            json.dumps(
                {"url": f"https://w/{i}", "title": f"T{i}", "text": f"Page {i} about Zorbel Quen born 19{i:02d}."}
            )
            + "\n"
            for i in range(50)
        ),
        encoding="utf-8",
    )
    assert (
        main(["tiny", "--out", str(tmp_path / "m"), "--size", "micro", "--world", str(world), "--vocab-size", "400"])
        == 0
    )
    meta = load_metadata(tmp_path / "m")
    assert meta["corpus_texts"] == 51 and meta["source"] == str(world)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".m.")]  # no temporary folder left behind


def test_bad_inputs_are_named(tmp_path):
    from venus_utils.modeling import build_tiny_model

    with pytest.raises(FileNotFoundError, match="pages.jsonl"):
        build_tiny_model(tmp_path / "m", tmp_path, size="micro")
    with pytest.raises(ValueError, match="size"):
        build_tiny_model(tmp_path / "m", ["x"], size="huge")


def test_a_vocabulary_smaller_than_asked_is_explained(capsys):
    from venus_utils.modeling.tokenizer import train_tokenizer

    tok = train_tokenizer(["Kara Fenmartal was born in Shilo."] * 3, vocab_size=2048)
    out = capsys.readouterr().out
    assert len(tok) < 2048 and "not the 2048 asked for" in out and "max_token_length" in out


def test_a_model_of_qwen3_0_6b_shape_has_its_size_and_vocabulary(tok):
    """The GPU check's model: Qwen3-0.6B's shape and 151,936 embedding rows, built on the meta device (no memory)."""
    import torch

    from venus_utils.modeling.model import build_model

    with torch.device("meta"):
        model = build_model(tok, "qwen3-0.6b", model_vocab_size=151_936)
    assert model.config.vocab_size == 151_936
    assert 590e6 < sum(p.numel() for p in model.parameters()) < 600e6  # Qwen3-0.6B: 596M with tied embeddings
    with pytest.raises(ValueError, match="below the tokenizer"):
        build_model(tok, "micro", model_vocab_size=8)
