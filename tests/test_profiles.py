import pytest

from venus_utils.core.profiles import ConfigError, load_profile, notebook_params


def write(tmp_path, text, name="p.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shared_keys_and_sections(tmp_path):
    prof = load_profile(write(tmp_path, "profile: demo\nseed: 3\noffline: true\n01_clean:\n  seed: 5\n  k: 1\n"))
    assert prof.name == "demo"
    assert prof.shared == {"seed": 3, "offline": True}
    assert notebook_params(prof, "01_clean", {"seed": 0, "k": 0, "offline": False}) == {
        "seed": 5,
        "k": 1,
        "offline": True,
    }
    # shared keys a notebook does not declare are not passed to it
    assert notebook_params(prof, "02_other", {"seed": 0}) == {"seed": 3}


def test_profile_name_defaults_to_file_stem(tmp_path):
    assert load_profile(write(tmp_path, "seed: 1\n", "mine.yaml")).name == "mine"


def test_undeclared_section_key_is_an_error(tmp_path):
    prof = load_profile(write(tmp_path, "01_clean:\n  typo_key: 1\n"))
    with pytest.raises(ConfigError, match="typo_key.*does not declare"):
        notebook_params(prof, "01_clean", {"seed": 0})


@pytest.mark.parametrize("key", ["api_key", "serper_key_id", "judge_api_key", "hf_token", "password"])
def test_secret_like_keys_are_refused(tmp_path, key):
    with pytest.raises(ConfigError, match="looks like a secret"):
        load_profile(write(tmp_path, f"01_clean:\n  {key}: abc\n"))


def test_reserved_and_malformed(tmp_path):
    with pytest.raises(ConfigError, match="run_dir"):
        load_profile(write(tmp_path, "run_dir: x\n"))
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_profile(write(tmp_path, "01_clean: 3\n"))
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_profile(write(tmp_path, "a: [1,\n"))
    with pytest.raises(ConfigError, match="not found"):
        load_profile(tmp_path / "missing.yaml")


@pytest.mark.parametrize("key", ["max_new_tokens", "tokens_per_turn", "max_tokens", "keyword"])
def test_ordinary_keys_are_not_mistaken_for_secrets(tmp_path, key):
    load_profile(write(tmp_path, f"01_clean:\n  {key}: 5\n"))


def test_a_profile_file_that_cannot_be_read_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"is a folder, not a profile file"):
        load_profile(tmp_path)
    utf16 = tmp_path / "utf16.yaml"
    utf16.write_text("seed: 1\n", encoding="utf-16")
    with pytest.raises(ConfigError, match=r"utf16.yaml: UTF-16 text; save the profile as UTF-8"):
        load_profile(utf16)
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("seed: 1\nnote: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 0xe9 on line 2\); save the profile as UTF-8"):
        load_profile(latin1)
    bom = tmp_path / "bom.yaml"
    bom.write_text("seed: 1\n", encoding="utf-8-sig")  # a UTF-8 byte-order mark is fine
    assert load_profile(bom).shared == {"seed": 1}


def test_duplicate_keys_are_refused_with_both_lines(tmp_path):
    with pytest.raises(ConfigError, match=r"key '01_clean' appears twice, on lines 1 and 3"):
        load_profile(write(tmp_path, "01_clean:\n  k: 1\n01_clean:\n  k: 2\n"))
    with pytest.raises(ConfigError, match=r"key 'seed' appears twice, on lines 1 and 2"):
        load_profile(write(tmp_path, "seed: 1\nseed: 2\n"))


@pytest.mark.parametrize("raw", [".nan", ".inf", "-.inf", "1.0e+400", "[1.0, .nan]"])
def test_numbers_must_be_finite(tmp_path, raw):
    prof = load_profile(write(tmp_path, f"01_clean:\n  k: {raw}\n"))
    with pytest.raises(ConfigError, match=r"'k(\[1\])?' must be a finite number"):
        notebook_params(prof, "01_clean", {"k": [0.5] if raw.startswith("[") else 0.5})


def test_a_run_records_each_value_and_where_it_came_from(tmp_path):
    """Issue 23: summary.json says, for every parameter, the value the stage used and its source: the profile's
    section or shared keys, the notebook's parameters cell, or this run (--set, by hand)."""
    from venus_utils.core.paths import NOTEBOOKS_DIR, PARAMS_DIR, RL_STAGE
    from venus_utils.core.profiles import NOTEBOOK_DEFAULT, THIS_RUN, notebook_defaults, settings_record
    from venus_utils.core.stage import Stage

    defaults = notebook_defaults(NOTEBOOKS_DIR / f"{RL_STAGE}.ipynb")
    values = {**defaults, **notebook_params(load_profile(PARAMS_DIR / "smoke.yaml"), RL_STAGE, defaults)}
    values["kl_coef"] = 0.5  # assigned by hand after the profile
    record = settings_record(RL_STAGE, "smoke", values)
    assert record["max_turns"] == {"value": 4, "from": f"params/smoke.yaml: {RL_STAGE}"}
    assert record["max_steps"] == {"value": 2, "from": NOTEBOOK_DEFAULT}  # the profile states only what differs
    assert record["seed"] == {"value": 0, "from": "params/smoke.yaml"}  # a shared key
    assert record["norm_mode"]["from"] == NOTEBOOK_DEFAULT
    assert record["kl_coef"] == {"value": 0.5, "from": THIS_RUN}
    assert set(record) == set(defaults) - {"run_dir", "stage_dir", "profile"}
    no_file = settings_record(RL_STAGE, "a-profile-outside-params", values)
    assert no_file["learning_rate"]["from"] == THIS_RUN and no_file["offline"]["from"] == NOTEBOOK_DEFAULT

    stage = Stage.start(RL_STAGE, tmp_path / "run", profile="smoke", params=values)
    assert stage.finish()["settings"] == record


def test_a_profile_with_a_base_inherits_what_it_does_not_state(tmp_path):
    write(
        tmp_path, "profile: lesson\nseed: 3\nheldout_n: 300\n00_setup:\n  world_knobs: {a: 1, b: 2}\n", "lesson.yaml"
    )
    child = load_profile(
        write(
            tmp_path, "base: lesson\nheldout_n: 40\n00_setup:\n  world_knobs: {b: 5}\n04_igpo_rl:\n  k: 1\n", "c.yaml"
        )
    )
    assert child.name == "c"  # the name is the child's own, never inherited
    assert child.shared == {"seed": 3, "heldout_n": 40}
    assert child.sections == {"00_setup": {"world_knobs": {"a": 1, "b": 5}}, "04_igpo_rl": {"k": 1}}
    assert child.bases == [tmp_path / "lesson.yaml"]
    again = load_profile(write(tmp_path, child.resolved_text(), "resolved.yaml"))  # the record stands alone
    assert (again.name, again.shared, again.sections, again.bases) == ("c", child.shared, child.sections, [])


def test_stages_are_inherited_unless_set(tmp_path):
    write(tmp_path, "stages: [0, 04_igpo_rl]\n", "a.yaml")
    assert load_profile(write(tmp_path, "base: a\n", "b.yaml")).stages == ["0", "04_igpo_rl"]
    assert load_profile(write(tmp_path, "base: a\nstages: [3]\n", "c.yaml")).stages == ["3"]
    assert load_profile(write(tmp_path, "seed: 1\n", "d.yaml")).stages is None
    with pytest.raises(ConfigError, match="d2.yaml: 'stages' must be a non-empty list"):
        load_profile(write(tmp_path, "stages: 04_igpo_rl\n", "d2.yaml"))


@pytest.mark.parametrize(
    "text, message",
    [
        ("base: nowhere\n", r"base 'nowhere': no .*nowhere.yaml \(profiles there: .*x\)"),
        ("base: ../x\n", "names a profile of the same folder by its name"),
        ("base: x.yaml\n", "names a profile of the same folder by its name"),
        ("base: [x]\n", "names a profile of the same folder by its name"),
    ],
)
def test_a_base_that_cannot_be_read_is_one_line_naming_the_file(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_profile(write(tmp_path, text, "x.yaml"))


def test_a_base_cycle_or_an_endless_chain_is_refused(tmp_path):
    write(tmp_path, "base: b\n", "a.yaml")
    write(tmp_path, "base: a\n", "b.yaml")
    with pytest.raises(ConfigError, match=r"makes a cycle \(a -> b -> a\)"):
        load_profile(tmp_path / "a.yaml")
    for i in range(12):
        write(tmp_path, f"base: n{i + 1}\n", f"n{i}.yaml")
    write(tmp_path, "seed: 0\n", "n12.yaml")
    with pytest.raises(ConfigError, match="more than 8 profiles in its base chain"):
        load_profile(tmp_path / "n0.yaml")


def test_a_renamed_parameter_names_its_new_name(tmp_path):
    prof = load_profile(write(tmp_path, "05_evaluation:\n  tokens_per_turn: 64\n"))
    with pytest.raises(ConfigError, match="tokens_per_turn is now max_tokens_per_turn"):
        notebook_params(prof, "05_evaluation", {"max_tokens_per_turn": 1024})


def test_an_inherited_value_is_credited_to_the_file_that_states_it():
    """summary.json says where each value came from: with ``base:``, the profile file of the chain that states it."""
    from venus_utils.core.profiles import settings_record

    record = settings_record("04_igpo_rl", "cpu-teacher", {"max_steps": 40, "rft_arm": True, "seed": 0})
    assert record["max_steps"]["from"] == "params/cpu.yaml: 04_igpo_rl"  # cpu-teacher inherits it
    assert record["rft_arm"]["from"] == "params/cpu-teacher.yaml: 04_igpo_rl"
    assert record["seed"]["from"] == "params/cpu.yaml"
