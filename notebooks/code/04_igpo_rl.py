# The code cells of 04_igpo_rl.ipynb, made by `python -m venus_utils.run.notebook_code --write`: edit the notebook.

# %% cell 1
# Parameters (Papermill overrides these from params/<profile>.yaml)
run_dir = "runs/interactive"  # where every stage of this run writes its folder
stage_dir = None  # this stage's folder; default: <run_dir>/04_igpo_rl
profile = "interactive"  # by hand, "cpu", "colab"... takes params/<profile>.yaml; recorded in summary.json
seed = 0  # the run's seed: world, data order, training and sampling (DR-Venus's data scripts use 42)
offline = True  # True: the offline world (local search and visit, the tiny model of 00_setup); False: web tools, API
# keys from the environment
device = "cpu"  # device of local models: cpu | cuda | auto
max_steps = 2  # RL steps (DR-Venus: ~60, one epoch of 16 x 8 rollouts per step)
max_time_minutes = None  # stop training (and save) after this much wall time (None: no limit; CPU budgets)
prompts_per_step = 2  # questions per step (DR-Venus: 16)
num_generations = 2  # group size n: rollouts per question (DR-Venus: 8)
micro_batch_size = 2  # trajectories per forward/backward
gradient_checkpointing = False  # recompute activations in the update (DR-Venus: on, for a 4B model); off for the tiny
# model on CPU (faster)
max_turns = 6  # assistant turns per rollout (DR-Venus: 200)
max_tokens_per_turn = 96  # generation limit per turn (DR-Venus: 8192)
max_context_tokens = 8192  # context budget of a rollout (DR-Venus: 261000)
learning_rate = 1e-6  # AdamW, constant (DR-Venus: 1e-6)
lora_r = 0  # 0: full fine-tuning (DR-Venus); > 0: LoRA rank (small GPUs), the reference is the base
kl_coef = 0.001  # k3 KL to the SFT policy (DR-Venus: 0.001)
precision = "auto"  # training under bf16 autocast (fp32 master weights): auto: on CUDA and CPUs with native bf16 |
# bf16 | fp32
info_gain_type = "log_prob_diff"  # log_prob_diff (DR-Venus) | prob_diff (IGPO paper)
ig_tool_filter = "visit"  # score IG only after these tools ("visit"), or "all"
norm_mode = "scaled_separate"  # joint | separate | scaled_separate | raw_ig
ig_norm = "group"  # group: IG z-scored over the group's IG turns (DR-Venus) | tool: over its turns of the same tool (a
# visit against visits)
use_format_penalty = True  # -1 for a malformed turn, replacing its IG / the outcome (DR-Venus: on)
reward_mode = "igpo"  # igpo: DR-Venus (IG turn rewards + format penalties + judged outcome) | grpo: judged outcome
# only, the baseline arm (give it its own stage_dir, section 3)
search_cost = 0.0  # optional extra turn reward: subtract this for every search call (DR-Venus: 0)
save_steps = 5  # checkpoint every this many steps (DR-Venus: 5)
save_total_limit = 2  # keep only the newest checkpoints (each holds optimizer states); None keeps all
train_questions = None  # limit the RL question pool (None: all of it)
filter_samples = 0  # > 0: first roll every RL question out this many times with the SFT policy and train only on those
# it does not always solve (0: no filter; DR-Venus trains RL on harder questions); these rollouts count in the compute
# the cheaper arms are matched to
dynamic_sampling = False  # DAPO: drop groups whose rollouts all got the same judge score, refill the step with new
# questions (one process; DR-Venus: off)
max_sampling_rounds = 3  # dynamic_sampling: rollout rounds per step at most (then the step fills up with the rest)
heldout_n = 8  # held-out questions, drawn once per run into runs/<profile>/heldout/: notebooks 03, 04 and 05 score the
# same ones (0: skip the agent runs)
judge = "auto"  # auto (LLM judge if an endpoint is configured, else the strict offline judge) | llm | offline
train_qa = None  # QA parquet for RL (None: the world's RL split qa/rl.parquet; web profiles must set it)
heldout_qa = None  # question file for the held-out accuracy (None: the world's heldout_split)
heldout_split = "test"  # the world's split the held-out questions come from: test (reported) | val (choosing settings;
# the reward-cell loop)
sft_model = None  # SFT model folder RL starts from (None: <run_dir>/03_sft_unsloth/model; a shipped one in models/
# needs no stages 01-03, and no control or rejection-sampling arm)
control_arm = False  # True: after RL, the control: more SFT from the same SFT model for the FLOPs this RL run counted,
# scored beside it (section 9: RL vs more SFT)
rft_arm = False  # True: after RL, rejection sampling: the SFT model samples RL's questions, is fine-tuned on its right
# answers for this RL run's FLOPs (sampling included), scored beside it (section 10: RL vs rejection sampling)
rft_rollouts = "trained"  # rejection sampling draws as many rollouts as RL trained on (trained) or as it rolled out,
# dynamic sampling's refills included (rolled_out: the stronger baseline)
example_questions = 4  # worked example: RL questions rolled out (n times each); the most instructive group is shown
example_rollout = None  # optional: a DR-Venus rollout of the shared data (e.g. "rl_rollouts/0001.json") whose IG the
# policy scores too; with the tiny offline model its values mean little (a web rollout of an unseen world)
example_max_tokens = 16000  # example_rollout: cut it after the last whole turn that fits in this many tokens
use_vllm = False  # GPU: roll out with vLLM (vllm_mode below) instead of transformers generate
vllm_mode = "colocate"  # colocate: TRL's engine in this process | server: a separate OpenAI-compatible server
vllm_server_base_url = None  # server mode: http://host:port of `trl vllm-serve` (or `vllm serve`)
vllm_server_sync_weights = True  # server mode: push the policy every step (trl vllm-serve); False: fixed server
# weights
vllm_tensor_parallel_size = 1  # colocate mode: vLLM tensor parallelism (DR-Venus: 4)
vllm_gpu_memory_utilization = 0.3  # colocate mode: GPU memory share of the vLLM engine
system_prompt_style = "dr-venus"  # dr-venus: DR-Venus's exact prompt | compact: short variant (offline profiles; the
# same in every stage)

# %% cell 2
# Install venus_utils once per runtime (nothing where it imports already): this checkout (or VENUS_RECIPE_DIR), else,
# on a bare runtime such as Colab, the repository at REPO_URL; then its dependencies, keeping the runtime's torch.
import importlib.util
import os
import subprocess
import sys

REPO_URL = os.environ.get("VENUS_RECIPE_URL", "git+https://github.com/OWNER_NOT_SET/venus-recipe")  # pyproject.toml
if found := importlib.util.find_spec("venus_utils"):
    print(f"venus_utils already importable from {os.path.dirname(found.origin)}: nothing installed")
else:
    clone = next((d for d in ("..", ".") if os.path.isfile(f"{d}/venus_utils/run/install.py")), None)
    checkout = os.environ.get("VENUS_RECIPE_DIR") or clone  # notebooks opened in a clone of the repository
    package = ["-e", os.path.abspath(checkout)] if checkout else [f"venus-recipe @ {REPO_URL}"]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *package])  # the package alone
    if checkout:  # an editable install is seen by new kernels; this one reads the checkout now
        sys.path.insert(0, package[1])
    importlib.invalidate_caches()
    from venus_utils.run.install import install_dependencies

    install_dependencies(package[-1])  # + Unsloth on a GPU (the `colab` extra): venus_utils/run/install.py

# %% cell 3
# With profile = "cpu" (any params/<name>.yaml) above, a run by hand takes that profile's values, as the pipeline
# would give them (assign a value after this call to change it); under Papermill it changes nothing.
from venus_utils.run.schemas import apply_profile

apply_profile(globals(), "04_igpo_rl")

# %% cell 4
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from venus_utils.core.io import read_jsonl
from venus_utils.core.stage import Stage
from venus_utils.eval import by_tool, plots
from venus_utils.rl import IGPOConfig, run_report, worked_example
from venus_utils.rl.policy import load_policy
from venus_utils.rl.stage import stage_inputs
from venus_utils.rl.training_rows import qa_rows

stage = Stage.start("04_igpo_rl", run_dir, stage_dir, profile, params=globals())
sft_dir, world_dir, train_file = stage_inputs(
    stage, offline, train_qa, sft_model
)  # no RL questions named (web tools) or no such sft_model: fails here, before any model loads
print("SFT model:", sft_dir)
print("RL questions:", train_file)
stage.dir

# %% cell 6
cfg = IGPOConfig.from_params(globals())  # every parameter of this notebook that is an IGPOConfig field, in one call
model, tokenizer = load_policy(sft_dir, device, lora=lora_r > 0)
pd.DataFrame({"value": cfg.to_dict()}).drop(index="pseudo_answer")

# %% cell 8
from venus_utils.judging.judge import Judge, judge_function
from venus_utils.tools import make_toolbox

grader = Judge.from_env(judge)  # one judge for the rewards and the held-out scores: its summary counts both
judge_fn, judge_description = judge_function(grader)
tools = make_toolbox("local", world_dir) if offline else make_toolbox("web")
train_rows = qa_rows(train_file, train_questions, seed)
print(judge_description)
print(f"{len(train_rows)} RL questions")

# %% cell 10
group = worked_example.own_group(
    model, tokenizer, tools, train_rows, cfg, judge_fn, candidates=example_questions
)  # the library's rollout, judge and scoring, as in training
ep = max(group, key=lambda e: e.num_turns)  # the longest rollout of the group: the example below
print("question:", ep.question)
print("ground truth:", ep.ground_truth)
worked_example.outcome_table(group)

# %% cell 12
from venus_utils.rl.info_gain import ground_truth_text, pseudo_answer

pa = pseudo_answer(tokenizer, ground_truth_text(ep.ground_truth), cfg.pseudo_answer)
print(repr(pa.text))
print("scored tokens:", [tokenizer.decode([pa.ids[k]]) for k in pa.gt_index])

# %% cell 14
# the belief after every turn of the rollout, and each turn's information gain, as the trainer scores them
example_table = worked_example.turn_table(model, tokenizer, ep, ep.ground_truth, cfg)
print(f"{len(ep.input_ids)} tokens, {ep.num_turns} turns")
display(example_table)

# %% cell 15
fig, ax = plt.subplots(figsize=(10, 3.2))
sns.barplot(data=example_table, x="turn", y="ig_every_turn", hue="tool", dodge=False, ax=ax)
ax.set_title(f"Information gain of each turn of one rollout (policy: SFT, question {ep.question[:50]!r}...)")
ax.set_ylabel("information gain (nats)")
fig.savefig(stage.path("example_ig_by_turn.png"), dpi=110)

# %% cell 16
# Optional (example_rollout): one of DR-Venus's own web rollouts, scored by this policy. The shared rollouts carry no
# ground truth, so it scores the answer the rollout ended on; with the tiny offline model the values mean little.
from venus_utils.core.paths import dr_venus_dir
from venus_utils.rl import episode_from_messages

shared = dr_venus_dir() / example_rollout if example_rollout else None
if shared is None:
    print("example_rollout is None: the worked example is this run's own group (above)")
elif not shared.exists():
    print(f"{shared} is not at hand (shared data absent): skipped")
else:
    messages, shared_gt = worked_example.load_shared_rollout(shared, example_max_tokens, tokenizer)
    shared_ep = episode_from_messages(tokenizer, messages, shared_gt)
    display(worked_example.turn_table(model, tokenizer, shared_ep, shared_gt, cfg))

# %% cell 18
import math


def turn_reward(ep):
    rewards = []
    previous = ep.ig_values[0]  # the belief after the question alone (boundary 0)
    for turn in range(ep.num_turns - 1):
        belief = ep.ig_values[turn + 1]  # the belief after this turn's tool response; None: the filter skipped it
        reward = None
        if belief is not None and previous is not None:
            if cfg.info_gain_type == "prob_diff":
                reward = math.exp(belief) - math.exp(previous)
            else:  # log_prob_diff (DR-Venus)
                reward = belief - previous
            previous = belief
        if cfg.use_format_penalty and ep.format_errors[turn]:
            reward = cfg.format_penalty  # a malformed turn: the penalty replaces its information gain
        if cfg.search_cost and ep.tool_names[turn] == "search":
            reward = (reward or 0.0) - cfg.search_cost
        # your own rule goes here, e.g. no penalty for a negative information gain:
        # reward = None if reward is None else max(reward, 0.0)
        rewards.append(reward)
    return rewards

# %% cell 20
rewards = turn_reward(ep)
assert len(rewards) == ep.num_turns - 1, "one turn reward per non-final turn"
assert all(r is None or math.isfinite(r) for r in rewards), "a turn reward is a finite number or None"
worked_example.reward_table(ep, turn_reward, cfg)  # beside it, the library's DR-Venus rule: `differs` shows an edit

# %% cell 22
def outcome_reward(ep):
    if cfg.use_format_penalty and ep.format_errors and ep.format_errors[-1]:
        return cfg.format_penalty  # no well-formed <answer> in the last turn
    return float(ep.judge_score)

# %% cell 24
outcomes = [outcome_reward(e) for e in group]
assert all(math.isfinite(o) for o in outcomes), "an outcome reward is a finite number"
worked_example.outcome_table(group, outcome_reward, cfg)

# %% cell 26
def turn_advantages(turn_rewards, outcomes, groups):
    def zscore(values, pool):  # normalised over the group's pool of values of the same kind
        std = math.sqrt(np.var(pool) + 1e-8) if len(pool) > 1 else 1.0
        return [(v - np.mean(pool)) / (std + cfg.adv_eps) for v in values]

    outcome_z, turn_z = [0.0] * len(outcomes), [[] for _ in outcomes]
    for g in set(groups):  # 1. z-scores within each group (one question's rollouts), each kind on its own
        members = [i for i, h in enumerate(groups) if h == g]
        pool = [r for i in members for r in turn_rewards[i] if r is not None]  # every turn reward of the group
        for i in members:
            outcome_z[i] = zscore([outcomes[i]], [outcomes[k] for k in members])[0]
            turn_z[i] = zscore([r for r in turn_rewards[i] if r is not None], pool)
    turn_abs = [abs(z) for zs in turn_z for z in zs]  # 2. rescale the turn rewards, over the batch
    scale = min(10.0, max(0.3, np.mean(np.abs(outcome_z))) / ((np.mean(turn_abs) if turn_abs else 1.0) + cfg.adv_eps))
    advantages = []  # one value per turn of each rollout
    for rs, zs, oz in zip(turn_rewards, turn_z, outcome_z):
        normalised = iter(z * scale for z in zs)
        positions = [None if r is None else next(normalised) for r in rs] + [oz]  # the outcome sits on the last turn
        running, per_turn = 0.0, []
        for value in reversed(positions):  # 3. discount backwards over the reward positions
            if value is not None:
                running = value + cfg.gamma * running
            per_turn.append(running)  # a turn without a reward of its own gets the next position's advantage
        advantages.append(per_turn[::-1])
    return advantages

# %% cell 28
turn_rewards = [turn_reward(e) for e in group]
outcomes = [outcome_reward(e) for e in group]
advantages = turn_advantages(turn_rewards, outcomes, [e.group for e in group])
assert [len(a) for a in advantages] == [e.num_turns for e in group], "one advantage per turn of every rollout"
assert all(math.isfinite(a) for row in advantages for a in row), "an advantage is a finite number"
library = worked_example.library_turn_advantages(
    group, turn_rewards, outcomes, cfg, tokenizer.convert_tokens_to_ids("<|im_end|>"), mode="scaled_separate"
)
if cfg.norm_mode != "scaled_separate":
    print(f"note: norm_mode = {cfg.norm_mode}: training uses the library's rule for it, not this cell")
worked_example.advantage_table(advantages, library)

# %% cell 30
adv_frame = pd.DataFrame(advantages, index=[f"rollout {i} (outcome {o:g})" for i, o in enumerate(outcomes)])
adv_frame.columns = [f"turn {t}" for t in adv_frame.columns]
fig, ax = plt.subplots(figsize=(min(12, 2 + 0.8 * adv_frame.shape[1]), 0.6 + 0.5 * len(adv_frame)))
sns.heatmap(adv_frame, annot=True, fmt=".2f", center=0, cmap="RdBu", cbar_kws={"label": "advantage"}, ax=ax)
ax.set_title("IGPO: one advantage per turn")
fig.savefig(stage.path("example_advantages.png"), dpi=110, bbox_inches="tight")

# %% cell 32
scores = np.array([float(e.judge_score) for e in group])
grpo = (scores - scores.mean()) / (np.sqrt(scores.var() + 1e-8) + cfg.adv_eps)  # the z-scored outcome
comparison_table = pd.DataFrame(
    {
        "judge score": scores,
        "GRPO advantage (every token)": grpo,
        "IGPO advantage, first turn": [a[0] for a in advantages],
        "IGPO advantage, answer turn": [a[-1] for a in advantages],
        "IGPO advantages (min / max)": [f"{min(a):+.2f} / {max(a):+.2f}" for a in advantages],
    }
)
comparison_table.round(3)

# %% cell 34
from venus_utils.rl.stage import resume

custom_rewards = {}  # the cells of sections 3 and 4 (reward_mode grpo: the judged outcome alone)
if cfg.reward_mode == "igpo":
    custom_rewards = dict(turn_reward=turn_reward, outcome_reward=outcome_reward)
    if cfg.norm_mode == "scaled_separate":  # the rule the advantage cell writes out (DR-Venus's)
        custom_rewards["turn_advantages"] = turn_advantages
point = resume(
    stage,
    cfg,
    sft_dir,
    train_rows,
    filter_samples=filter_samples,
    max_time_minutes=max_time_minutes,
    rewards=custom_rewards,
)

# %% cell 36
from venus_utils.eval import heldout as ho
from venus_utils.eval import stats
from venus_utils.rl.stage import heldout_eval, heldout_scores

heldout, eval_settings = heldout_eval(stage, sft_dir, heldout_qa, world_dir, heldout_n, seed, device, heldout_split)
if heldout is not None:
    scored_sft = heldout_scores(
        stage, "sft", heldout, eval_settings, sft_dir=sft_dir, world_dir=world_dir, tools=tools, judge=grader
    )
    before = ho.summary(scored_sft)
    print(
        f"SFT: accuracy {before['accuracy']:.3f} [{before['ci_low']:.3f}, {before['ci_high']:.3f}] on "
        f"{before['n']} questions ({grader.kind} judge)"
    )

# %% cell 38
from venus_utils.rl.stage import filter_questions

train_rows, filter_counts = filter_questions(stage, model, tokenizer, train_rows, tools, judge_fn, cfg, filter_samples)

# %% cell 40
from venus_utils.rl.stage import train_policy

trainer = train_policy(
    stage,
    model,
    tokenizer,
    train_rows,
    cfg,
    tools,
    judge_fn,
    point,
    device=device,
    max_time_minutes=max_time_minutes,
    **custom_rewards,
)  # a finished run rerun trains nothing

# %% cell 42
metrics = pd.DataFrame(read_jsonl(stage.path("metrics.jsonl")))
steps = run_report.summarize_steps(metrics)
assert len(steps) >= min(2, cfg.max_steps), "fewer RL steps than expected"
if cfg.reward_mode == "igpo":
    assert steps["adv_nonzero_frac"].gt(0).all(), (
        "a step had only zero advantages: every rollout got the same "
        "rewards (e.g. every turn malformed and penalised); see the penalty_rate column"
    )
steps

# %% cell 44
episodes = by_tool.episodes_frame(stage.path("episodes.jsonl"))
fig = run_report.training_figure(metrics, episodes, stage.path("training.png"))

# %% cell 46
by_tool.ig_by_tool(episodes).round(3)

# %% cell 48
by_tool.advantage_by_tool(episodes).round(3)

# %% cell 50
run_report.phase_table(metrics).round(3)

# %% cell 52
from venus_utils.rl.stage import save_model

save_model(stage, trainer, tokenizer, sft_dir)
stage.path("model")

# %% cell 53
comparison = {}
if heldout is not None:
    scored_rl = heldout_scores(
        stage, "rl", heldout, eval_settings, sft_dir=sft_dir, world_dir=world_dir, tools=tools, judge=grader
    )
    comparison = ho.compare(scored_sft, scored_rl)
    print(
        f"held-out accuracy: SFT {comparison['accuracy_before']:.3f} -> RL {comparison['accuracy_after']:.3f} "
        f"({comparison['difference']:+.3f}, "
        f"95% CI [{comparison['diff_ci_low']:+.3f}, {comparison['diff_ci_high']:+.3f}], "
        f"McNemar p = {comparison['mcnemar_p']:.3g}, fixed {comparison['fixed']}, broken {comparison['broken']}): "
        f"{comparison['verdict']}"
    )

# %% cell 55
if heldout is not None:
    sft_q, rl_q = ho.per_question(scored_sft), ho.per_question(scored_rl)
    plots.accuracy_intervals(
        {"SFT": stats.accuracy_table(sft_q), "RL": stats.accuracy_table(rl_q)}, path=stage.path("heldout_accuracy.png")
    )
    display(stats.comparison_table(sft_q, rl_q))

# %% cell 57
why = run_report.why_no_gain(comparison, episodes, steps)
arms_fig = run_report.arms_figure(
    stage.run_dir, scored_sft if heldout is not None else None, stage.path("igpo_vs_grpo.png"), current=stage.dir
)
if arms_fig is None:
    print(
        "only one reward arm in this run folder; run the GRPO arm (section 3) to compare IGPO with outcome-only GRPO"
    )
why

# %% cell 60
control_comparisons = {}
if control_arm and heldout is not None:
    from venus_utils.rl.control import control_reading, train_control_arm
    from venus_utils.rl.stage import budget_flops

    control = train_control_arm(
        stage.run_dir,
        budget_flops(trainer.state.log_history, filter_counts),  # this RL run's model FLOPs: the control's budget
        offline=offline,
        train_qa=train_qa,
        heldout_qa=heldout_qa,
        heldout_n=heldout_n,
        heldout_split=heldout_split,
        seed=seed,
        device=device,
        judge=grader,
        tools=tools,
        profile=profile,
    )
    scored_control = ho.load_scored(stage.run_dir / ho.SCORED[ho.CONTROL])
    rl_label = f"RL ({'IGPO' if cfg.reward_mode == 'igpo' else 'GRPO'})"
    three = {"SFT": scored_sft, ho.CONTROL: scored_control, rl_label: scored_rl}
    control_comparisons = ho.compare_to(three)  # each against SFT, and RL against more SFT
    plots.accuracy_intervals(
        {label: stats.accuracy_table(ho.per_question(t)) for label, t in three.items()},
        path=stage.path("rl_vs_more_sft.png"),
    )
    plt.show()
    display(
        pd.DataFrame(
            {
                "value": {
                    "SFT stopped at step": control["start_step"],
                    "control: SFT steps": control["steps"],
                    "control: learning rate, first step -> floor": (
                        f"{control['learning_rate_start']:.3g} -> {control['learning_rate_floor']:.3g}"
                    ),
                    "RL model FLOPs (the budget)": f"{control['budget_flops']:.3g}",
                    "control model FLOPs (counted)": f"{control['train_flops']:.3g}",
                    "control / RL compute": control["flops_vs_budget"],
                }
            }
        )
    )
    display(ho.comparison_frame(control_comparisons))
    print(control_reading(control_comparisons, control, rl_label))  # this run's numbers, read
elif not control_arm:
    print("control_arm is False: no control in this run (set it to True to pair RL with more SFT)")
else:
    print("no held-out questions in this run (heldout_n 0): nothing to compare the control on")

# %% cell 62
rft_comparisons = {}
if rft_arm and heldout is not None:
    from venus_utils.rl.rejection import train_rft_arm
    from venus_utils.rl.stage import budget_flops

    rft = train_rft_arm(
        stage.run_dir,
        budget_flops(trainer.state.log_history, filter_counts),  # this RL run's model FLOPs (its filter's too)
        cfg,
        offline=offline,
        train_qa=train_qa,
        train_questions=train_questions,
        heldout_qa=heldout_qa,
        heldout_n=heldout_n,
        heldout_split=heldout_split,
        rl_log=trainer.state.log_history,  # how many rollouts RL trained on (rollouts="trained") or rolled out
        rollouts=rft_rollouts,
        device=device,
        judge=grader,
        tools=tools,
        profile=profile,
    )
    rl_label = f"RL ({'IGPO' if cfg.reward_mode == 'igpo' else 'GRPO'})"
    sampling = rft["sampling"]
    print(f"sampled {sampling['rollouts']} rollouts, {sampling['right']} judged right, {sampling['kept']} kept")
if rft_arm and heldout is not None and rft["steps"]:
    arms = {"SFT": scored_sft, ho.RFT: ho.load_scored(stage.run_dir / ho.SCORED[ho.RFT]), rl_label: scored_rl}
    rft_comparisons = ho.compare_to(arms)  # each against SFT, and RL against rejection sampling
    display(
        pd.DataFrame(
            {
                "value": {
                    "rollouts sampled (RL's questions)": sampling["rollouts"],
                    "judged right": f"{sampling['right']} ({sampling['right_share']:.0%})",
                    "kept for fine-tuning": sampling["kept"],
                    "dropped (reason: count)": sampling["dropped"],
                    "fine-tuning steps": rft["steps"],
                    "sampling FLOPs / fine-tuning FLOPs": f"{rft['sampling_flops']:.3g} / {rft['finetune_flops']:.3g}",
                    "rejection sampling / RL compute": rft["flops_vs_budget"],
                }
            }
        )
    )
    display(ho.comparison_frame(rft_comparisons))
elif rft_arm and heldout is not None:
    print(rft["note"])  # no right sample to fine-tune on: the arm is the SFT model
elif not rft_arm:
    print("rft_arm is False: no rejection-sampling arm in this run (set it to True to pair RL with it)")
else:
    print("no held-out questions in this run (heldout_n 0): nothing to compare rejection sampling on")

# %% cell 65
from venus_utils.rl.stage import summary_figures

summary = stage.finish(
    **summary_figures(
        trainer,
        cfg,
        point,
        sft_dir=sft_dir,
        train_file=train_file,
        questions=filter_counts,
        judge=grader.describe(),
        comparison=comparison,
    ),
    why={k: float(v) for k, v in why["value"].items()},
    control_comparisons=control_comparisons,
    rft_comparisons=rft_comparisons,
)
against_control = control_comparisons.get(f"{rl_label} vs {ho.CONTROL}", {}) if control_comparisons else {}
pd.DataFrame(
    {
        "value": {
            "SFT model": str(sft_dir),
            "RL steps": summary["steps"],
            "reward mode": cfg.reward_mode,
            "learning rate": cfg.learning_rate,
            "held-out accuracy (SFT)": comparison.get("accuracy_before"),
            "held-out accuracy (RL)": comparison.get("accuracy_after"),
            "paired difference": comparison.get("difference"),
            "McNemar p": comparison.get("mcnemar_p"),
            "verdict": comparison.get("verdict"),
            "held-out accuracy (more SFT, the control)": against_control.get("accuracy_before"),
            "RL vs more SFT: paired difference": against_control.get("difference"),
            "RL vs more SFT: McNemar p": against_control.get("mcnemar_p"),
            "RL model (next notebooks read this)": str(stage.path("model")),
        }
    }
)
