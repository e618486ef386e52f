"""Every setting of a profile is checked before the first notebook starts (issue: items 9, 10 and 11).

- item 9: every value of every section (and the shared keys) is checked for type, range and allowed choices, with
  file, section and key named, before any kernel starts: here ``papermill.execute_notebook`` fails the test if called;
- item 10: duplicate YAML keys are refused, naming the key and both lines;
- item 11: the command lines (the pipeline and the stage CLIs) answer an unusable argument with one line naming it.
"""

from __future__ import annotations

import pytest
import yaml

from venus_utils.core.paths import PARAMS_DIR
from venus_utils.core.profiles import ConfigError, load_profile

CPU = PARAMS_DIR / "cpu.yaml"
RAW = "__raw_yaml_value__"


def variant(tmp_path, changes: dict[str, str], base=CPU, name="bad.yaml"):
    """``base`` with ``changes`` ("section.key" or "key" for a shared key, nested with dots -> raw YAML text)."""
    data = yaml.safe_load(base.read_text(encoding="utf-8"))
    raws = {}
    for n, (dotted, raw) in enumerate(changes.items()):
        *parents, key = dotted.split(".")
        target = data
        for part in parents:
            target = target.setdefault(part, {})
        target[key] = f"{RAW}{n}"
        raws[f"{RAW}{n}"] = raw
    text = yaml.safe_dump(data, sort_keys=False)
    for placeholder, raw in raws.items():
        text = text.replace(placeholder, raw)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def no_kernel(monkeypatch):
    """Any notebook execution fails the test: the checks must come first."""
    import papermill

    def refuse(*args, **kwargs):
        raise AssertionError(f"a kernel was started for {args[0] if args else kwargs}")

    monkeypatch.setattr(papermill, "execute_notebook", refuse)


# --- item 9: every value checked up front -----------------------------------------------------------------------

BAD_VALUES = [
    # (changes, section named in the message, key named in the message)
    ({"heldout_n": "-3"}, "03_sft_unsloth", "heldout_n"),
    ({"05_evaluation.samples": "-2"}, "05_evaluation", "samples"),
    ({"00_setup.world_knobs.n_wrolds": "3"}, "00_setup", "n_wrolds"),
    ({"00_setup.world_knobs.n_worlds": "-3"}, "00_setup", "n_worlds"),
    ({"00_setup.world_knobs.rl_frac": ".nan"}, "00_setup", "rl_frac"),
    ({"00_setup.world_knobs.visit_policy": "sometimes"}, "00_setup", "visit_policy"),
    ({"world_size": "huge"}, "00_setup", "world_size"),
    ({"01_trajectory_cleaning.compat": "strikt"}, "01_trajectory_cleaning", "compat"),
    ({"01_trajectory_cleaning.workers": "-1"}, "01_trajectory_cleaning", "workers"),
    ({"02_turn_aware_resampling.val_fraction": "2.0"}, "02_turn_aware_resampling", "val_fraction"),
    ({"02_turn_aware_resampling.what_if_long": "[1, two]"}, "02_turn_aware_resampling", "what_if_long"),
    ({"seed": str(2**63)}, "00_setup", "seed"),
    ({"seed": "-1"}, "00_setup", "seed"),
    ({"03_sft_unsloth.learning_rate": ".nan"}, "03_sft_unsloth", "learning_rate"),
    ({"04_igpo_rl.learning_rate": "1.0e+400"}, "04_igpo_rl", "learning_rate"),  # YAML reads it as inf
    ({"04_igpo_rl.learning_rate": "1e400"}, "04_igpo_rl", "learning_rate"),  # PyYAML reads it as a string
    ({"03_sft_unsloth.precision": "fp8"}, "03_sft_unsloth", "precision"),
    ({"03_sft_unsloth.judge_kind": "gpt"}, "03_sft_unsloth", "judge_kind"),
    ({"03_sft_unsloth.seed": str(2**64)}, "03_sft_unsloth", "seed"),
    ({"04_igpo_rl.kl_coef": ".nan"}, "04_igpo_rl", "kl_coef"),
    ({"04_igpo_rl.search_cost": ".nan"}, "04_igpo_rl", "search_cost"),
    ({"04_igpo_rl.train_questions": "-5"}, "04_igpo_rl", "train_questions"),
    ({"04_igpo_rl.judge": "strict"}, "04_igpo_rl", "judge"),
    ({"05_evaluation.benchmark": "BrowseComp-XX"}, "05_evaluation", "benchmark"),
    ({"05_evaluation.temperature": "-.inf"}, "05_evaluation", "temperature"),
    ({"06_agent_demo.max_turns": "0"}, "06_agent_demo", "max_turns"),
    ({"device": "tpu"}, "00_setup", "device"),
    ({"04_igpo_rl.heldout_split": "train"}, "04_igpo_rl", "heldout_split"),
    (
        {"04_igpo_rl.sft_model": "models/cpu-teacher-sft-seed0", "04_igpo_rl.control_arm": "true"},
        "04_igpo_rl",
        "control_arm",
    ),
    ({"04_igpo_rl.sft_model": "models/no-such-model"}, "04_igpo_rl", "sft_model"),
]


@pytest.mark.parametrize("changes, section, key", BAD_VALUES, ids=[",".join(c) for c, _, _ in BAD_VALUES])
def test_a_bad_value_anywhere_stops_the_pipeline_before_any_kernel(tmp_path, no_kernel, changes, section, key):
    from venus_utils.run.pipeline import run_pipeline

    bad = variant(tmp_path, changes)
    with pytest.raises(ConfigError) as info:
        run_pipeline(bad, tmp_path / "runs", progress=False)
    message = str(info.value)
    assert str(bad) in message and section in message and key in message, message
    assert "\n" not in message


def test_a_section_the_run_skips_is_checked_too(tmp_path, no_kernel):
    """``--only 00`` still refuses a bad value of notebook 05: the whole profile is checked."""
    from venus_utils.run.pipeline import run_pipeline

    bad = variant(tmp_path, {"05_evaluation.samples": "-2"})
    with pytest.raises(ConfigError, match=r"05_evaluation: 'samples' must be >= 1, got -2"):
        run_pipeline(bad, tmp_path / "runs", only="00", progress=False)
    assert not (tmp_path / "runs" / "00_setup").exists()


def test_messages_name_file_section_key_and_value(tmp_path, no_kernel):
    from venus_utils.run.pipeline import run_pipeline

    cases = {
        "04_igpo_rl.kl_coef": (".nan", "04_igpo_rl: 'kl_coef' must be a finite number, got nan"),
        "heldout_n": ("-3", "03_sft_unsloth: 'heldout_n' must be >= 0, got -3"),
        "seed": (str(2**63), f"'seed' must be >= 0 and <= {2**63 - 1}, got {2**63}"),
        "01_trajectory_cleaning.compat": ("strikt", "'compat' must be one of ('strict', 'reference'), got 'strikt'"),
        "00_setup.world_knobs.n_worlds": ("-3", "00_setup: world_knobs: WorldConfig.n_worlds=-3: must be >= 1"),
    }
    for dotted, (raw, expected) in cases.items():
        bad = variant(tmp_path, {dotted: raw})
        with pytest.raises(ConfigError) as info:
            run_pipeline(bad, tmp_path / "runs", progress=False)
        assert str(info.value).startswith(f"{bad}: ") and expected in str(info.value), str(info.value)


def test_a_bad_set_value_is_refused_by_the_stage_cli(tmp_path, capsys):
    from venus_utils.rl.__main__ import main as rl_main

    for item, expected in [
        ("kl_coef=.nan", "'kl_coef' must be a finite number, got nan"),
        ("heldout_n=-1", "'heldout_n' must be >= 0, got -1"),
        ("judge=strict", "'judge' must be one of"),
    ]:
        argv = ["train", "--params", str(CPU), "--run-dir", str(tmp_path), "--set", item]
        assert rl_main(argv) == 2
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err, err
    assert not (tmp_path / "04_igpo_rl").exists()


@pytest.mark.parametrize("path", sorted(PARAMS_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_profiles_pass_every_check(path):
    from venus_utils.run.pipeline import main

    assert main(["--params", str(path), "--check"]) == 0


def test_check_mode_reports_a_bad_profile_and_runs_nothing(tmp_path, no_kernel, capsys):
    from venus_utils.run.pipeline import main

    bad = variant(tmp_path, {"04_igpo_rl.kl_coef": ".nan"})
    assert main(["--params", str(bad), "--check", "--out", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err
    assert "kl_coef" in err and err.count("\n") == 1 and not (tmp_path / "runs").exists()


def test_every_notebook_parameter_has_a_check():
    """Each parameter of each notebook is checked by a config class the stage builds or by ``PARAMETERS``; a new
    parameter without a check fails here, not an hour into a run."""
    from venus_utils.core.profiles import RESERVED, discover_notebooks, notebook_defaults
    from venus_utils.run.schemas import checked_keys

    for nb in discover_notebooks():
        unchecked = sorted(set(notebook_defaults(nb)) - RESERVED - checked_keys(nb.stem))
        assert not unchecked, f"{nb.name}: parameters without a check: {unchecked}"


def test_world_knobs_are_world_config_fields():
    from venus_utils.world import WorldConfig

    cfg = WorldConfig.from_knobs({"n_worlds": 2}, seed=3, size="small")
    assert (cfg.n_worlds, cfg.seed) == (2, 3)
    with pytest.raises(ValueError, match=r"unknown world knob 'n_wrolds' \(did you mean 'n_worlds'\?\)"):
        WorldConfig.from_knobs({"n_wrolds": 2})
    with pytest.raises(ValueError, match="'seed' is not a world knob"):
        WorldConfig.from_knobs({"seed": 2}, seed=1)
    with pytest.raises(ValueError, match="WorldConfig.min_hops=3: must be <= max_hops 2"):
        WorldConfig(min_hops=3, max_hops=2)


# --- item 10: duplicate keys ------------------------------------------------------------------------------------


def test_a_repeated_section_is_refused_naming_both_lines(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("seed: 0\n03_sft_unsloth:\n  max_steps: 4\n\n03_sft_unsloth:\n  max_length: 512\n")
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert str(info.value) == f"{path}: key '03_sft_unsloth' appears twice, on lines 2 and 5"


def test_a_repeated_key_in_a_section_is_refused_naming_both_lines(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("03_sft_unsloth:\n  max_steps: 4\n  max_length: 512\n  max_steps: 8\n")
    with pytest.raises(ConfigError, match=r"key '03_sft_unsloth.max_steps' appears twice, on lines 2 and 4"):
        load_profile(path)
    path.write_text("00_setup:\n  world_knobs: {n_worlds: 2, n_worlds: 3}\n")
    with pytest.raises(ConfigError, match=r"key '00_setup.world_knobs.n_worlds' appears twice, on lines 2 and 2"):
        load_profile(path)


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("03_sft_unsloth: &base\n  max_steps: 4\n04_igpo_rl:\n  <<: *base\n  max_steps: 8\n")
    assert load_profile(path).sections["04_igpo_rl"] == {"max_steps": 8}


def test_a_repeated_key_in_a_set_value_is_refused():
    from venus_utils.run.cli import parse_sets

    with pytest.raises(ConfigError, match=r"--set 'world_knobs=\{a: 1, a: 2\}': key 'a' appears twice"):
        parse_sets(["world_knobs={a: 1, a: 2}"])


# --- item 11: one line naming the argument ----------------------------------------------------------------------


def one_line(err: str) -> str:
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err.strip()


@pytest.fixture
def utf16_profile(tmp_path):
    path = tmp_path / "utf16.yaml"
    path.write_text(CPU.read_text(encoding="utf-8"), encoding="utf-16")
    return path


def test_pipeline_arguments_that_cannot_be_used_give_one_line(tmp_path, utf16_profile, no_kernel, capsys):
    from venus_utils.run.pipeline import main

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    cases = [
        (["--params", str(utf16_profile)], f"--params {utf16_profile}: UTF-16 text; save the profile as UTF-8"),
        (["--params", str(tmp_path)], f"--params {tmp_path}: is a folder, not a profile file"),
        (["--params", str(tmp_path / "nope.yaml")], f"--params {tmp_path / 'nope.yaml'}: profile file not found"),
        (["--params", str(CPU), "--out", str(a_file)], f"--out {a_file}: is a file, not a folder"),
        (["--params", str(CPU), "--out", str(a_file / "run")], f"--out {a_file / 'run'}: {a_file} is a file"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2, argv
        line = one_line(capsys.readouterr().err)
        assert line.endswith(expected), line
        assert line.startswith("python -m venus_utils.run.pipeline: error: ")


def test_a_profile_that_is_not_valid_yaml_gives_one_line(tmp_path, capsys):
    from venus_utils.run.pipeline import main

    path = tmp_path / "broken.yaml"
    path.write_text("seed: 0\n03_sft_unsloth:\n  max_steps: [1\n")
    assert main(["--params", str(path)]) != 0
    line = one_line(capsys.readouterr().err)
    assert f"{path}: not valid YAML" in line and "flow sequence at line 3, column 14" in line


@pytest.mark.parametrize("stage_cli", ["sft", "rl"])
def test_stage_cli_arguments_that_cannot_be_used_give_one_line(tmp_path, utf16_profile, capsys, stage_cli):
    from venus_utils.rl.__main__ import main as rl_main
    from venus_utils.sft.__main__ import main as sft_main

    main = sft_main if stage_cli == "sft" else rl_main
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    run_dir = ["--run-dir", str(tmp_path / "run")]
    cases = [
        (["--params", str(utf16_profile)], f"--params {utf16_profile}: UTF-16 text; save the profile as UTF-8"),
        (["--params", str(tmp_path)], f"--params {tmp_path}: is a folder, not a profile file"),
        (["--params", str(CPU), "--out", str(a_file)], f"--out {a_file}: is a file, not a folder"),
        (["--params", str(CPU), "--run-dir", str(a_file)], f"--run-dir {a_file}: is a file, not a folder"),
        (
            ["--params", str(CPU), "--set", "max_steps=[1"],
            "--set 'max_steps=[1': not valid YAML (line 1, column 3: expected ',' or ']', but got '<stream end>' "
            "(while parsing a flow sequence at line 1, column 1))",
        ),
        (["--params", str(CPU), "--set", "max_steps"], "--set 'max_steps': expected key=value"),
    ]
    for argv, expected in cases:
        extra = [] if "--run-dir" in argv else run_dir
        assert main(["train", *argv, *extra]) == 2, argv
        line = one_line(capsys.readouterr().err)
        assert line == f"{stage_cli}: error: {expected}", line
    assert not (tmp_path / "run").exists()
