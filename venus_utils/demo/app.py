"""The Gradio web demo: settings, a live research feed of step cards, the final-answer panel.

    python -m venus_utils.demo [--port 7860] [--host 127.0.0.1] [--concurrency 2] [--allow-any-endpoint]

Same layout as DR-Venus's web demo (settings on the left; question, Start/Stop, the "Research Process"
feed and the "Final Answer" panel on the right), without its defects: every browser session has its own
run, Stop stops it, keys typed in the UI are handed to that run only, endpoint URLs are parsed rather than
character-stripped, the server binds 127.0.0.1 unless told otherwise (and warns when it does not: there is
no authentication), concurrent users wait in a queue, input sizes are bounded, a cancelled or abandoned run
is stopped and holds its run slot until its thread has ended, and the server contacts only the configured
endpoints or loopback addresses for the URLs typed in the UI unless started with ``--allow-any-endpoint``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import gradio as gr
import httpx

from ..core.qa_files import load_questions
from ..core.stage import best_model
from .cards import render_html, steps_from_messages
from .runs import (
    DEMO_FALLBACK,
    FORM_FIELDS,
    MAX_QUESTION_CHARS,
    MAX_STEPS_LIMIT,
    DemoSettings,
    InputError,
    Run,
    RunFn,
    RunSlots,
    agent_run_fn,
    agent_settings,
    check_endpoint,
    check_folder,
    check_question,
    hide_secrets,
    is_loopback,
    model_folder,
    served_folders,
)

POLL_S = 0.5  # how often the feed refreshes while a run is going
MODEL_NAMES = {
    "rl": "RL model",
    "sft": "SFT model",
    "base": "untrained base model",
}  # venus_utils.core.stage.MODEL_STAGES
TERMINAL = ("Completed", "Stopped", "Error")


def _answer_markdown(run: Run | None) -> str:
    if run is None:
        return "*No answer yet.*"
    _, result, status = run.snapshot()
    if run.error:
        return f"**Error:** `{run.error}`"
    if not result:
        return "*Researching…*" if status in ("Running", "Starting") else "*No answer.*"
    answer = result.get("prediction") or "*(no answer)*"
    rows = [
        ("termination", result.get("termination", "")),
        ("turns", result.get("turns", "")),
        ("tool calls", result.get("tool_call_count", "")),
        ("elapsed", f"{run.elapsed:.1f} s"),
        ("system prompt", (result.get("agent_settings") or {}).get("system_prompt_style", "")),
    ]
    table = (
        "| "
        + " | ".join(k for k, _ in rows)
        + " |\n|"
        + "---|" * len(rows)
        + "\n| "
        + " | ".join(str(v) for _, v in rows)
        + " |"
    )
    return f"**Answer:** {answer}\n\n{table}"


def _status_markdown(run: Run | None) -> str:
    if run is None:
        return "Status: **Idle**"
    return f"Status: **{run.status}** · {len(steps_from_messages(run.snapshot()[0])) - 1} steps · {run.elapsed:.0f} s"


def _shown(folder: Path) -> str:
    """A folder as the page shows it: relative to the working directory when it lies inside it."""
    try:
        return str(Path(folder).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(folder)


class DemoServer:
    """The runs of every browser session (keyed by Gradio's session hash) and the Blocks app."""

    def __init__(
        self,
        run_fn: RunFn | None = None,
        defaults: DemoSettings | None = None,
        concurrency: int = 2,
        max_queue: int = 16,
        allow_any_endpoint: bool = False,
        exposed: bool = False,
        allow_folders: list[str] | tuple[str, ...] = (),
    ):
        self.run_fn = run_fn or agent_run_fn
        self.defaults = defaults or DemoSettings()
        self.concurrency, self.max_queue = concurrency, max_queue
        self.slots = RunSlots(concurrency)  # counts runs until their threads end (Gradio's limit frees on cancel)
        self.allow_any_endpoint = allow_any_endpoint
        self.exposed = exposed  # bound to a non-loopback address: visitors may not reach this machine's services
        self.endpoints = [u for u in (self.defaults.endpoint, self.defaults.summary_base) if u]  # the operator's
        # an exposed demo reads only the folders it was started with (None: any folder, a loopback demo)
        self.folders = served_folders(self.defaults, allow_folders) if exposed else None
        self.runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def check_folders(self, settings: DemoSettings) -> None:
        """Refuse a checkpoint or world folder outside :attr:`folders` (an exposed demo only)."""
        if settings.model == "checkpoint":
            check_folder(settings.checkpoint, self.folders, "checkpoint folder")
        if settings.tools == "local":
            check_folder(settings.world_dir, self.folders, "offline world folder")

    def check_url(self, url: str) -> str:
        """The normalised base URL when the server may contact it for a user (see :func:`runs.check_endpoint`)."""
        return check_endpoint(url, self.endpoints, self.allow_any_endpoint, allow_loopback=not self.exposed)

    # ---- handlers ------------------------------------------------------------------------------------
    def _session(self, request: Any) -> str:
        return getattr(request, "session_hash", None) or "default"

    def model_defaults(self, model: str, checkpoint: str) -> tuple[int | None, str]:
        """``(turns, note)`` for a model choice: the turns a run of it takes unless the user moves the slider (the
        model's own, from its ``venus_agent.json``, unless the operator fixed them with ``--max-steps``) and a note
        on the prompt and limits "the model's own" means for it (None and the reason when it cannot be told)."""
        try:
            settings = replace(
                self.defaults,
                model=model,
                checkpoint=checkpoint,
                system_prompt_style="auto",
                extra=dict(self.defaults.extra),
            )
            self.check_folders(settings)
            found = agent_settings(settings, model_folder(settings))
        except InputError as exc:
            return None, f"<small>{exc}</small>"
        return found.max_turns, f"<small>This model: {found.describe()}.</small>"

    def model_settings(self, model: str, checkpoint: str) -> tuple[Any, str]:
        """The model choice changed: move the turn slider to :meth:`model_defaults`' turns, show its note."""
        turns, note = self.model_defaults(model, checkpoint)
        return (gr.update() if turns is None else gr.update(value=turns)), note

    def start(
        self,
        question,
        model,
        checkpoint,
        endpoint,
        endpoint_model,
        endpoint_key,
        tools,
        world_dir,
        serper_key,
        jina_key,
        summary_base,
        summary_key,
        summary_model,
        max_steps,
        system_prompt_style="auto",
        request: gr.Request = None,
    ):
        """Generator: validate, start this session's run when a run slot is free, then stream (feed, answer,
        status) until it ends.  A client that cancels or goes away closes the generator: that stops the run.
        ``system_prompt_style``: auto (the chosen model's own), dr-venus or compact."""
        try:
            question = check_question(question)
            values = (model, checkpoint, endpoint, endpoint_model, endpoint_key, tools, world_dir, serper_key)
            values += (jina_key, summary_base, summary_key, summary_model, max_steps, system_prompt_style)
            form = dict(zip(FORM_FIELDS, values))  # the arguments, in FORM_FIELDS' order (a test checks it)
            settings = replace(self.defaults, **form, extra=dict(self.defaults.extra)).validated()
            self.check_folders(settings)
            if settings.model == "endpoint":
                self.check_url(settings.endpoint)
            if settings.tools == "web" and settings.summary_base:
                self.check_url(settings.summary_base)
        except InputError as exc:
            yield render_html([]), "*No answer yet.*", f"Status: **Error** · {exc}"
            return
        session = self._session(request)
        run = Run(question, settings, self.run_fn)
        with self._lock:
            previous = self.runs.get(session)
            if previous is not None and not previous.done:
                previous.stop()
            self.runs[session] = run
        try:
            while not self.slots.start(run, timeout=POLL_S):
                yield (
                    render_html(steps_from_messages(run.snapshot()[0])),
                    "*Waiting for a free run slot…*",
                    f"Status: **Waiting** · {self.slots.live()} runs going, at most {self.slots.limit} at a time",
                )
            while not run.done:
                yield render_html(steps_from_messages(run.snapshot()[0])), _answer_markdown(run), _status_markdown(run)
                time.sleep(POLL_S)
            yield render_html(steps_from_messages(run.snapshot()[0])), _answer_markdown(run), _status_markdown(run)
        finally:
            if not run.done:  # the client cancelled the event or went away (Gradio closed this generator)
                run.stop()

    def stop(self, request: gr.Request = None):
        run = self.runs.get(self._session(request))
        if run is None or run.done:
            return _status_markdown(run)
        run.stop()
        return _status_markdown(run)

    def forget(self, request: gr.Request = None):
        """A closed tab stops its run."""
        with self._lock:
            run = self.runs.pop(self._session(request), None)
        if run is not None:
            run.stop()

    def check_service(self, endpoint: str, endpoint_key: str) -> str:
        """``GET {base}/models`` on the endpoint (DR-Venus's "Check Service"), if the server may contact it."""

        try:
            base = self.check_url(endpoint)
        except InputError as exc:
            return f"❌ {exc}"
        key = (endpoint_key or "").strip()[:512]
        try:
            response = httpx.get(
                f"{base}/models", headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=5.0
            )
            response.raise_for_status()
            names = [m.get("id", "?") for m in response.json().get("data", [])]
            return hide_secrets(f"✅ {base} serves: {', '.join(names) or '(no models listed)'}", [key])
        except Exception as exc:  # unreachable, 401, not an OpenAI server...
            return "❌ " + hide_secrets(f"{base}: {type(exc).__name__}: {exc}", [key])

    def run_model_label(self) -> str:
        """The label of the "run folder's model" choice: which model that is (RL, SFT or the untrained base) and
        where it lies, so the page says what it loaded."""
        try:
            label, folder = best_model(self.defaults.extra.get("run_dir", "runs/smoke"))
        except FileNotFoundError:
            return "this run's model (none found: run the notebooks first)"
        return f"this run's {MODEL_NAMES.get(label, label)} ({_shown(folder)})"

    def world_note(self) -> str:
        """What the offline agent can answer, with one of its world's questions to try (empty for the web tools)."""
        if self.defaults.tools != "local":
            return ""
        example = ""
        try:
            questions = load_questions(Path(self.defaults.world_dir) / "qa" / "test.parquet")
            example = f" Try one of its questions: *{questions['question'].iloc[0]}*"
        except (OSError, ValueError, KeyError, IndexError):
            pass
        return (
            "<small>**The offline agent knows only its offline world.** Its model learned to research in this "
            "recipe's generated world, and the local tools search only that world's pages: asked about anything "
            "else (a novel, a real person), it still answers with a name from its world, confidently."
            f"{example}</small>"
        )

    # ---- layout --------------------------------------------------------------------------------------
    def build(self) -> gr.Blocks:
        """The page: the settings beside the run (question, start / stop, the research feed, the answer)."""
        with gr.Blocks(title="venus-recipe · deep-research demo", analytics_enabled=False) as demo:
            gr.Markdown("## venus-recipe · deep-research agent\nAsk a question and watch the agent search and read.")
            with gr.Row():
                with gr.Column(scale=1, min_width=280):
                    ui = self._settings_panel()
                with gr.Column(scale=3):
                    ui.update(self._run_panel())
            self._wire(demo, ui)
        demo.queue(max_size=self.max_queue, default_concurrency_limit=self.concurrency)
        return demo

    def _settings_panel(self) -> dict[str, Any]:
        """The settings column's components, by name: model, tools and their keys, system prompt, turn limit."""
        d = self.defaults
        start_turns, model_note = self.model_defaults(d.model, d.checkpoint)
        start_turns = start_turns or d.max_steps or DEMO_FALLBACK["max_turns"]
        ui: dict[str, Any] = {}
        gr.Markdown("### Settings")
        ui["model"] = gr.Radio(
            [
                (self.run_model_label(), "tiny"),
                ("trained checkpoint", "checkpoint"),
                ("OpenAI-compatible endpoint", "endpoint"),
            ],
            value=d.model,
            label="Model",
            elem_id="model",
        )
        ui["checkpoint"] = gr.Textbox(d.checkpoint, label="Checkpoint folder", max_length=512)
        ui["endpoint"] = gr.Textbox(
            d.endpoint, label="Endpoint URL", placeholder="http://127.0.0.1:6001/v1", max_length=512
        )
        ui["endpoint_model"] = gr.Textbox(d.endpoint_model, label="Served model name", max_length=512)
        ui["endpoint_key"] = gr.Textbox("", label="Endpoint API key", type="password", max_length=512)
        ui["check"] = gr.Button("Check service", size="sm")
        ui["service"] = gr.Markdown("")
        ui["tools"] = gr.Radio(
            [("local (offline world)", "local"), ("web (Serper + Jina)", "web")],
            value=d.tools,
            label="Tools",
            elem_id="tools",
        )
        ui["world_dir"] = gr.Textbox(d.world_dir, label="Offline world folder", max_length=512)
        with gr.Accordion("Web tool keys", open=False):
            ui["serper_key"] = gr.Textbox("", label="Serper key", type="password", max_length=512)
            ui["jina_key"] = gr.Textbox("", label="Jina key", type="password", max_length=512)
            ui["summary_base"] = gr.Textbox(d.summary_base, label="Summary model URL", max_length=512)
            ui["summary_key"] = gr.Textbox("", label="Summary model key", type="password", max_length=512)
            ui["summary_model"] = gr.Textbox(d.summary_model, label="Summary model name", max_length=512)
        ui["prompt_style"] = gr.Radio(
            [("the model's own", "auto"), ("DR-Venus (exact)", "dr-venus"), ("compact (offline profiles)", "compact")],
            value=d.system_prompt_style,
            label="System prompt",
            elem_id="system-prompt",
        )
        ui["max_steps"] = gr.Slider(1, MAX_STEPS_LIMIT, value=start_turns, step=1, label="Max steps")
        ui["note"] = gr.Markdown(model_note, elem_id="model-settings")
        return ui

    def _run_panel(self) -> dict[str, Any]:
        """The run column's components, by name: the question, start / stop, status, the feed and the answer."""
        ui: dict[str, Any] = {}
        ui["question"] = gr.Textbox(
            label="Question",
            lines=3,
            max_length=MAX_QUESTION_CHARS,
            elem_id="question",
            placeholder="What would you like to research?",
        )
        with gr.Row():
            ui["start"] = gr.Button("Start", variant="primary", elem_id="start")
            ui["stop"] = gr.Button("Stop", variant="stop", elem_id="stop")
        gr.Markdown(self.world_note(), elem_id="world-note")
        ui["status"] = gr.Markdown(_status_markdown(None), elem_id="status")
        gr.Markdown("### Research process")
        ui["feed"] = gr.HTML(render_html([]), elem_id="feed")
        with gr.Accordion("Final answer", open=True):
            ui["answer"] = gr.Markdown("*No answer yet.*", elem_id="final-answer")
        return ui

    def _wire(self, demo: gr.Blocks, ui: dict[str, Any]) -> None:
        """The events: a model choice updates the turn limit and its note; Start (or Enter) runs :meth:`start` with
        :data:`START_INPUTS`; Stop, Check service and a closed tab."""
        inputs = [ui[name] for name in START_INPUTS]
        outputs = [ui["feed"], ui["answer"], ui["status"]]
        chosen, limits = [ui["model"], ui["checkpoint"]], [ui["max_steps"], ui["note"]]
        ui["model"].change(self.model_settings, chosen, limits, concurrency_limit=None)
        ui["checkpoint"].blur(self.model_settings, chosen, limits, concurrency_limit=None)
        for event in (ui["start"].click, ui["question"].submit):
            event(
                self.start,
                inputs,
                outputs,
                concurrency_limit=self.concurrency,
                concurrency_id="runs",
                show_progress="hidden",
            )
        ui["stop"].click(self.stop, None, [ui["status"]], concurrency_limit=None, queue=False)
        ui["check"].click(
            self.check_service, [ui["endpoint"], ui["endpoint_key"]], [ui["service"]], concurrency_limit=None
        )
        demo.unload(self.forget)


#: the components :meth:`DemoServer.start` takes, in the order of its arguments: the question, then the form's
#: fields (:data:`venus_utils.demo.runs.FORM_FIELDS`; the prompt style's component is named ``prompt_style``)
START_INPUTS = ("question", *("prompt_style" if f == "system_prompt_style" else f for f in FORM_FIELDS))


def exposure_warning(host: str, allow_any_endpoint: bool = False) -> str | None:
    """What to tell the operator when the demo binds a non-loopback address (None when it does not)."""
    if is_loopback(host):
        return None
    text = (
        f"WARNING: the demo binds {host or 'all interfaces'!r}, not a loopback address: anyone who can reach this "
        "port can use it. It has no authentication: they can run the agent on this machine's CPU/GPU and "
        "models, with the keys set in its environment. Use --host 127.0.0.1 unless you mean to share it."
    )
    if allow_any_endpoint:
        text += (
            " With --allow-any-endpoint they can also make this server send requests to any URL it can "
            "reach (including internal services)."
        )
    return text


def launch(
    host: str = "127.0.0.1",
    port: int = 7860,
    run_fn: RunFn | None = None,
    defaults: DemoSettings | None = None,
    concurrency: int = 2,
    block: bool = True,
    allow_any_endpoint: bool = False,
    allow_folders: list[str] | tuple[str, ...] = (),
):
    """Start the server; returns ``(demo, url)`` (and blocks until Ctrl-C when ``block``).  Binding a non-loopback
    address prints a warning on stderr (the demo has no authentication)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    warning = exposure_warning(host, allow_any_endpoint)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    server = DemoServer(
        run_fn,
        defaults,
        concurrency,
        allow_any_endpoint=allow_any_endpoint,
        exposed=not is_loopback(host),
        allow_folders=allow_folders,
    )
    demo = server.build()
    _, url, _ = demo.launch(
        server_name=host,
        server_port=port,
        share=False,
        ssr_mode=False,
        quiet=True,
        prevent_thread_lock=not block,
        max_file_size="1mb",
    )
    return demo, url
