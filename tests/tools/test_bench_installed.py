"""`ddptrain bench` from an installed package: a wheel of the project, installed into a fresh environment without
the source tree, runs the cheapest form of every bench from a folder outside the repository — so no bench reaches
for a file that only a checkout has."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ddptrain.tools.bench import NAMES

from ..conftest import cli_env

ROOT = Path(__file__).resolve().parents[2]
TINY_MODEL = ["--model", "timm:test_resnet"]
CHEAPEST = {
    "input": ["--count", 8, "--rounds", 1],
    "store": ["--ranks", 4, "--seconds", 0.2, "--clients", 1],
    "precision": ["--synthetic", "--steps", 1, "--img-size", 32, "--batch-size", 4],
    "startup": ["--rounds", 1],
    "overhead": ["--epochs", 1, "--per-class", 8, "--img-size", 32, "--batch-size", 4, "--rounds", 1],
    "scaling": ["--nproc", 2, "--epochs", 1, "--per-class", 8, "--img-size", 32, "--batch-size", 4, "--rounds", 1]
    + TINY_MODEL,
    "recipe": ["--epochs", 1, "--per-class", 4, "--img-size", 32, "--batch-size", 4, "--nproc", 1],  # 3 runs
    "memory": ["--model", "timm:test_vit", "--img-size", 32, "--batch-size", 2, "--steps", 1, "--variants", "fsdp"],
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The interpreter of a fresh environment holding ddptrain as a wheel (its dependencies — torch and the rest —
    are this environment's, reached through a .pth line, which does not bring the editable install along)."""
    work = tmp_path_factory.mktemp("installed")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", work / "dist", ROOT],
        check=True,
        capture_output=True,
    )
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", work / "venv"], check=True)
    python = work / "venv" / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    (Path(purelib) / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next((work / "dist").glob("ddptrain-*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel],
        check=True,
        capture_output=True,
    )
    return python


@pytest.mark.slow
def test_every_bench_runs_from_an_installed_wheel_outside_the_source_tree(installed, tmp_path):
    where = subprocess.run(
        [installed, "-c", "import ddptrain; print(ddptrain.__file__)"], capture_output=True, text=True, cwd=tmp_path
    ).stdout
    assert "site-packages" in where and str(ROOT) not in where  # the wheel, not the checkout
    assert sorted(CHEAPEST) == sorted(NAMES)
    for name, args in CHEAPEST.items():
        on_cpu = [] if name == "store" else ["--device", "cpu"]  # the store bench runs on no device
        command = [installed, "-m", "ddptrain", "bench", name, *map(str, args), *on_cpu, "--json"]
        proc = subprocess.run(
            [*command, "--out", tmp_path / name],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=cli_env(),
            timeout=300,
        )
        assert proc.returncode == 0, f"bench {name}: {proc.stderr[-3000:]}\n{proc.stdout[-3000:]}"  # JSON: the log
        assert json.loads(proc.stdout.strip().splitlines()[-1]), name
        assert list((tmp_path / name).glob(f"{name}*.json")), name  # precision --synthetic: precision-synthetic.json
