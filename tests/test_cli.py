"""The command line starts without torch and refuses bad input at once, before any worker starts.

Each command here runs in a Python where importing torch (or torchvision, timm) raises: what passes
there never loaded torch, so it cannot have started a worker either (the launcher needs torch).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import cli_env, write_synthetic

ROOT = Path(__file__).resolve().parents[1]

BLOCKER = '''
import sys

class _NoTorch:
    """Importing torch is an error in this interpreter."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "torchvision", "timm"):
            raise ImportError(f"{name} is blocked: this command must not need torch")
        return None

sys.meta_path.insert(0, _NoTorch())
'''


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("no_torch")
    (folder / "sitecustomize.py").write_text(BLOCKER)
    return cli_env({"PYTHONPATH": str(folder)})


def run(args, env) -> tuple:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ddptrain", *map(str, args)], capture_output=True, text=True, env=env, timeout=60
    )
    return proc, time.perf_counter() - started


def test_the_blocker_really_blocks_torch(no_torch):
    proc = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=no_torch)
    assert proc.returncode != 0 and "is blocked" in proc.stderr


def test_help_lint_and_make_dataset_run_without_torch(no_torch, tmp_path):
    proc, _ = run(["--help"], no_torch)
    assert proc.returncode == 0 and "train" in proc.stdout
    proc, _ = run(["train", "--help"], no_torch)
    assert proc.returncode == 0 and "--lr" in proc.stdout and "optimisation recipe" in proc.stdout
    script = tmp_path / "x.py"
    script.write_text(
        'import torch\nimport torch.distributed as dist\ndist.init_process_group("nccl")\nx = torch.ones(1).cuda()\n'
    )
    proc, _ = run(["lint", script], no_torch)
    assert proc.returncode == 1 and "DDP" in proc.stdout, proc.stderr[-2000:]  # a finding, found without torch
    proc, _ = run(["make-dataset", "--out", tmp_path / "d", "--classes", 2, "--per-class", 2], no_torch)
    assert proc.returncode == 0 and len(list((tmp_path / "d").rglob("*.jpg"))) == 4, proc.stderr[-2000:]


def test_lint_works_in_a_virtual_environment_without_torch(tmp_path):
    """A fresh venv holding only ddptrain's source and PyYAML (no torch, no torchvision): lint a real-shaped script."""
    import yaml

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    python = venv / "bin" / "python"
    packages = tmp_path / "packages"
    packages.mkdir()
    (packages / "yaml").symlink_to(Path(yaml.__file__).parent)
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    (Path(purelib) / "ddptrain-src.pth").write_text(f"{ROOT / 'src'}\n{packages}\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    assert subprocess.run([python, "-c", "import torch"], capture_output=True, env=env).returncode != 0
    sample = ROOT / "tests" / "lint_samples" / "tutorial_train.py"
    proc = subprocess.run(
        [python, "-m", "ddptrain", "lint", sample], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 1 and "DDP010 error" in proc.stdout, proc.stderr[-2000:]


def test_report_runs_without_torch(no_torch, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text(
        '{"epoch": 0, "train_loss": 1.0, "val_loss": 1.1, "val_top1": 0.5, '
        '"val_top5": 1.0, "lr": 0.1, "images_per_sec": 10.0, '
        '"epoch_time_s": 2.0, "world_size": 2}\n'
    )
    proc, _ = run(["report", run_dir], no_torch)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (run_dir / "report" / "report.md").is_file()


def _one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_missing_data_folder_fails_at_once_with_one_line(no_torch, tmp_path):
    proc, _ = run(["train", "--data", tmp_path / "nonexistent", "--nproc", 2, "--out", tmp_path / "run"], no_torch)
    assert proc.returncode == 1
    assert (
        _one_line(proc) == f"ddptrain train: error: data folder {tmp_path / 'nonexistent'} does not exist or "
        "is not a folder"
    )
    assert not (tmp_path / "run").exists()


def test_missing_weights_file_fails_at_once_with_one_line(no_torch, tmp_path):
    data = write_synthetic(tmp_path / "d", classes=2, per_class=2)
    proc, _ = run(
        ["train", "--data", data, "--nproc", 2, "--out", tmp_path / "run", "--weights", tmp_path / "nope.pth"], no_torch
    )
    assert proc.returncode == 1
    assert "weights file" in _one_line(proc) and "does not exist" in proc.stderr


@pytest.mark.parametrize(
    "args,flag,pick",
    [
        (["eval", "--checkpoint", "{run}", "--data", "{data}"], "--checkpoint", "best.pt"),
        (["predict", "--checkpoint", "{run}", "{data}"], "--checkpoint", "best.pt"),
        (["export", "--checkpoint", "{run}", "--format", "safetensors"], "--checkpoint", "best.pt"),
        (["train", "--data", "{data}", "--out", "{new}", "--weights", "{run}"], "--weights", "best.pt"),
        (["train", "--data", "{data}", "--out", "{new}", "--resume", "{run}"], "--resume", "last.pt"),
    ],
)
def test_a_run_folder_given_for_a_checkpoint_names_the_checkpoint_to_give(tmp_path, args, flag, pick):
    """`--checkpoint runs/a` is the commonest slip: one line naming the run's checkpoints and the path to give,
    where it said the folder 'does not exist'; nothing is written."""
    data = write_synthetic(tmp_path / "d", classes=2, per_class=2)
    run_dir = tmp_path / "runs" / "a"
    (run_dir / "checkpoints").mkdir(parents=True)
    for name in ("best.pt", "last.pt"):
        (run_dir / "checkpoints" / name).write_bytes(b"")
    before = sorted(p.name for p in run_dir.rglob("*"))
    values = {"run": run_dir, "data": data, "new": tmp_path / "new"}
    proc, _ = run([arg.format(**values) for arg in args], cli_env())
    assert proc.returncode == 1
    assert _one_line(proc).endswith(
        f"error: {run_dir} is a run folder, not a checkpoint: give one of its checkpoints (best.pt, last.pt), "
        f"e.g. {flag} {run_dir / 'checkpoints' / pick}"
    )
    assert sorted(p.name for p in run_dir.rglob("*")) == before and not (tmp_path / "new").exists()


def test_a_sharded_runs_folder_names_its_dcp_checkpoints(tmp_path):
    """A --strategy fsdp run keeps NAME.dcp folders: they are its checkpoints, and --resume is pointed at last.dcp."""
    data = write_synthetic(tmp_path / "d", classes=2, per_class=2)
    run_dir = tmp_path / "runs" / "a"
    for name in ("best.dcp", "last.dcp"):
        (run_dir / "checkpoints" / name).mkdir(parents=True)
    proc, _ = run(["train", "--data", data, "--out", tmp_path / "new", "--resume", run_dir], cli_env())
    assert proc.returncode == 1
    assert _one_line(proc).endswith(
        f"error: {run_dir} is a run folder, not a checkpoint: give one of its checkpoints (best.dcp, last.dcp), "
        f"e.g. --resume {run_dir / 'checkpoints' / 'last.dcp'}"
    )


@pytest.mark.parametrize(
    "yaml_text,message",
    [
        ("lr: fast\n", "lr must be a number, not 'fast'"),
        ("epochs: 2.5\n", "epochs must be a whole number, not 2.5"),
        ("sync_bn: maybe\n", "sync_bn must be true or false, not 'maybe'"),
        (
            "optimizer: lars2\n",
            "optimizer must be one of sgd, nesterov, adamw, adam, lamb, lars, lion, nadamw, rmsprop, adafactor, not 'lars2'",
        ),
        ("optim:\n  lrr: 0.1\n", "unknown option 'optim.lrr'"),
    ],
)
def test_wrong_yaml_value_fails_at_once_naming_the_key(no_torch, tmp_path, yaml_text, message):
    (tmp_path / "c.yaml").write_text(yaml_text)
    proc, _ = run(
        ["train", "--config", tmp_path / "c.yaml", "--data", tmp_path, "--nproc", 2, "--out", tmp_path / "run"],
        no_torch,
    )
    assert proc.returncode == 2
    line = _one_line(proc)
    assert message in line and "c.yaml" in line


def test_yaml_numbers_written_without_a_dot_are_numbers(tmp_path):
    """PyYAML reads `lr: 1e-3` as the string '1e-3'; ddptrain converts it."""
    from ddptrain.config import build_config

    (tmp_path / "c.yaml").write_text("lr: 1e-3\nweight_decay: 5e-2\nnnodes: 1\n")
    cfg = build_config({"data": "d"}, str(tmp_path / "c.yaml"))
    assert cfg.optim.lr == 0.001 and cfg.optim.weight_decay == 0.05 and cfg.launch.nnodes == "1"


@pytest.mark.parametrize(
    "typed, meant",
    [
        ("--batchsize", "--batch-size"),  # a misspelling
        ("--opt", "--optimizer"),  # timm's names
        ("--sched", "--schedule"),
        ("--smoothing", "--label-smoothing"),
        ("-b", "--batch-size"),
        ("-j", "--workers"),
        ("--ep", "--epochs"),  # an abbreviation is refused, not taken
        ("--img", "--img-size"),
        ("--lr-warmup", "--warmup-epochs"),  # the start of torchvision's --lr-warmup-epochs
    ],
)
def test_an_unknown_flag_gets_trains_usage_and_what_it_likely_means(no_torch, typed, meant):
    proc, _ = run(["train", "--data", "nowhere", typed, "1"], no_torch)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("usage: ddptrain train ") and len(lines) == 2  # its own usage line, not every command's
    assert f"unknown option: {typed} (did you mean {meant}?)" in lines[1]


def test_a_benchmark_shows_only_its_own_options_and_says_what_each_measures(no_torch):
    overview = run(["bench", "--help"], no_torch)[0].stdout
    for name in ("overhead", "scaling", "precision", "input", "startup", "recipe", "store", "memory"):
        assert f"    {name}" in overview
    store = run(["bench", "store", "--help"], no_torch)[0].stdout
    assert "--ranks" in store and "--count" not in store and "--model" not in store
    typo = run(["bench", "input", "--cout", "3"], no_torch)[0]
    assert typo.returncode == 2 and "usage: ddptrain bench input" in typo.stderr
    assert "did you mean --count?" in typo.stderr


def test_every_command_is_listed_and_every_default_is_in_the_help(no_torch):
    listing = run(["--help"], no_torch)[0].stdout
    for command in ("train", "eval", "predict", "export", "make-dataset", "shard", "fetch-weights", "doctor"):
        assert f"    {command}" in listing
    made = run(["make-dataset", "--help"], no_torch)[0].stdout
    assert (
        "images per class: about what a model from random weights needs to learn the shapes in 10 epochs without recipe flags; fewer make a quicker try that learns less (default: 1000)"
        in " ".join(made.split())
    )
    assert "(default: 0.001)" in " ".join(run(["train", "--help"], no_torch)[0].stdout.split())
