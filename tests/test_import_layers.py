"""The package's imports run one way: no module of ``venus_utils`` reaches itself again through other modules.

Every ``import`` counts, at module level and inside functions alike: an import inside a function that closes a cycle
is a cycle deferred to run time, not removed. Imports inside functions are for keeping heavy or optional packages
(torch, transformers, Unsloth, vLLM, Gradio, ...) out of a light import;
:func:`test_function_level_imports_of_the_package_are_for_heavy_modules` holds the package's own in-function imports
to that.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGE = "venus_utils"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported package module, line, inside a function) for each import of a ``venus_utils`` module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        found.append((_longest_module(alias.name, modules), child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(name, path.name == "__init__.py", child)
                if target.split(".")[0] != PACKAGE:
                    continue
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    found.append(
                        (sub if sub in modules else _longest_module(target, modules), child.lineno, in_function)
                    )
            visit(child, nested)

    visit(tree, False)
    return found


def _longest_module(dotted: str, modules: dict[str, Path]) -> str:
    parts = dotted.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, dict[str, list[str]]]:
    """module -> {imported module: ["file:line", ...]} over the whole package."""
    modules = _modules()
    graph: dict[str, dict[str, list[str]]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        own_packages = _ancestors(name)
        for target, line, _ in imports_of(name, path, modules):
            # importing a.b.c runs a/__init__ and a/b/__init__ first (those not already on the way to this module)
            for module in (*_ancestors(target), target):
                if module and module != name and module not in own_packages and module in modules:
                    edges.setdefault(module, []).append(f"{path.relative_to(ROOT.parent)}:{line}")
    return graph


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return found


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    problems = []
    for component in cycles(graph):
        members = set(component)
        edges = [
            f"  {a} -> {b} ({', '.join(graph[a][b])})" for a in component for b in sorted(graph[a]) if b in members
        ]
        problems.append("cycle between " + ", ".join(component) + ":\n" + "\n".join(edges))
    assert not problems, "\n".join(problems)


def package_graph(graph: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
    """The module graph folded onto the package's parts: a subpackage (``venus_utils.agent``) or a top-level module
    (``venus_utils.core.protocol``) is one node; imports inside a part are dropped.  A subpackage's ``__main__`` (its
    command line, ``python -m venus_utils.rl``) is a node of its own: a program that uses the library from above,
    which no module imports, so it may import what sits above its package (the settings schemas,
    :mod:`venus_utils.run.cli`)."""

    def part(module: str) -> str:
        return module if module.endswith(".__main__") else ".".join(module.split(".")[:2])

    folded: dict[str, dict[str, list[str]]] = {}
    for a, targets in graph.items():
        edges = folded.setdefault(part(a), {})
        for b, where in targets.items():
            if part(b) != part(a) and part(b) != PACKAGE:
                edges.setdefault(part(b), []).extend(where)
    return folded


def test_the_packages_are_layered():
    """Issue 23: the layering holds between packages too, so ``agent`` sits below ``rl`` and ``eval`` (the agent loop
    imported the RL format check, its batch runs the evaluation's question loader, the world store the evaluation's
    loaders).  A cycle between two parts names the imports that close it."""
    graph = package_graph(import_graph())
    problems = []
    for component in cycles(graph):
        members = set(component)
        edges = [f"  {a} -> {b} ({', '.join(graph[a][b][:3])})" for a in component for b in graph[a] if b in members]
        problems.append("cycle between " + ", ".join(component) + ":\n" + "\n".join(edges))
    assert not problems, "\n".join(problems)


#: the floors of the package, lowest first, as docs/reference.md's layout lists them: a package imports only its own
#: floor and those below; a command line (``__main__``) is a program above every floor
FLOORS = ("core", "tools", "world", "modeling", "agent", "judging", "data", "eval", "sft", "rl", "demo", "run")


def test_every_import_goes_down_the_documented_floors():
    """Not only no cycle: every package imports only packages on lower floors (:data:`FLOORS`), the order the
    layout in docs/reference.md states, so following a value to its use never climbs."""
    graph = package_graph(import_graph())
    floor = {f"{PACKAGE}.{name}": i for i, name in enumerate(FLOORS)}
    climbs = [
        f"{a} -> {b} ({', '.join(where[:2])})"
        for a, targets in graph.items()
        if not a.endswith(".__main__")
        for b, where in targets.items()
        if floor.get(b, 0) > floor.get(a, len(FLOORS))
    ]
    assert not climbs, "imports that climb a floor:\n" + "\n".join(climbs)
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert packages == set(FLOORS), f"packages without a floor: {sorted(packages - set(FLOORS))}"
    layout = (ROOT.parent / "docs" / "reference.md").read_text(encoding="utf-8").split("## Layout", 1)[1]
    listed = re.findall(r"^  ([a-z]+)/ ", layout, flags=re.M)
    assert listed == list(FLOORS), f"docs/reference.md lists the packages as {listed}, the floors are {FLOORS}"


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}, "e": {"e": []}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_imports_inside_functions_count(tmp_path, monkeypatch):
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import thing\n    import venus_utils.a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", pkg)
    graph = import_graph()
    assert graph[f"{PACKAGE}.a"] == {
        f"{PACKAGE}.sub": [f"{PACKAGE}/a.py:1"],
        f"{PACKAGE}.sub.b": [f"{PACKAGE}/a.py:1"],
    }
    assert set(graph[f"{PACKAGE}.sub.b"]) == {f"{PACKAGE}.a"}
    assert cycles(graph) == [[f"{PACKAGE}.a", f"{PACKAGE}.sub.b"]]


#: Packages a module may import inside a function instead of at the top, and why. Anything else is imported at
#: module level, where a reader sees a module's dependencies at a glance. Import times measured on 2 CPU cores.
LAZY_OK = {
    "torch": "~2 s to import; the data, tools and agent-protocol code runs without it",
    "transformers": "~1.6 s (pulls in torch)",
    "trl": "pulls in transformers, datasets and accelerate",
    "datasets": "~1.3 s",
    "accelerate": "pulls in torch",
    "peft": "pulls in torch and transformers",
    "unsloth": "optional (GPU / the Unsloth environment); must patch TRL before TRL is imported",
    "unsloth_zoo": "optional, comes with unsloth",
    "vllm": "optional (GPU only)",
    "gradio": "~2 s, only the web demo needs it",
    "gradio_client": "only the web demo's checks need it",
    "pandas": "~0.7 s; the agent loop, tools and CLIs run without it",
    "scipy": "~1.2 s, only the statistics need it",
    "matplotlib": "plots only",
    "seaborn": "~1.5 s, plots only",
    "openai": "~1.3 s, only the LLM judge and API backends need it",
    "papermill": "~1.6 s, only the pipeline runner needs it; absent from the Unsloth environment",
    "nbformat": "~1.8 s, notebooks only",
    "nbconvert": "notebooks only",
    "nbclient": "notebooks only",
    "bm25s": "absent from the Unsloth environment, which imports the SFT code but not the search tool",
    "IPython": "present only inside Jupyter kernels",
    "ipywidgets": "present only inside Jupyter kernels",
    "playwright": "test tooling, never needed at run time",
}


def _module_level_externals(graph_modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the external top-level packages importing it loads (through the package's module-level imports)."""
    direct: dict[str, set[str]] = {}
    internal: dict[str, set[str]] = {}
    for name, path in graph_modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        ext, intern = set(), set(_ancestors(name))
        for node in tree.body:
            for imp in _top_level_imports(node):
                if isinstance(imp, ast.Import):
                    for alias in imp.names:
                        (
                            intern.add(_longest_module(alias.name, graph_modules))
                            if alias.name.startswith(PACKAGE)
                            else ext.add(alias.name.split(".")[0])
                        )
                else:
                    target = _resolve(name, path.name == "__init__.py", imp)
                    if target.split(".")[0] == PACKAGE:
                        for alias in imp.names:
                            sub = f"{target}.{alias.name}"
                            module = sub if sub in graph_modules else _longest_module(target, graph_modules)
                            intern.update([*_ancestors(module), module])
                    else:
                        ext.add(target.split(".")[0])
        direct[name], internal[name] = ext, intern - {name}
    closed: dict[str, set[str]] = {}

    def close(name: str, seen: set[str]) -> set[str]:
        if name in closed:
            return closed[name]
        out = set(direct.get(name, ()))
        for dep in internal.get(name, ()):
            if dep not in seen and dep in direct:
                out |= close(dep, seen | {dep})
        closed[name] = out
        return out

    return {name: close(name, {name}) for name in graph_modules}


def _top_level_imports(node: ast.AST):
    """Imports that run when the module is imported: the module body, including under if/try (not in functions
    or classes' methods, and not under ``if TYPE_CHECKING``)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
        return
    elif isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from _top_level_imports(child)


def test_function_level_imports_are_for_heavy_or_optional_packages():
    """An import inside a function must keep something in :data:`LAZY_OK` out of its module's import: a heavy or
    optional package itself, or a package module that loads one the importing module does not load already."""
    modules = _modules()
    loads = _module_level_externals(modules)
    problems = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                where = f"{path.relative_to(ROOT.parent)}:{node.lineno}"
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                else:
                    base = _resolve(name, path.name == "__init__.py", node)
                    targets = [base]
                    if base.split(".")[0] == PACKAGE:
                        subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                        targets = subs or [base]
                for target in targets:
                    top = target.split(".")[0]
                    if top != PACKAGE:
                        if top not in LAZY_OK:
                            problems.append(f"{where}: `{target}` is neither heavy nor optional: import it at the top")
                        continue
                    module = _longest_module(target, modules)
                    gained = (loads.get(module, set()) - loads[name]) & set(LAZY_OK)
                    if not gained:
                        problems.append(
                            f"{where}: `{module}` loads no heavy or optional package that {name} does "
                            "not load already: import it at the top"
                        )
    assert not problems, f"{len(problems)} imports inside functions without a reason:\n" + "\n".join(problems)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_stage_names_are_spelled_in_one_place():
    """Issue 23: stage names ("04_igpo_rl", "03_sft_unsloth") were spelled out in six modules.  Code names a stage
    only through ``venus_utils.core.paths`` (``RL_STAGE``, ``SFT_STAGE``...); docstrings and messages may mention
    them."""
    from venus_utils.core import paths

    names = re.compile("|".join(map(re.escape, paths.STAGES)))
    spelled = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == ROOT / "core" / "paths.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                found = names.match(node.value)  # the value is a stage name or a path that starts with one
                if found and node.value[found.end() :][:1] in ("", "/"):
                    spelled.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.value!r}")
    assert not spelled, "stage names outside venus_utils/core/paths.py:\n" + "\n".join(spelled)


def test_no_module_imports_a_command_line():
    """A ``__main__`` is folded into no package (:func:`package_graph`) because it is a program at the top: no module
    of the package imports one."""
    graph = import_graph()
    found = [
        f"{a} -> {b} ({', '.join(where)})"
        for a, t in graph.items()
        for b, where in t.items()
        if b.endswith("__main__")
    ]
    assert not found, "\n".join(found)


#: the longest function the package holds to (a longer one is split into named steps)
MAX_FUNCTION_LINES = 100


def test_no_function_of_the_package_is_longer_than_the_limit():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
