"""The package's layers, read from its own source: no module imports one of a higher layer, and the
imports form no cycle (function-level imports included: they are cycles waiting for a refactor)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ddptrain"

# Lower numbers are lower layers. A module may import its own layer or lower ones.
LAYERS = {
    "ddptrain.errors": 0,
    "ddptrain.util": 0,
    "ddptrain.version": 0,
    "ddptrain.logs": 0,
    "ddptrain.config": 0,
    "ddptrain.handed": 0,
    "ddptrain.runtime": 1,
    "ddptrain.data": 2,
    "ddptrain.models": 2,
    "ddptrain.train": 3,
    "ddptrain.tools": 4,
    "ddptrain.api": 4,
    "ddptrain.fitting": 4,
    "ddptrain.checks": 4,
    "ddptrain.cli": 5,
    "ddptrain.__main__": 5,
    "ddptrain": 5,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> Dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer_of(module: str) -> int:
    best = max((prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")), key=len)
    return LAYERS[best]


def imports_of(module: str, path: Path, known: Set[str]) -> Set[str]:
    """ddptrain modules `module` imports, anywhere in the file; `from .x import y` counts y when it is a module."""
    is_package = path.name == "__init__.py"
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "ddptrain"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "ddptrain":
                target = node.module
            else:
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in known else target)
    return {name for name in found if name in known and name != module}


@pytest.fixture(scope="module")
def graph() -> Dict[str, Set[str]]:
    modules = all_modules()
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def test_every_module_has_a_layer(graph):
    for module in graph:
        layer_of(module)  # raises ValueError when no prefix matches


def test_no_module_imports_a_higher_layer(graph):
    violations = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in graph.items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert violations == []


def test_runtime_imports_nothing_of_training_data_or_models(graph):
    bad = [
        (m, t)
        for m, targets in graph.items()
        if m.startswith("ddptrain.runtime")
        for t in targets
        if t.startswith(("ddptrain.train", "ddptrain.data", "ddptrain.models", "ddptrain.tools"))
    ]
    assert bad == []


def test_the_imports_form_no_cycle(graph):
    cycle = _find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def _find_cycle(graph: Dict[str, Set[str]]) -> List[str] | None:
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> List[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_checks_see_a_cycle_and_an_upward_import():
    """The rules above can fail: a made-up graph with both faults is caught."""
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert layer_of("ddptrain.runtime.launch") < layer_of("ddptrain.train.trainer")
    graph = {"ddptrain.runtime.dist": {"ddptrain.train.loop"}}
    assert [m for m, ts in graph.items() for t in ts if layer_of(t) > layer_of(m)] == ["ddptrain.runtime.dist"]
