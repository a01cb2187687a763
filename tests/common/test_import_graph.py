"""The import graph of ``privfair``, read from the sources: no circle, no upward import, and no
family imported by the release code.

Every import counts: at module level, inside a function and under ``if TYPE_CHECKING:`` (an
annotation that names a module above is a dependency on it all the same). A module's *floor*
is its room's place in ``FLOORS``; a module may import its own floor and the floors below.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the repository's folders and the import names setuptools maps them to (pyproject.toml)
FOLDERS = {
    "pipelines": "privfair",
    "components": "privfair.components",
    "schemas": "privfair.schemas",
}

# bottom to top; a room is a package, or a module at the root named here
FLOORS: list[tuple[str, ...]] = [
    ("privfair", "privfair.extras", "privfair.exits"),
    ("privfair.schemas",),
    ("privfair.components",),
    ("privfair.spec",),
    ("privfair.io",),
    ("privfair.validation",),
    ("privfair.evaluation",),
    ("privfair.release",),
    ("privfair.budget",),
    ("privfair.run",),
    ("privfair.api", "privfair.cli", "privfair.crashlog", "privfair.examples"),
    ("privfair.dagster", "privfair.airflow", "privfair.orchestrate"),
    ("privfair.demo",),
]
SHARED_CORE = "privfair.components.core"


@cache
def modules() -> dict[str, Path]:
    found = {}
    for folder, name in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((name, *parts))] = path
    return found


def _resolve(mod: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".") if is_package else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@cache
def imports() -> dict[str, set[str]]:
    """Each privfair module -> the privfair modules it imports (a name imported from a package
    that is not a submodule counts as the package)."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, node, path.name == "__init__.py")
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            else:
                continue
            for t in targets:
                while t and t not in mods:  # `import a.b.c` of a name inside a module
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    out.add(t)
        graph[mod] = out
    return graph


def floor_of(mod: str) -> int:
    best, where = -1, None
    for i, rooms in enumerate(FLOORS):
        for room in rooms:
            if (mod == room or mod.startswith(room + ".")) and len(room) > best:
                best, where = len(room), i
    if where is None:
        raise AssertionError(f"{mod} is in no floor of {__name__}.FLOORS")
    return where


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    """The reader sees the imports it is meant to judge (the test can fail)."""
    graph = imports()
    assert "privfair.spec.catalogue" in graph["privfair.run.flow"]
    assert "privfair.components.core.registry" in graph["privfair.spec.catalogue"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_circle():
    found = circles(imports())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_upward_import():
    graph = imports()
    upward = [
        f"{m} (floor {floor_of(m)}) imports {t} (floor {floor_of(t)})"
        for m, targets in sorted(graph.items())
        for t in sorted(targets)
        if floor_of(t) > floor_of(m)
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("where", ["pipelines", "dags"])
def test_the_release_code_imports_no_family(where: str):
    """The release flow, its faces and the DAG file know families only through the registry
    (``privfair.components.core``); a family's own code stays in its package."""
    bad = []
    for path in sorted((ROOT / where).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for n in names:
                if n.startswith("privfair.components.") and not n.startswith(SHARED_CORE):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {n}")
                if n.split(".")[0] in FOLDERS:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {n}")
    assert not bad, "\n".join(bad)


def test_nothing_imports_the_folder_names():
    """Tests, benchmarks and the package import ``privfair``, never the repository's folder
    names (which a wheel does not install)."""
    bad = []
    for folder in ("pipelines", "components", "schemas", "dags", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                else:
                    continue
                bad += [
                    f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
                    for n in names
                    if n.split(".")[0] in FOLDERS
                ]
    assert not bad, "\n".join(bad)


ROOMS = ("spec", "io", "validation", "evaluation", "release", "budget", "run")


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_has_a_short_public_face(room: str):
    """A room's ``__init__`` says what the room is and lists its public names; each resolves
    to the object of the module that holds it, and a name the room does not list is not
    reachable through the room."""
    import importlib

    mod = importlib.import_module(f"privfair.{room}")
    assert (mod.__doc__ or "").strip(), f"privfair.{room} has no docstring"
    assert mod.__all__, f"privfair.{room} lists no public name"
    for name in mod.__all__:
        obj = getattr(mod, name)
        holder = importlib.import_module(f"privfair.{room}.{mod._WHERE[name]}")
        assert obj is getattr(holder, name)
    assert not hasattr(mod, "no_such_name")
    assert len((ROOT / "pipelines" / room / "__init__.py").read_text().splitlines()) < 80
