"""Profiles: one YAML file per profile in ``params/``.

Layout of a profile file::

    profile: smoke            # run folder name: runs/<profile>/
    seed: 0                   # shared keys: given to every notebook that declares them
    ...
    01_trajectory_cleaning:   # one section per notebook (file stem), its keys win over shared ones
      max_tokens: 4096

A notebook receives the shared keys it declares in its ``parameters`` cell plus its whole section; a key
in a section that the notebook does not declare is an error (it is almost always a typo).  Keys that
look like secrets (``api_key``, ``*_token``, ``password``...) are refused: API keys come from the
environment or a ``.env`` file (see :mod:`venus_utils.core.env`), never from parameters, so they never end up
in executed notebooks.

Every value of every section, and every shared key, is checked before the first notebook starts
(:func:`venus_utils.run.schemas.check_profile`, ``python -m venus_utils.run.pipeline --params ... --check``) against
the stages' schemas (:mod:`venus_utils.run.schemas`), each message naming the file, the section and the key.  A key set
twice in the file is refused (:class:`UniqueKeyLoader`), naming both lines.

This module knows no stage's schema: the stages import it (:class:`ConfigError`, :func:`settings_record`), and
:mod:`venus_utils.run.schemas`, above the stages, holds what each stage's settings may be.

A notebook run by hand takes a profile too: with ``profile = "cpu"`` in its parameters cell, the cell after the
install cell, ``apply_profile(globals(), "<stage>")``, sets what the pipeline would inject (see
:func:`venus_utils.run.schemas.apply_profile`).
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .defaults import STAGE_DEFAULTS, stage_defaults
from .paths import (
    NOTEBOOKS_DIR,
    PARAMS_DIR,
)
from .validation import (
    check_like_default,
    quote,
)

STAGE_RE = re.compile(r"^\d\d_[a-z0-9_]+$")
SECRET_RE = re.compile(
    r"(^|_)(api_?keys?|apikey|secrets?|token|password|passwd|key_id)$", re.IGNORECASE
)  # not max_new_tokens
RESERVED = {"run_dir", "stage_dir", "profile"}


#: notebook parameters that changed name: a profile using the old one is told the new one; a stage summary that
#: recorded the old one (a run made before) is read under the new one
RENAMED = {"tokens_per_turn": "max_tokens_per_turn", "eval_max_new_tokens": "eval_max_tokens_per_turn"}

MAX_NAME_CHARS = 100
PLAIN_NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def is_plain_name(name: Any) -> bool:
    """A profile name that can only name a folder of its own under ``runs/``: letters, digits, ``_``, ``-`` and dots
    after the first character (so never ``.``, ``..`` or a hidden folder), no separators, at most
    :data:`MAX_NAME_CHARS` characters."""
    return isinstance(name, str) and len(name) <= MAX_NAME_CHARS and PLAIN_NAME_RE.fullmatch(name) is not None


class ConfigError(ValueError):
    """A profile file that cannot be used; the message names the file and the key."""


@dataclass
class Profile:
    path: Path
    name: str
    shared: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    stages: list[str] | None = None  # the stages the profile runs (``stages:``); None: every notebook
    bases: list[Path] = field(default_factory=list)  # the files it inherits from (``base:``), nearest first

    def resolved_text(self) -> str:
        """The profile as the pipeline reads it, every inherited value included, as YAML (a run folder's
        ``profile.yaml`` for a profile with a ``base``; ``pipeline --check`` prints it)."""
        data: dict[str, Any] = {"profile": self.name, **self.shared}
        if self.stages is not None:
            data["stages"] = list(self.stages)
        data.update(self.sections)
        origin = " <- ".join(str(p) for p in [self.path, *self.bases])
        return f"# resolved from {origin}\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)

    def stage_params(self, stage: str) -> dict[str, Any]:
        """Shared keys overlaid with the stage's own section (before filtering by the notebook)."""
        merged = dict(self.shared)
        merged.update(self.sections.get(stage, {}))
        return merged


def _check_secrets(path: Path, mapping: dict[str, Any], where: str) -> None:
    for key, value in mapping.items():
        if SECRET_RE.search(str(key)):
            raise ConfigError(
                f"{path}: key '{where}{key}' looks like a secret. Put API keys in the environment or a .env file "
                "(see docs/scaling.md, 'API keys'); parameters end up in executed notebooks."
            )
        if isinstance(value, dict):
            _check_secrets(path, value, f"{where}{key}.")


class ProfileFileError(ConfigError):
    """The profile file itself cannot be read (missing, a folder, not UTF-8 text): the command lines name their
    ``--params`` argument.  ``problem`` is the message without the path."""

    def __init__(self, path: Path, problem: str):
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


class DuplicateKeyError(ValueError):
    """A YAML mapping that sets a key twice (``key`` names it with its parents, ``lines`` are 1-based)."""

    def __init__(self, key: str, lines: tuple[int, int]):
        self.key, self.lines = key, lines
        super().__init__(f"key '{key}' appears twice, on lines {lines[0]} and {lines[1]}")


#: Limits on what a profile (or a ``--set`` value) may hold, checked on the parsed document before any value is built:
#: its size on disk, its values counted as they expand (an alias counts as many values as its anchor holds: a few
#: lines of nested aliases can stand for billions) and its nesting.  The shipped profiles hold ~6 kB, ~200 values and
#: 3 levels.  The parser stops at the first value past a limit, so a refusal costs well under a second.
MAX_PROFILE_BYTES = 1_000_000
MAX_PROFILE_VALUES = 20_000
MAX_PROFILE_DEPTH = 32


class ProfileTooLarge(ValueError):
    """A YAML document past :data:`MAX_PROFILE_VALUES` values once its aliases expand, or nested deeper than
    :data:`MAX_PROFILE_DEPTH`."""


def expanded_values(node: yaml.Node, limit: int = MAX_PROFILE_VALUES, depth_limit: int = MAX_PROFILE_DEPTH) -> int:
    """How many values (scalars, lists, mappings, keys included) the YAML ``node`` holds once every alias is
    expanded: each distinct node is counted once and its count reused where an alias repeats it, so the count costs
    what the text does, however far it expands.  :class:`ProfileTooLarge` past ``limit`` or ``depth_limit``, or for
    an alias inside its own anchor."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(n: yaml.Node, depth: int) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        if id(n) in open_nodes:
            raise ProfileTooLarge("an alias refers to a value that contains it (a recursive value)")
        if depth > depth_limit:
            raise ProfileTooLarge(f"values nested more than {depth_limit} levels deep")
        open_nodes.add(id(n))
        if isinstance(n, yaml.SequenceNode):
            children = n.value
        elif isinstance(n, yaml.MappingNode):
            children = [c for pair in n.value for c in pair]
        else:
            children = []
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > limit:
                raise ProfileTooLarge(f"more than {limit:,} values once its aliases are expanded")
        open_nodes.discard(id(n))
        sizes[id(n)] = total
        return total

    return size(node, 0)


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping setting a key twice (PyYAML keeps the last value silently: a second
    ``03_sft_unsloth:`` section would replace the first), with :class:`DuplicateKeyError`.  Keys brought in by a merge
    (``<<: *base``) may be set again: that is what a merge is for.  A document past the size limits
    (:func:`expanded_values`) is refused with :class:`ProfileTooLarge` before any value is built."""

    def compose_node(self, parent, index):
        """PyYAML's, counting the values written and the nesting as the text is read (a document past the limits
        is refused at the first value past them, before the rest is parsed)."""
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_PROFILE_DEPTH:
                raise ProfileTooLarge(f"values nested more than {MAX_PROFILE_DEPTH} levels deep")
            if not self.check_event(yaml.AliasEvent):
                self._written = getattr(self, "_written", 0) + 1
                if self._written > MAX_PROFILE_VALUES:
                    raise ProfileTooLarge(f"more than {MAX_PROFILE_VALUES:,} values")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node):
        expanded_values(node)  # before anything expands
        self._refuse_duplicate_keys(node, "", set())  # on the document as written, before merges are flattened
        return super().construct_document(node)

    def _refuse_duplicate_keys(self, node: yaml.Node, prefix: str, visited: set[int]) -> None:
        if id(node) in visited:  # an alias: its anchor was checked where it stands
            return
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self._refuse_duplicate_keys(item, prefix, visited)
            return
        if not isinstance(node, yaml.MappingNode):
            return
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                self._refuse_duplicate_keys(value_node, prefix, visited)
                continue
            key, line = self.construct_object(key_node), key_node.start_mark.line + 1
            if key in lines:
                raise DuplicateKeyError(f"{prefix}{key}", (lines[key], line))
            lines[key] = line
            self._refuse_duplicate_keys(value_node, f"{prefix}{key}.", visited)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: ``line L, column C: what is wrong`` (PyYAML's own text spans several lines)."""

    def at(mark) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    mark, context, context_mark = (getattr(exc, k, None) for k in ("problem_mark", "context", "context_mark"))
    text = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        text = f"{at(mark)}: {text}"
    if context:
        text += f" ({context}" + (f" at {at(context_mark)})" if context_mark is not None else ")")
    return " ".join(text.split())


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)`` that refuses duplicate keys (:class:`UniqueKeyLoader`) and documents past the size
    limits (:class:`ProfileTooLarge`: longer than :data:`MAX_PROFILE_BYTES`, too many values once expanded, nested too
    deep); profiles and ``--set`` values are read with it."""
    if len(text) > MAX_PROFILE_BYTES:
        raise ProfileTooLarge(f"{len(text):,} characters, more than the {MAX_PROFILE_BYTES:,} a profile may hold")
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - UniqueKeyLoader is a SafeLoader


def read_profile_text(path: Path) -> str:
    """The text of a profile file; :class:`ProfileFileError` when there is none to read, it is larger than
    :data:`MAX_PROFILE_BYTES` or it is not UTF-8."""
    try:
        size = path.stat().st_size
        if path.is_file() and size > MAX_PROFILE_BYTES:
            raise ProfileFileError(path, f"{size:,} bytes, more than the {MAX_PROFILE_BYTES:,} a profile may hold")
        data = path.read_bytes()
    except FileNotFoundError:
        raise ProfileFileError(path, "profile file not found") from None
    except IsADirectoryError:
        raise ProfileFileError(path, "is a folder, not a profile file") from None
    except OSError as exc:
        raise ProfileFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ProfileFileError(path, "UTF-16 text; save the profile as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ProfileFileError(
            path, f"not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save the profile as UTF-8"
        ) from None


#: how many profiles one ``base`` chain may hold
MAX_BASE_DEPTH = 8


def merge_settings(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """``base`` overlaid with ``child``: a key of both whose values are both mappings (``world_knobs``) is merged
    the same way, any other value of ``child`` replaces the base's."""
    merged = dict(base)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            value = merge_settings(merged[key], value)
        merged[key] = value
    return merged


def load_profile(path: str | Path, _chain: tuple[Path, ...] = ()) -> Profile:
    """The profile in the file ``path``; with ``base: <name>`` it inherits every value of ``<name>.yaml`` in the same
    folder (recursively) and states only what differs: shared keys and section keys replace the base's, mappings
    inside a section (``world_knobs``) are merged key by key. The name (``profile:``, else the file's stem) is never
    inherited; ``stages:`` (the stages the profile runs, by name or number) is, unless set."""
    path = Path(path)
    text = read_profile_text(path)
    try:
        raw = load_yaml(text)
    except (DuplicateKeyError, ProfileTooLarge) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({yaml_problem(exc)})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    _check_secrets(path, raw, "")
    base = raw.pop("base", None)
    stages = _stages_value(path, raw.pop("stages", None))
    name = raw.pop("profile", path.stem)
    if not is_plain_name(name):
        raise ConfigError(
            f"{path}: 'profile' must be a plain folder name (letters, digits, '_', '-', '.' inside; not '.' or '..', "
            f"no separators, at most {MAX_NAME_CHARS} characters), got {quote(name)}"
        )
    shared: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in raw.items():
        if key in RESERVED:
            raise ConfigError(f"{path}: '{key}' is set by the pipeline runner and cannot be a parameter")
        if STAGE_RE.match(str(key)):
            if value is None:
                value = {}
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: section '{key}' must be a mapping, got {type(value).__name__}")
            bad = RESERVED & set(value)
            if bad:
                raise ConfigError(f"{path}: '{key}.{sorted(bad)[0]}' is set by the pipeline runner")
            sections[key] = value
        else:
            shared[key] = value
    if base is None:
        return Profile(path=path, name=name, shared=shared, sections=sections, stages=stages)
    parent = load_profile(_base_path(path, base, _chain), (*_chain, path.resolve()))
    return Profile(
        path=path,
        name=name,
        shared=merge_settings(parent.shared, shared),
        sections={
            stage: merge_settings(parent.sections.get(stage, {}), sections.get(stage, {}))
            for stage in sorted(set(parent.sections) | set(sections))
        },
        stages=stages if stages is not None else parent.stages,
        bases=[parent.path, *parent.bases],
    )


def _base_path(path: Path, base: Any, chain: tuple[Path, ...]) -> Path:
    """The file a profile's ``base: <name>`` names: ``<name>.yaml`` beside it; an error for a name that is not a
    plain profile name, a missing file, a cycle or a chain longer than :data:`MAX_BASE_DEPTH`."""
    if not is_plain_name(base) or base.endswith((".yaml", ".yml")):
        raise ConfigError(
            f"{path}: 'base' names a profile of the same folder by its name (base: cpu takes cpu.yaml), "
            f"got {quote(base)}"
        )
    found = path.parent / f"{base}.yaml"
    if not found.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(f"{path}: base {base!r}: no {found} (profiles there: {', '.join(known) or 'none'})")
    cycle = [*chain, path.resolve()]
    if found.resolve() in cycle:
        names = " -> ".join(p.stem for p in [*cycle, found.resolve()])
        raise ConfigError(f"{path}: base {base!r} makes a cycle ({names})")
    if len(cycle) >= MAX_BASE_DEPTH:
        raise ConfigError(f"{path}: more than {MAX_BASE_DEPTH} profiles in its base chain")
    return found


def _stages_value(path: Path, value: Any) -> list[str] | None:
    """A profile's ``stages:`` (a list of stage names or numbers) as strings; the pipeline checks them against the
    notebooks."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, (str, int)) for v in value):
        raise ConfigError(
            f"{path}: 'stages' must be a non-empty list of stage names or numbers (stages: [00_setup, 04_igpo_rl]), "
            f"got {quote(value)}"
        )
    return [str(v) for v in value]


def notebook_defaults(path: str | Path) -> dict[str, Any]:
    """The values of a stage notebook's ``parameters`` cell (literals only, as the convention requires)."""
    import papermill

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: notebook not found")
    out = {}
    for name, info in papermill.inspect_notebook(str(path)).items():
        try:
            out[name] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError) as exc:
            raise ConfigError(f"{path}: parameter {name} = {info['default']} is not a literal ({exc})") from None
    return out


def discover_notebooks(notebooks_dir: str | Path | None = None) -> list[Path]:
    """The stage notebooks (``NN_name.ipynb``), in reading and dependency order; copies such as
    ``00_setup.nbconvert.ipynb`` or ``01_x-Copy1.ipynb`` are not stages."""
    return sorted(p for p in Path(notebooks_dir or NOTEBOOKS_DIR).glob("[0-9][0-9]_*.ipynb") if STAGE_RE.match(p.stem))


def notebook_params(profile: Profile, stage: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """The parameters a notebook receives: declared shared keys plus its whole section.

    ``defaults`` are the notebook's ``parameters`` cell (name -> default).  Raises :class:`ConfigError` when the
    section sets a key the notebook does not declare, or a value whose type differs from the default's.
    """
    section = profile.sections.get(stage, {})
    unknown = sorted(set(section) - set(defaults))
    renamed = [f"{k} is now {RENAMED[k]}" for k in unknown if RENAMED.get(k) in defaults]
    if renamed:
        raise ConfigError(f"{profile.path}: section '{stage}': {'; '.join(renamed)} (rename it in the profile)")
    if unknown:
        raise ConfigError(
            f"{profile.path}: section '{stage}' sets {unknown}, which notebooks/{stage}.ipynb does not declare "
            f"in its parameters cell (declared: {sorted(defaults)})"
        )
    params = {k: v for k, v in profile.shared.items() if k in defaults}
    params.update(section)
    check_values(params, defaults, f"{profile.path}: {stage}")
    return params


def check_values(values: dict[str, Any], defaults: dict[str, Any], where: str) -> None:
    """Each value must have the type of the notebook default it replaces (:func:`check_like_default`)."""
    for key, value in values.items():
        if key in defaults:
            problem = check_like_default(key, value, defaults[key])
            if problem:
                raise ConfigError(f"{where}: {problem}")


def check_shared_keys(profile: Profile, defaults_by_stage: dict[str, dict[str, Any]]) -> None:
    """Every shared key of ``profile`` must be a parameter of some notebook (``seeed: 5`` is a typo, not a no-op),
    and every section must name a notebook."""
    declared = set().union(*defaults_by_stage.values()) if defaults_by_stage else set()
    for key in sorted(set(profile.shared) - declared):
        close = difflib.get_close_matches(key, sorted(declared), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{profile.path}: shared key '{key}' is not a parameter of any notebook{hint}")
    unknown_sections = sorted(set(profile.sections) - set(defaults_by_stage))
    if unknown_sections:
        raise ConfigError(
            f"{profile.path}: sections {unknown_sections} match no notebook (notebooks: {sorted(defaults_by_stage)})"
        )


# --- profiles in notebooks run by hand -----------------------------------------------------------------------------

#: The ``profile`` of a hand run that takes no profile file: the parameters cell is used as it is.
INTERACTIVE = "interactive"
#: The parameters cell's ``run_dir``; a hand run with a profile moves it to ``runs/<profile>``, the pipeline's folder.
DEFAULT_RUN_DIR = "runs/interactive"
#: Keys that say how Papermill shows a notebook rather than what it computes (``interactive: false`` prints traces
#: instead of widgets): a hand run keeps the notebook's own value.
PIPELINE_ONLY = frozenset({"interactive"})
#: The first line of the cell Papermill injects after the ``parameters`` cell (papermill's translators write it).
PAPERMILL_HEADER = "# Parameters\n"


def run_by_papermill(namespace: dict[str, Any]) -> bool:
    """True when Papermill injected parameters into this kernel: its ``injected-parameters`` cell, which starts
    with ``# Parameters`` (the notebooks' own parameters cell starts ``# Parameters (``), is in the kernel's input
    history (``In``), as for every executed cell."""
    history = namespace.get("_ih") or namespace.get("In") or []
    return any(isinstance(source, str) and source.startswith(PAPERMILL_HEADER) for source in history)


def find_profile(name: str, params_dir: str | Path | None = None) -> Path | None:
    """``params/<name>.yaml`` (the checkout's, or the copy a wheel install carries), or None."""
    if not is_plain_name(str(name)):
        return None
    path = Path(params_dir or PARAMS_DIR) / f"{name}.yaml"
    return path if path.is_file() else None


# --- where each value of a run came from ----------------------------------------------------------------------------
NOTEBOOK_DEFAULT = "notebook default"
THIS_RUN = "this run (--set, by hand, or a profile file outside params/)"


def _setting_file(profile: Profile, stage: str | None, key: str) -> Path:
    """The file of ``profile``'s chain (itself, then its bases) that states ``key`` (in ``stage``'s section, or a
    shared key when ``stage`` is None): where an inherited value comes from."""
    for path in [profile.path, *profile.bases]:
        raw = load_yaml(read_profile_text(path)) or {}
        holder = raw if stage is None else (raw.get(stage) or {})
        if isinstance(holder, dict) and key in holder:
            return path
    return profile.path


def settings_record(stage: str, profile: str | None, values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each parameter of ``stage`` with the value this run used (``values``: the notebook's globals, or a stage CLI's
    parameters) and where it came from: ``params/<profile>.yaml`` (its section or its shared keys), the lesson's
    value (:mod:`venus_utils.core.defaults`, the notebook's parameters cell: :data:`NOTEBOOK_DEFAULT`), or
    :data:`THIS_RUN`.  The rule it shows is docs/reference.md's: a value the profile sets wins over the notebook's
    default, and ``--set`` or an assignment by hand over both."""
    defaults = stage_defaults(stage) if stage in STAGE_DEFAULTS else {}
    found = find_profile(profile) if profile else None
    prof = load_profile(found) if found else None
    section, shared = (prof.sections.get(stage, {}), prof.shared) if prof else ({}, {})
    record = {}
    for key in defaults or values:
        if key not in values or key in RESERVED:
            continue
        value = values[key]
        if key in section and section[key] == value:
            source = f"params/{_setting_file(prof, stage, key).name}: {stage}"
        elif key in shared and shared[key] == value:
            source = f"params/{_setting_file(prof, None, key).name}"
        elif key in defaults and defaults[key] == value:
            source = NOTEBOOK_DEFAULT
        else:
            source = THIS_RUN
        record[key] = {"value": value, "from": source}
    return record
