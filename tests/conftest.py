"""Shared helpers: tiny image folders made on the spot and a runner for the real `ddptrain` CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Sequence

import numpy as np
import pytest
from PIL import Image

from ddptrain.tools.demodata import CLASS_ORDER, render_image

from .s3_server import s3_env, s3_sets, s3_store  # noqa: F401 (fixtures: a real S3-compatible store on loopback)

CLI_TIMEOUT_S = 300
# metrics.jsonl fields that measure time or memory: they differ between otherwise identical runs
TIMING_KEYS = {
    "images_per_sec",
    "epoch_time_s",
    "data_wait_frac",
    "data_wait_frac_max",
    "time",
    "step_time_s",
    "rank_work_s",
    "step_time_spread",
    "max_mem_mb",
    "gpu_util",
}
FAULT_HOOK = Path(__file__).parent / "fault_hook"
# The smallest training run: a tiny timm model on 32 px images, in-process loading, a quarter for validation.
TINY = ["--model", "timm:test_resnet", "--img-size", 32, "--batch-size", 2, "--workers", 0, "--val-split", 0.25]
# The short 2-epoch run that resume, restart and preemption tests compare against, bit for bit.
RESUME_FLAGS = [
    "--model",
    "timm:test_resnet",
    "--img-size",
    32,
    "--batch-size",
    4,
    "--epochs",
    2,
    "--lr",
    0.01,
    "--workers",
    1,
    "--val-split",
    0.25,
    "--seed",
    3,
    "--warmup-epochs",
    0.5,
]


def write_synthetic(root: Path, classes: int, per_class: int, seed: int = 0, start: int = 0) -> Path:
    """root/<class>/<class>_NNNN.jpg using the demo generator (small counts, fast)."""
    for ci, name in enumerate(CLASS_ORDER[:classes]):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(start, start + per_class):
            (folder / f"{name}_{i:04d}.jpg").write_bytes(render_image(seed, ci, i, name))
    return root


@pytest.fixture(autouse=True, scope="session")
def _lint_cache_of_the_session(tmp_path_factory) -> None:
    """`ddptrain lint` run by the tests keeps its cache in a folder of the test session, never in ~/.cache."""
    os.environ["DDPTRAIN_LINT_CACHE"] = str(tmp_path_factory.mktemp("lint-cache"))


@pytest.fixture(autouse=True, scope="session")
def _temporary_folder_of_the_session(tmp_path_factory) -> None:
    """The processes the tests start (commands, torchrun, servers, Chromium) keep their temporary files in a folder of
    the test session, which pytest prunes, not in the machine's /tmp."""
    os.environ["TMPDIR"] = str(tmp_path_factory.mktemp("tmp"))


def cli_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.pop("DDPTRAIN_WORKER", None)
    # two test workers share the machine's cores: one thread per training process, not one per core each — and
    # always one, so runs compared bit for bit with a reference run of the session use the same arithmetic
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


def fault_env(action: str, rank, step: int = 0) -> dict:
    """Environment for a run in which `rank` misbehaves at its `step`-th optimizer update
    (see tests/fault_hook/sitecustomize.py)."""
    return {
        "PYTHONPATH": os.pathsep.join([str(FAULT_HOOK), os.environ.get("PYTHONPATH", "")]),
        "FAULT_ACTION": action,
        "FAULT_RANK": str(rank),
        "FAULT_STEP": str(step),
    }


@contextlib.contextmanager
def started(cmd: Sequence, env: dict | None = None) -> Iterator[subprocess.Popen]:
    """A background `ddptrain` command in its own process group, killed with all its workers on exit,
    whatever the test's outcome."""
    proc = subprocess.Popen(
        [str(c) for c in cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env or cli_env(),
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the command and every process below it. torchrun starts each worker in a session of its own, so
    the command's process group alone would leave a hung worker (and its loader workers) running."""
    tree = [proc.pid, *_descendants(proc.pid)]  # before the kill: orphans are re-parented and lost
    for pid in tree:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    proc.wait()


def stack_dump(root: int) -> str:
    """Python and native stacks of `root` and every process below it (py-spy, a dev dependency), to say where a
    command that should have ended is stuck."""
    dumps, py_spy = [], Path(sys.executable).with_name("py-spy")
    for pid in [root, *_descendants(root)]:
        try:
            found = subprocess.run(
                [str(py_spy), "dump", "--native", "--pid", str(pid)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            dumps.append(f"pid {pid}:\n{found.stdout[-8000:]}{found.stderr[-1000:]}")
        except (OSError, subprocess.TimeoutExpired) as error:
            dumps.append(f"pid {pid}: no stack ({error})")
    return "\n".join(dumps)


def _descendants(root: int) -> List[int]:
    """Every process below `root`, from /proc (Linux)."""
    children: dict = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def run_cli(
    args: Sequence[str],
    timeout: int = CLI_TIMEOUT_S,
    check: bool = True,
    env_extra: dict | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ddptrain", *map(str, args)]
    popen = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(env_extra),
        start_new_session=True,
        cwd=cwd,
    )
    try:
        stdout, stderr = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stacks = stack_dump(popen.pid)  # before the kill: where every process of the hung command is
        _kill_group(popen)
        stdout, stderr = popen.communicate()
        raise AssertionError(
            f"ddptrain {' '.join(map(str, args))} still ran after {timeout} s\n--- stderr\n{stderr[-6000:]}\n"
            f"--- stacks\n{stacks}"
        ) from None
    finally:
        _kill_group(popen)
    proc = subprocess.CompletedProcess(cmd, popen.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"ddptrain {' '.join(map(str, args))} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}"
        )
    return proc


def read_metrics(run_dir: Path) -> List[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def json_lines(text: str) -> List[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def save_odd_modes(folder: Path, stem: str) -> List[Path]:
    """One image in each awkward PIL mode; all must come out as RGB."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    rgb = Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8))
    paths = {
        f"{stem}_gray.png": rgb.convert("L"),
        f"{stem}_rgba.png": rgb.convert("RGBA"),
        f"{stem}_cmyk.jpg": rgb.convert("CMYK"),
        f"{stem}_palette.png": rgb.convert("P"),
        f"{stem}_16bit.png": Image.fromarray((rng.integers(0, 65535, (40, 48))).astype(np.uint16)),
    }
    out = []
    for name, image in paths.items():
        if name.endswith("palette.png"):
            image.info["transparency"] = 0
            image.save(folder / name, transparency=0)
        else:
            image.save(folder / name)
        out.append(folder / name)
    return out


def pytest_collection_modifyitems(config, items):
    """Everything under tests/e2e runs the real CLI on several processes: `make test-fast` leaves it out."""
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_shapes(tmp_path_factory) -> Path:
    """3 classes x 12 images of the demo generator."""
    return write_synthetic(tmp_path_factory.mktemp("shapes"), classes=3, per_class=12)


def load_checkpoint(path: Path) -> dict:
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_weights(run_dir: Path, reference_dir: Path) -> None:
    """Bitwise, not approximately: the run ended exactly where the reference did."""
    got = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    want = load_checkpoint(reference_dir / "checkpoints" / "last.pt")
    assert got["step"] == want["step"]
    for name, value in want["model"].items():
        assert got["model"][name].equal(value), name


@pytest.fixture(scope="session")
def straight(tiny_shapes, tmp_path_factory) -> Path:
    """RESUME_FLAGS on 2 processes, never interrupted."""
    run_dir = tmp_path_factory.mktemp("straight") / "run"
    run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *RESUME_FLAGS, "--nproc", 2])
    return run_dir
