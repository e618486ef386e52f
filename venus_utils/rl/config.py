"""IGPOConfig: every knob of the RL stage, with DR-Venus's values as defaults.

Defaults follow ``RL/train_igpo.sh`` of inclusionAI/DR-Venus and the verl config it overrides
(``RL/verl/trainer/config/ppo_trainer.yaml``).  The smaller profiles (smoke / cpu / colab) override only the
sizes (steps, group size, turns, lengths), never the algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ..core.defaults import stage_defaults
from ..core.paths import RL_STAGE
from ..core.perf import PRECISIONS, uses_bf16
from ..core.protocol import MAX_TURNS, RL_CONTEXT_TOKENS, RL_TOKENS_PER_TURN, check_system_prompt_style
from ..core.validation import (
    AT_LEAST_1,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    Range,
    StageSettings,
)

INFO_GAIN_TYPES = ("log_prob_diff", "prob_diff")
#: igpo: DR-Venus (IG turn rewards + format penalties + judged outcome); grpo: the judged outcome alone
REWARD_MODES = ("igpo", "grpo")
NORM_MODES = ("joint", "separate", "scaled_separate", "raw_ig")
#: over which turns a group's information gains are z-scored: all of them (DR-Venus) or those of the same tool
IG_NORMS = ("group", "tool")
#: how many rollouts rejection sampling (:mod:`.rejection`) draws, the ``rft_rollouts`` parameter: ``trained``, as
#: many as the IGPO arm trained on (its steps x ``prompts_per_step`` groups); ``rolled_out``, as many as it rolled out,
#: the groups dynamic sampling dropped and refilled included (the stronger baseline: the same sampling, then
#: fine-tuning instead of the policy gradient)
RFT_ROLLOUTS = ("trained", "rolled_out")
#: colocate: TRL's vLLM engine inside each training process | server: a separate OpenAI-compatible vLLM server
VLLM_MODES = ("colocate", "server")

#: The pseudo answer scored at each turn boundary; the context already ends with ``<think>\n``.
PSEUDO_ANSWER = "Now there's enough information to answer\n</think>\n<answer>\n{gt}\n</answer><|im_end|>"


#: The lesson's values (venus_utils/core/defaults.py, notebook 04's parameters cell). A field whose DR-Venus value
#: the lesson runs with too takes it from there, so that each value is written once.
LESSON = stage_defaults(RL_STAGE)


@dataclass
class IGPOConfig(StageSettings):
    LABEL = "RL"  # "unknown RL setting(s) ..." (a class attribute, not a setting)

    # --- which rewards (the IGPO-against-GRPO comparison) ------------------------------------------------------
    reward_mode: str = field(
        default=LESSON["reward_mode"],
        metadata={
            "choices": REWARD_MODES,
            "help": "igpo (DR-Venus): information-gain turn rewards, "
            "format penalties and the judged outcome | grpo: the judged outcome only (no turn "
            "rewards, no format penalties), group-normalised and given to every token.",
        },
    )
    # --- information gain (DR-Venus: RL/verl/utils/reward_score/info_gain.py) ----------------------------------
    info_gain_type: str = field(
        default=LESSON["info_gain_type"],
        metadata={
            "choices": INFO_GAIN_TYPES,
            "help": "log_prob_diff (DR-Venus: difference "
            "of mean GT log-probs) or prob_diff (IGPO paper: difference of exp(mean log-prob)).",
        },
    )
    ig_tool_filter: str | None = field(
        default=LESSON["ig_tool_filter"],
        metadata={
            "help": "Score a boundary only after a turn that "
            "called one of these tools (comma separated); None or 'all' scores every turn."
        },
    )
    ig_chunk_size: int = field(
        default=8192,
        metadata={
            "range": AT_LEAST_1,
            "help": "Tokens per forward chunk when the KV cache of the trajectory is built (IGPO_PHASE1_CHUNK_SIZE).",
        },
    )
    pseudo_answer: str = field(
        default=PSEUDO_ANSWER,
        metadata={
            "help": "Pseudo response appended at each boundary; {gt} is replaced by the first ground-truth alias."
        },
    )
    # --- turn format penalty (DR-Venus: RL/verl/utils/reward_score/format_checker.py) --------------------------
    use_format_penalty: bool = field(
        default=LESSON["use_format_penalty"], metadata={"help": "Replace a malformed turn's reward by the penalty."}
    )
    format_penalty: float = field(default=-1.0, metadata={"help": "-1.0 x format_penalty_scale (1.0)."})
    search_cost: float = field(
        default=LESSON["search_cost"],
        metadata={
            "range": NON_NEGATIVE,
            "help": "Subtracted from the turn reward of every search call (0: none, DR-Venus); a turn reward, so "
            "reward_mode=grpo refuses it (notebook 04's turn-reward cell shows where it applies).",
        },
    )
    # --- advantages (DR-Venus: RL/verl/trainer/ppo/info_gain_advantage.py) -------------------------------------
    norm_mode: str = field(
        default=LESSON["norm_mode"],
        metadata={"choices": NORM_MODES, "help": "joint | separate | scaled_separate | raw_ig."},
    )
    ig_norm: str = field(
        default=LESSON["ig_norm"],
        metadata={
            "choices": IG_NORMS,
            "help": "group: a turn's IG is z-scored over all IG turns of its group (DR-Venus) | tool: over the "
            "group's turns that called the same tool (a visit against visits, a search against searches), so a "
            "tool whose turns lower the answer's log-probability on average (reading a page of namesakes) is not "
            "pushed down as a whole (separate / scaled_separate norm_mode only).",
        },
    )
    gamma: float = field(
        default=0.95, metadata={"range": FRACTION, "help": "Discount over reward positions, applied backwards."}
    )
    adv_eps: float = field(default=1e-6, metadata={"range": POSITIVE, "help": "epsilon in (r - mean) / (std + eps)."})
    # --- policy loss -------------------------------------------------------------------------------------------
    clip_ratio_low: float = field(
        default=0.2, metadata={"trl": "epsilon", "range": NON_NEGATIVE, "help": "PPO clip, lower side."}
    )
    clip_ratio_high: float = field(
        default=0.2, metadata={"trl": "epsilon_high", "range": NON_NEGATIVE, "help": "PPO clip, upper side."}
    )
    dual_clip: float = field(
        default=3.0, metadata={"range": Range(1), "help": "Dual-clip constant c for negative advantages."}
    )
    kl_coef: float = field(
        default=LESSON["kl_coef"],
        metadata={"range": NON_NEGATIVE, "help": "k3 (low_var_kl) KL loss coefficient to the reference."},
    )
    # --- optimisation (DR-Venus: RL/train_igpo.sh) -------------------------------------------------------------
    learning_rate: float = field(
        default=LESSON["learning_rate"],
        metadata={"trl": "learning_rate", "range": POSITIVE, "help": "AdamW, constant, no warm-up."},
    )
    weight_decay: float = field(
        default=0.01, metadata={"trl": "weight_decay", "range": NON_NEGATIVE, "help": "AdamW weight decay."}
    )
    max_grad_norm: float = field(
        default=1.0, metadata={"trl": "max_grad_norm", "range": NON_NEGATIVE, "help": "Gradient-norm clip."}
    )
    gradient_checkpointing: bool = field(
        default=True,
        metadata={
            "trl": "gradient_checkpointing",
            "help": "Recompute activations in the update (DR-Venus: on); off is faster where memory allows.",
        },
    )
    precision: str = field(
        default=LESSON["precision"],
        metadata={
            "choices": PRECISIONS,
            "help": "auto | bf16 | fp32: the update's forward and backward and the reference log-probs under bf16 "
            "autocast (fp32 master weights and optimizer), or plain fp32. auto: bf16 on CUDA and on a CPU with "
            "native bf16 dot products (avx512_bf16 / AMX), else fp32. Generation and the information gain keep the "
            "model's own dtype.",
        },
    )
    prompts_per_step: int = field(
        default=16, metadata={"range": AT_LEAST_1, "help": "data.train_batch_size: questions per RL step."}
    )
    num_generations: int = field(
        default=8,
        metadata={"trl": "num_generations", "range": AT_LEAST_1, "help": "Group size n: rollouts per question."},
    )
    micro_batch_size: int = field(
        default=1,
        metadata={
            "trl": "per_device_train_batch_size",
            "range": AT_LEAST_1,
            "help": "Trajectories per forward/backward.",
        },
    )
    max_steps: int = field(
        default=60,
        metadata={
            "trl": "max_steps",
            "range": AT_LEAST_1,
            "help": "RL steps (DR-Venus: one epoch of ~1K prompts / 16).",
        },
    )
    # --- dynamic sampling (DAPO; off in DR-Venus's train_igpo.sh) ----------------------------------------------
    dynamic_sampling: bool = field(
        default=LESSON["dynamic_sampling"],
        metadata={
            "help": "Drop the groups whose rollouts all got the same judge score (all right or all wrong: no "
            "outcome advantage) and refill the step with groups of new questions, as DAPO does; one process only."
        },
    )
    max_sampling_rounds: int = field(
        default=LESSON["max_sampling_rounds"],
        metadata={
            "range": AT_LEAST_1,
            "help": "dynamic_sampling: rollout rounds per step at most (each rolls out prompts_per_step questions); "
            "a step still short of groups with signal after them fills up with the others "
            "(DAPO: max_num_gen_batches).",
        },
    )
    save_steps: int = field(
        default=LESSON["save_steps"],
        metadata={"trl": "save_steps", "range": AT_LEAST_1, "help": "Checkpoint every this many steps."},
    )
    save_total_limit: int | None = field(
        default=LESSON["save_total_limit"],
        metadata={
            "trl": "save_total_limit",
            "range": AT_LEAST_1,
            "help": "Keep only the newest this many checkpoints "
            "(each holds the optimizer state: tens of GB at 4B); None keeps all.",
        },
    )
    lora_r: int = field(
        default=LESSON["lora_r"],
        metadata={
            "range": NON_NEGATIVE,
            "help": "0 = full fine-tuning (DR-Venus); > 0 trains a LoRA adapter "
            "and the reference is the adapter-disabled base.",
        },
    )
    # --- rollout (DR-Venus: RL/scrl/llm_agent/dr_agent_loop.py, RL/train_igpo.sh) ------------------------------
    temperature: float = field(
        default=1.0,
        metadata={"trl": "temperature", "range": POSITIVE, "help": "Sampling temperature (IG logits use it too)."},
    )
    top_p: float = field(
        default=0.95, metadata={"trl": "top_p", "range": Range(0, 1, low_open=True), "help": "Nucleus sampling."}
    )
    top_k: int = field(default=-1, metadata={"range": Range(1, also=(-1,)), "help": "-1 = off."})
    max_turns: int = field(
        default=MAX_TURNS,
        metadata={"range": AT_LEAST_1, "help": "Assistant turns per episode (DR-Venus jitters +-4)."},
    )
    max_tokens_per_turn: int = field(
        default=RL_TOKENS_PER_TURN,
        metadata={"trl": "max_completion_length", "range": AT_LEAST_1, "help": "Generation limit per assistant turn."},
    )
    max_context_tokens: int = field(
        default=RL_CONTEXT_TOKENS,
        metadata={
            "trl_colocate": "vllm_max_model_length",
            "range": AT_LEAST_1,
            "help": "max_model_len of the rollout engine.",
        },
    )
    system_prompt_style: str = field(
        default=LESSON["system_prompt_style"],
        metadata={
            "help": "Rollout system prompt: dr-venus (exact) | compact (offline profiles; must match the SFT data's)."
        },
    )
    use_vllm: bool = field(
        default=LESSON["use_vllm"], metadata={"help": "Roll out with vLLM when it is installed (GPU)."}
    )
    vllm_mode: str = field(
        default=LESSON["vllm_mode"],
        metadata={
            "choices": VLLM_MODES,
            "help": "colocate: TRL's vLLM engine inside each training "
            "process | server: a separate OpenAI-compatible vLLM server (vllm_server_base_url).",
        },
    )
    vllm_server_base_url: str | None = field(
        default=LESSON["vllm_server_base_url"],
        metadata={
            "trl_server": "vllm_server_base_url",
            "help": "server mode: http://host:port of `trl vllm-serve` (weights synced each step) or `vllm serve`.",
        },
    )
    vllm_server_sync_weights: bool = field(
        default=LESSON["vllm_server_sync_weights"],
        metadata={
            "help": "server mode: push the policy to the "
            "server every step (needs `trl vllm-serve`); False: a plain `vllm serve` "
            "whose weights never change (off-policy rollouts)."
        },
    )
    vllm_tensor_parallel_size: int = field(
        default=LESSON["vllm_tensor_parallel_size"],
        metadata={
            "trl_colocate": "vllm_tensor_parallel_size",
            "range": AT_LEAST_1,
            "help": "colocate mode: vLLM tensor parallelism (DR-Venus: TP 4); must divide the number of processes.",
        },
    )
    vllm_gpu_memory_utilization: float = field(
        default=LESSON["vllm_gpu_memory_utilization"],
        metadata={
            "trl_colocate": "vllm_gpu_memory_utilization",
            "range": Range(0, 1, low_open=True),
            "help": "colocate mode: GPU memory share of the vLLM engine (TRL's default; the rest trains).",
        },
    )
    seed: int = field(
        default=LESSON["seed"], metadata={"trl": "seed", "range": SEED, "help": "Seed for sampling and data order."}
    )

    def __post_init__(self) -> None:
        self.check_settings()
        if self.ig_norm == "tool" and self.norm_mode not in ("separate", "scaled_separate"):
            raise ValueError(
                f"ig_norm='tool' z-scores IG on its own: norm_mode separate or scaled_separate, not {self.norm_mode!r}"
            )
        if self.reward_mode == "grpo" and self.search_cost:
            raise ValueError(
                f"search_cost={self.search_cost} is a turn reward, and reward_mode=grpo has none: set "
                "search_cost=0 for the GRPO arm"
            )

        check_system_prompt_style(self.system_prompt_style)
        if self.use_vllm and self.vllm_mode == "server" and not self.vllm_server_base_url:
            raise ValueError("vllm_mode='server' needs vllm_server_base_url (e.g. http://127.0.0.1:8000)")
        if "{gt}" not in self.pseudo_answer:
            raise ValueError("pseudo_answer must contain the placeholder {gt}")
        if (self.prompts_per_step * self.num_generations) % self.micro_batch_size:
            raise ValueError(
                f"micro_batch_size={self.micro_batch_size} must divide prompts_per_step x num_generations "
                f"= {self.prompts_per_step * self.num_generations}"
            )

    def trl_values(self, key: str = "trl") -> dict:
        """The settings TRL's ``GRPOConfig`` takes as they are, under TRL's names: each field's metadata names its TRL
        field (``trl``; ``trl_colocate``: only with TRL's colocated vLLM engine; ``trl_server``: only with a vLLM
        server), so a setting added with one is passed on without a hand-written list."""
        return {f.metadata[key]: getattr(self, f.name) for f in fields(self) if key in f.metadata}

    def uses_bf16(self, device: str) -> bool:
        """Whether the update and the scoring forwards on ``device`` run under bf16 autocast (:attr:`precision`)."""
        return uses_bf16(self.precision, device)

    @property
    def trajectories_per_step(self) -> int:
        return self.prompts_per_step * self.num_generations
