"""Dependency floors that keep loading safe: no version pyproject.toml admits unpickles a file from a hub or a cache
by default (torch >= 2.6 defaults torch.load to weights_only=True; timm >= 1.0 loads hub weights that way)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
FLOORS = {"torch": (2, 6), "torchvision": (0, 21), "timm": (1, 0)}


def _floor(requirement: str):
    found = re.search(r">=\s*([0-9]+)\.([0-9]+)", requirement)
    return (int(found.group(1)), int(found.group(2))) if found else None


def test_the_declared_floors_are_versions_that_never_unpickle_by_default():
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    by_name = {re.match(r"[A-Za-z0-9_.-]+", item).group(0).lower(): item for item in dependencies}
    for name, minimum in FLOORS.items():
        assert name in by_name, f"{name} is not declared"
        floor = _floor(by_name[name])
        assert floor is not None and floor >= minimum, f"{by_name[name]}: the floor must be at least {minimum}"


def test_the_installed_versions_meet_the_floors():
    from importlib.metadata import version

    for name, minimum in FLOORS.items():
        installed = tuple(int(part) for part in re.findall(r"[0-9]+", version(name))[:2])
        assert installed >= minimum, f"{name} {version(name)} is below {minimum}"
