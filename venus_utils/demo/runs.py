"""One research run in a background thread, observable and stoppable: what the web demo (and notebook 06) drive.

DR-Venus's web demo keeps one run in global state, its Stop button does not stop the solver, and the keys
typed in its UI never reach the tools (they are frozen at import).  Here each browser session owns a
:class:`Run`; ``stop()`` sets an event that ends the run promptly: it is checked before every model call and
tool call, a call in progress is abandoned, and a local model's ``generate`` stops at the next token.  At most
``limit`` runs hold a :class:`RunSlots` slot, until their thread has ended.  The settings (keys included) are
handed to the run itself, never written to ``os.environ``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..agent.backends import OpenAIBackend, TransformersBackend, model_folder_path
from ..agent.loop import run_agent
from ..agent.settings import resolve_agent_settings
from ..core.aio import run_coroutine
from ..core.env import redact, redact_url
from ..core.paths import WORLD_DIR
from ..core.protocol import INFERENCE_TOKENS_PER_TURN, MAX_TURNS
from ..core.stage import best_model, model_candidates, resolve_run_dir
from ..tools import make_toolbox

MAX_QUESTION_CHARS = 4000  # a research question, not a document
MAX_FIELD_CHARS = 512  # URLs, model names, keys, paths
MAX_STEPS_LIMIT = MAX_TURNS  # DR-Venus's inference default; the UI slider stops here
MAX_NEW_TOKENS_RANGE = (16, INFERENCE_TOKENS_PER_TURN)  # per turn (DR-Venus inference: 15,000)
#: the demo's limits for a model whose folder does not say how it was trained (no venus_agent.json): DR-Venus's
#: 200 turns x 15,000 tokens would keep a CPU model busy for hours
DEMO_FALLBACK = {"max_turns": 20, "max_new_tokens": 2048}
PROMPT_CHOICES = ("auto", "dr-venus", "compact")  # auto: the model's own (its venus_agent.json), else dr-venus


class InputError(ValueError):
    """A setting or question the demo refuses; the message is shown to the user."""


def normalize_base_url(url: str) -> str:
    """An OpenAI-compatible base URL ending in ``/v1`` (or the path the user gave), without a trailing slash.

    ``http://host:6001`` -> ``http://host:6001/v1``; ``http://host:6001/v1/`` -> ``http://host:6001/v1``;
    ``http://host/v1/chat/completions`` -> ``http://host/v1``.  DR-Venus's ``rstrip("/v1")`` stripped
    *characters*, so a port ending in 1 lost its digit; this works on the parsed path.
    """
    url = (url or "").strip()
    if len(url) > MAX_FIELD_CHARS:
        raise InputError(f"the endpoint URL is longer than {MAX_FIELD_CHARS} characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"the endpoint URL must look like http://host:port/v1, got {url!r}")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise InputError(f"the endpoint URL has an invalid port: {url!r}") from None
    path = parts.path.rstrip("/")
    for suffix in ("/chat/completions", "/completions", "/models"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def is_loopback(host: str | None) -> bool:
    """``localhost`` or a loopback IP literal (127.0.0.0/8, ::1).  Other names are not resolved: not loopback."""
    host = (host or "").strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin_and_path(base_url: str) -> tuple:
    parts = urlsplit(base_url)
    port = parts.port or {"http": 80, "https": 443}[parts.scheme]
    return parts.scheme, (parts.hostname or "").lower(), port, parts.path


def served_folders(defaults: DemoSettings, extra: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """The folders an exposed demo serves: its run folder, its default checkpoint and world, and ``extra`` (the
    operator's ``--allow-folder``), resolved (symbolic links followed)."""
    roots = [defaults.extra.get("run_dir"), defaults.checkpoint, defaults.world_dir, *extra]
    return sorted({Path(r).expanduser().resolve() for r in roots if r}, key=str)


def check_folder(folder: str, roots: list[Path] | None, what: str) -> str:
    """``folder`` when it lies inside one of ``roots`` (None: any folder, a demo on a loopback address).

    An exposed demo must not let a visitor name any path of the server as a model or world folder (it would be
    read, its files probed by the error messages).  Symbolic links and ``..`` are resolved before the check."""
    if roots is None or not folder:
        return folder
    try:
        real = Path(folder).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        real = None
    if real is not None and any(real == root or root in real.parents for root in roots):
        return folder
    raise InputError(
        f"the {what} must be inside the folders this demo serves (it is exposed beyond this machine): "
        f"{', '.join(r.name or str(r) for r in roots)}; the operator can add folders with --allow-folder"
    )


def check_endpoint(
    url: str, configured: list[str] | tuple[str, ...] = (), allow_any: bool = False, allow_loopback: bool = True
) -> str:
    """The normalised base URL of an endpoint the demo server may request on a user's behalf.

    The server makes the request, so a URL typed in the UI could reach hosts only the server can reach.  Allowed:
    the endpoints the operator configured (``--model URL``), loopback addresses while the demo itself is only
    reachable from this machine (``allow_loopback``; an exposed demo must not let visitors probe its host's local
    services), or anything when the operator started the demo with ``--allow-any-endpoint``.  Anything else raises
    :class:`InputError` saying so.
    """
    base = normalize_base_url(url)
    if allow_any or (allow_loopback and is_loopback(urlsplit(base).hostname)):
        return base
    wanted = _origin_and_path(base)
    for known in configured:
        if known and _origin_and_path(normalize_base_url(known)) == wanted:
            return base
    allowed = (
        "the configured endpoint(s) and loopback addresses (localhost, 127.0.0.1)"
        if allow_loopback
        else (
            "the configured endpoint(s) "
            "(the demo is exposed beyond this machine, so loopback addresses are refused too)"
        )
    )
    raise InputError(
        f"{redact_url(base)} is not an endpoint this demo may contact: only {allowed} are allowed; start the demo "
        "with --allow-any-endpoint to allow any URL"
    )


@dataclass
class DemoSettings:
    """What the settings column of the web demo (or a notebook cell) chooses."""

    model: str = "tiny"  # tiny (offline tiny agent) | checkpoint (a local model folder) | endpoint (OpenAI-compatible)
    checkpoint: str = ""  # model folder for model="checkpoint"
    endpoint: str = ""  # base URL for model="endpoint"
    endpoint_model: str = "model"  # served model name (DR-Venus serves it as "model")
    endpoint_key: str = ""  # API key of the endpoint (typed in the UI; never logged)
    tools: str = "local"  # local (offline world) | web (Serper + Jina)
    world_dir: str = ""  # offline world for tools="local"
    serper_key: str = ""  # Serper key for tools="web" (else SERPER_KEY_ID from the environment)
    jina_key: str = ""  # Jina key for tools="web" (else JINA_API_KEYS)
    summary_base: str = ""  # extractor endpoint for web visits (else API_BASE)
    summary_key: str = ""  # extractor key (else API_KEY)
    summary_model: str = ""  # extractor model (else SUMMARY_MODEL_NAME)
    # None: the model's own (its folder's venus_agent.json, see venus_utils.agent.settings), else DEMO_FALLBACK
    max_steps: int | None = None  # assistant turns of the run (the last one is forced to answer)
    max_new_tokens: int | None = None  # per turn (DR-Venus inference: 15000; the tiny CPU model needs far fewer)
    time_limit_s: float = 600.0  # wall-clock budget of the run (DR-Venus's web demo: 3600)
    device: str = "cpu"  # for local models
    system_prompt_style: str = "auto"  # auto (the model's own, else dr-venus) | dr-venus | compact
    extra: dict = field(default_factory=dict)

    def secrets(self) -> list[str]:
        return [s for s in (self.endpoint_key, self.serper_key, self.jina_key, self.summary_key) if s]

    def validated(self) -> DemoSettings:
        """A checked copy: known choices, bounded sizes, a normalised endpoint URL."""
        for name in TEXT_FIELDS:
            value = getattr(self, name) or ""
            if len(value) > MAX_FIELD_CHARS:
                raise InputError(f"the setting '{name}' is longer than {MAX_FIELD_CHARS} characters")
            setattr(self, name, value.strip())
        if self.model not in ("tiny", "checkpoint", "endpoint"):
            raise InputError(f"unknown model choice {self.model!r}")
        if self.tools not in ("local", "web"):
            raise InputError(f"unknown tools choice {self.tools!r}")
        if self.model == "endpoint":
            self.endpoint = normalize_base_url(self.endpoint)
        if self.model == "checkpoint" and not self.checkpoint:
            raise InputError("choose a checkpoint folder")
        if self.summary_base:
            self.summary_base = normalize_base_url(self.summary_base)
        self.system_prompt_style = self.system_prompt_style or "auto"
        if self.system_prompt_style not in PROMPT_CHOICES:
            raise InputError(
                f"unknown system prompt choice {self.system_prompt_style!r} (expected one of {PROMPT_CHOICES})"
            )
        if self.max_steps is not None:
            try:
                self.max_steps = int(self.max_steps)
            except (TypeError, ValueError):
                raise InputError("max steps must be a whole number") from None
            if not 1 <= self.max_steps <= MAX_STEPS_LIMIT:
                raise InputError(f"max steps must be between 1 and {MAX_STEPS_LIMIT}")
        if self.max_new_tokens is not None:
            low, high = MAX_NEW_TOKENS_RANGE
            if not low <= int(self.max_new_tokens) <= high:
                raise InputError(f"max new tokens must be between {low} and {high}")
            self.max_new_tokens = int(self.max_new_tokens)
        return self


#: the :class:`DemoSettings` fields the web demo's form sets, in the order
#: :meth:`venus_utils.demo.app.DemoServer.start` takes them after the question (its inputs, ``START_INPUTS``, and its
#: arguments follow this list; a test checks)
FORM_FIELDS = (
    "model",
    "checkpoint",
    "endpoint",
    "endpoint_model",
    "endpoint_key",
    "tools",
    "world_dir",
    "serper_key",
    "jina_key",
    "summary_base",
    "summary_key",
    "summary_model",
    "max_steps",
    "system_prompt_style",
)
#: the form's free-text fields (:meth:`DemoSettings.validated` bounds and strips them; the others are choices)
TEXT_FIELDS = tuple(f for f in FORM_FIELDS if f not in ("model", "tools", "max_steps", "system_prompt_style"))


def check_question(question: str) -> str:
    question = (question or "").strip()
    if not question:
        raise InputError("type a question first")
    if len(question) > MAX_QUESTION_CHARS:
        raise InputError(f"the question is longer than {MAX_QUESTION_CHARS} characters")
    return question


def hide_secrets(text: str, secrets: list[str]) -> str:
    """Mask the UI-typed keys (and the environment's, via ``env.redact``) in a text shown or logged."""
    for s in secrets:
        if len(s) >= 4:
            text = text.replace(s, "***")
    return redact(text)


#: ``run_fn(question, settings, on_messages, stop_event) -> result dict`` (prediction, termination, turns, ...)
RunFn = Callable[[str, DemoSettings, Callable[[list[dict]], None], threading.Event], dict]


class Run:
    """A run of ``run_fn`` in a daemon thread; ``messages`` is the latest snapshot the loop reported."""

    def __init__(self, question: str, settings: DemoSettings, run_fn: RunFn):
        self.question, self.settings, self.run_fn = question, settings, run_fn
        self.stop_event = threading.Event()
        self.messages: list[dict] = [{"role": "user", "content": question}]
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.status = "Starting"
        self.started = time.monotonic()
        self.finished: float | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, daemon=True, name="venus-demo-run")
        self._started = False

    def start(self) -> Run:
        """Start the thread (a run stopped before it started never starts: it is done, "Stopped")."""
        with self._lock:
            if self._started or self.finished is not None:
                return self
            self._started = True
            self.status = "Running"
            self._thread.start()
        return self

    def _on_messages(self, messages: list[dict]) -> None:
        with self._lock:
            self.messages = [dict(m) for m in messages]

    def _main(self) -> None:
        try:
            result = self.run_fn(self.question, self.settings, self._on_messages, self.stop_event)
            with self._lock:
                self.result = result
                if result.get("messages"):
                    self.messages = [dict(m) for m in result["messages"]]
                self.status = "Stopped" if self.stop_event.is_set() else "Completed"
        except Exception as exc:  # shown in the UI, keys masked
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            with self._lock:
                self.error = hide_secrets(detail, self.settings.secrets())
                self.status = "Stopped" if self.stop_event.is_set() else "Error"
        finally:
            self.finished = time.monotonic()

    def stop(self) -> None:
        with self._lock:
            self.stop_event.set()
            if not self._started and self.finished is None:
                self.status, self.finished = "Stopped", time.monotonic()
            elif self.status == "Running":
                self.status = "Stopping"

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; True when it has (or never started)."""
        if self._started:
            self._thread.join(timeout)
        return not self.alive

    @property
    def alive(self) -> bool:
        """The run's thread is still running (a stopped run stays alive until the loop has noticed)."""
        return self._thread.is_alive()

    @property
    def done(self) -> bool:
        return self.finished is not None

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    def snapshot(self) -> tuple[list[dict], dict | None, str]:
        with self._lock:
            return list(self.messages), self.result, self.status


class RunSlots:
    """At most ``limit`` runs at a time, counted until their thread has ended.

    A run that was stopped, or whose browser went away, keeps its slot until its thread is really over, so
    users who start and cancel runs cannot pile up threads beyond the limit.
    """

    WAIT_POLL_S = 0.05

    def __init__(self, limit: int):
        self.limit = max(1, int(limit))
        self._lock = threading.Lock()
        self._runs: list[Run] = []

    def _prune(self) -> None:
        self._runs = [r for r in self._runs if r.alive]

    def live(self) -> int:
        """Runs whose threads are running."""
        with self._lock:
            self._prune()
            return len(self._runs)

    def start(self, run: Run, timeout: float = 0.0) -> bool:
        """Start ``run`` when a slot is free within ``timeout`` seconds; False when none was (try again later).
        A run stopped while it waited is not started (True: there is nothing left to wait for)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if run.stop_event.is_set():
                    run.stop()
                    return True
                self._prune()
                if len(self._runs) < self.limit:
                    self._runs.append(run.start())
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.WAIT_POLL_S)


def default_settings(
    run_dir: str = "runs/smoke", model: str = "auto", offline: bool = True, **overrides: Any
) -> DemoSettings:
    """Settings for a run folder: its offline world (or the web tools) and a model.

    ``model``: ``auto`` (the run's best model, RL > SFT > tiny base), a model folder, or an OpenAI-compatible
    ``http(s)://host:port/v1`` URL.
    """
    run = resolve_run_dir(run_dir)
    settings = DemoSettings(
        tools="local" if offline else "web", world_dir=str(run / WORLD_DIR), extra={"run_dir": str(run)}
    )
    if model.startswith(("http://", "https://")):
        settings.model, settings.endpoint = "endpoint", model
    elif model == "auto":
        models = model_candidates(run)
        settings.model, settings.checkpoint = "tiny", str(models[0][1]) if models else ""
        settings.extra["model_label"] = models[0][0] if models else "none"
    else:
        settings.model, settings.checkpoint = "checkpoint", model
    for key, value in overrides.items():
        setattr(settings, key, value)
    return settings


# --------------------------------------------------------------------------------------------------------
# The agent behind a run
# --------------------------------------------------------------------------------------------------------
class RunStopped(Exception):
    """Raised inside the agent loop when the user pressed Stop."""


def _set_key(obj: Any, attr: str, key: str, what: str) -> Any:
    """Give a UI-typed key to a backend or tool object, never through ``os.environ`` (shared by all users).

    An object without the attribute cannot take the key: say so rather than silently ignore it (the defect
    of DR-Venus's web demo).
    """
    if not key:
        return obj
    if not hasattr(obj, attr):
        raise InputError(
            f"this version of the {what} cannot take a key from the UI; set it in the environment or .env instead"
        )
    setattr(obj, attr, key)
    return obj


STOP_POLL_S = 0.05  # how often a model or tool call in progress looks at the stop event


async def _unless_stopped(awaitable, stop: threading.Event):
    """Await ``awaitable`` unless ``stop`` is set before or while it runs: then abandon it, raise RunStopped."""
    if stop.is_set():
        getattr(awaitable, "close", lambda: None)()  # a coroutine never awaited
        raise RunStopped("stopped by the user")
    task = asyncio.ensure_future(awaitable)
    while True:
        done, _ = await asyncio.wait({task}, timeout=STOP_POLL_S)
        if done:
            return task.result()
        if stop.is_set():
            task.cancel()
            raise RunStopped("stopped by the user")


class _Observed:
    """Wraps the model backend: reports the conversation before every generation and honours Stop."""

    def __init__(self, backend: Any, on_messages: Callable[[list[dict]], None], stop: threading.Event):
        self.backend, self.on_messages, self.stop_event = backend, on_messages, stop
        self.chat = getattr(backend, "chat", None)
        self.conv = None

    async def generate(self, conv, sampling):
        self.conv = conv
        self.on_messages(conv.messages)
        return await _unless_stopped(self.backend.generate(conv, sampling), self.stop_event)


class _ObservedTools:
    """Wraps the toolbox: shows the pending call at once, honours Stop before and while it runs."""

    def __init__(self, tools: Any, model: _Observed):
        self.tools, self.model = tools, model

    async def run(self, call):
        if self.model.conv is not None:
            self.model.on_messages(self.model.conv.messages)
        return await _unless_stopped(self.tools.run(call), self.model.stop_event)


def model_folder(settings: DemoSettings) -> str | None:
    """The local model folder of a run: the run folder's best model (``tiny``: RL > SFT > tiny base) or the
    checkpoint folder; None for an endpoint.  A folder that is not there raises :class:`InputError`."""
    if settings.model == "endpoint":
        return None
    folder = settings.checkpoint
    if settings.model == "tiny":  # the run folder's best model: RL > SFT > tiny base
        try:
            folder = str(best_model(settings.extra.get("run_dir", "runs/smoke"))[1])
        except FileNotFoundError as exc:
            raise InputError(str(exc)) from None
    if not folder:
        raise InputError("choose a checkpoint folder")
    try:
        model_folder_path(folder)
    except FileNotFoundError as exc:
        raise InputError(str(exc)) from None
    return folder


def agent_settings(settings: DemoSettings, folder: str | None):
    """The prompt style and limits of a run (:class:`venus_utils.agent.settings.AgentSettings`): the settings' own
    (``system_prompt_style`` other than auto, ``max_steps``, ``max_new_tokens``), else the model folder's
    ``venus_agent.json`` (``folder``: :func:`model_folder`; None: no folder), else :data:`DEMO_FALLBACK` and the
    dr-venus prompt; the model's limits are kept within the demo's (at most 200 turns, 16-15000 tokens per turn)."""
    style = None if settings.system_prompt_style in (None, "auto") else settings.system_prompt_style
    try:
        found = resolve_agent_settings(
            folder,
            system_prompt_style=style,
            max_turns=settings.max_steps,
            max_new_tokens=settings.max_new_tokens,
            fallback=DEMO_FALLBACK,
        )
    except ValueError as exc:  # a malformed venus_agent.json
        raise InputError(str(exc)) from None
    low, high = MAX_NEW_TOKENS_RANGE
    return replace(
        found,
        max_turns=min(found.max_turns, MAX_STEPS_LIMIT),
        max_new_tokens=min(max(found.max_new_tokens, low), high),
    )


def make_backend(settings: DemoSettings, stop: threading.Event | None = None) -> Any:
    """The model of a run: the run folder's tiny agent, a checkpoint folder, or an OpenAI-compatible endpoint.

    A model folder is loaded once per (folder, device) and shared by the runs (``load_pretrained(keep=True)``);
    ``stop`` ends its generation in progress.
    """
    if settings.model == "endpoint":
        return _set_key(
            OpenAIBackend(settings.endpoint, settings.endpoint_model or "model", mode="chat"),
            "api_key",
            settings.endpoint_key,
            "endpoint backend",
        )
    return TransformersBackend.from_pretrained(
        model_folder(settings), device=settings.device, keep=True, stop_event=stop
    )


def make_tools(settings: DemoSettings) -> Any:
    """The run's tools: the offline world (local) or Serper + Jina with the keys typed in the UI (web)."""
    if settings.tools == "local":
        if not settings.world_dir or not (Path(settings.world_dir) / "pages.jsonl").exists():
            raise InputError(
                f"no offline world at {settings.world_dir!r}: run notebooks/00_setup first "
                "(or `python -m venus_utils.world build --out DIR`)"
            )
        return make_toolbox("local", settings.world_dir)
    box = make_toolbox("web")
    _set_key(box.search_backend, "api_key", settings.serper_key, "search tool (Serper key)")
    _set_key(box.visit_backend, "jina_key", settings.jina_key, "visit tool (Jina key)")
    _set_key(box.visit_backend, "extractor_key", settings.summary_key, "visit tool (summary-model key)")
    if settings.summary_base:
        box.visit_backend.api_base = settings.summary_base
    if settings.summary_model:
        box.visit_backend.model = settings.summary_model
    return box


def agent_run_fn(
    question: str,
    settings: DemoSettings,
    on_messages: Callable[[list[dict]], None],
    stop: threading.Event,
    backend: Any = None,
    tools: Any = None,
) -> dict:
    """Run the DR-Venus agent loop (:func:`venus_utils.agent.loop.run_agent`) on one question for the demo, with the
    prompt style and limits of :func:`agent_settings` (the model's own unless the settings say otherwise).

    ``backend`` / ``tools``: given objects instead of the ones the settings name (tests, replays); the model folder's
    ``venus_agent.json`` is still read when the settings name a folder that is there."""
    if backend is None:
        folder = model_folder(settings)
        backend = make_backend(settings, stop)
    else:
        try:
            folder = model_folder(settings)
        except InputError:  # the settings name no model folder: the given backend's prompt follows the fallbacks
            folder = None
    chosen = agent_settings(settings, folder)
    model = _Observed(backend, on_messages, stop)
    toolbox = _ObservedTools(tools if tools is not None else make_tools(settings), model)
    cfg = chosen.config(time_limit_s=settings.time_limit_s)
    rollout = run_coroutine(run_agent(question, model, toolbox, cfg))
    result = rollout.to_dict(token_ids=False)
    result["agent_settings"] = {**chosen.values(), "from": chosen.describe()}
    if stop.is_set() and rollout.termination == "exception":
        result.update(termination="stopped", error=None, traceback=None)
    elif rollout.error:
        result["error"] = hide_secrets(rollout.error, settings.secrets())
        result.pop("traceback", None)
    return result
