"""`ddptrain.fit` from a plain script (spawned processes) and from a notebook-like session (no `__main__` file:
forked processes), with a Python dataset of PIL images: the same weights as `ddptrain train` on the same images and
options, and a SIGTERM mid-epoch continued by `fit(..., resume="auto")` bit for bit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..conftest import assert_same_weights, cli_env, fault_env, load_checkpoint, run_cli

MODEL = """
from torch import nn


def build(num_classes, width=4):
    return nn.Sequential(
        nn.Conv2d(3, width, 3, stride=2), nn.BatchNorm2d(width), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(width, num_classes),
    )
"""
# the user's side: a dataset over the files a `ddptrain train` run split into train and val, read with PIL
USER_CODE = """
import json
import sys
from pathlib import Path

from PIL import Image
from torch.utils.data import Dataset

import ddptrain
from ddptrain.data import splitfile


class Listed(Dataset):
    def __init__(self, root, entries, classes):
        self.classes = classes
        self.items = [(Path(root) / relative, classes.index(name)) for relative, name in entries]
        self.targets = [label for _, label in self.items]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        path, label = self.items[index]
        with Image.open(path) as image:
            return image.convert("RGB"), label


def the_runs_split(data, run):
    names = json.loads(Path(run, "class_indices.json").read_text())
    classes = [names[str(i)] for i in range(len(names))]
    parts = [splitfile.read(Path(run, "splits", part + ".txt")) for part in ("train", "val")]
    return tuple(Listed(data, [(relative, name) for _, relative, name in part], classes) for part in parts)
"""
OPTIONS = {"img_size": 32, "batch_size": 4, "epochs": 2, "lr": 0.05, "workers": 1, "seed": 3, "decode": "full"}
CLI_FLAGS = [f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.items()]


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def cli_run(tiny_shapes, tmp_path_factory) -> Path:
    """`ddptrain train` with the model file, on 2 processes: the reference."""
    folder = tmp_path_factory.mktemp("fit")
    model = _write(folder, "model.py", MODEL)
    run_dir = folder / "cli"
    run_cli(["train", "--data", tiny_shapes, "--out", run_dir, "--model", f"{model}:build", *CLI_FLAGS, "--nproc", 2])
    return run_dir


def _python(args, code_stdin=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, *map(str, args)],
        input=code_stdin,
        capture_output=True,
        text=True,
        env=env or cli_env(),
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    return proc


def test_fit_from_a_script_with_a_dataset_trains_the_clis_weights_and_resumes_after_sigterm(
    tiny_shapes, cli_run, tmp_path
):
    model = cli_run.parent / "model.py"
    script = _write(
        tmp_path,
        "train_it.py",
        USER_CODE
        + f"""

import os
import sys

sys.path.insert(0, {str(model.parent)!r})
from model import build


if __name__ == "__main__":
    data, run, out = sys.argv[1:4]
    options = {OPTIONS!r}
    try:
        ddptrain.fit(build, the_runs_split(data, run), nproc=2, out=out, log_every=1, **options)
        print("NOT STOPPED")
    except ddptrain.Preempted as stopped:
        print("STOPPED", stopped)
        os.environ.pop("FAULT_ACTION")  # the workers of the second call run clean
        result = ddptrain.fit(build, the_runs_split(data, run), nproc=2, out=out, resume="auto", **options)
        print("RESUMED", result.best_checkpoint, len(result.metrics))
""",
    )
    out = tmp_path / "fit"
    done = _python([script, tiny_shapes, cli_run, out], env=cli_env(fault_env("signal:SIGTERM", rank=0, step=4)))
    assert "STOPPED" in done.stdout and f"RESUMED {out / 'checkpoints' / 'best.pt'} 2" in done.stdout, done.stdout
    assert "continuing at epoch 2/2 after 8 of its samples" in done.stderr
    assert_same_weights(out, cli_run)
    # the run records the factory by the file it was imported from: the command line rebuilds it
    saved = load_checkpoint(out / "checkpoints" / "last.pt")
    assert saved["config"]["model"] == f"{model}:build" and saved["config"]["data"] == "dataset://Listed+Listed"
    best = out / "checkpoints" / "best.pt"
    refused = run_cli(["eval", "--checkpoint", best, "--data", tiny_shapes], check=False)
    assert (
        refused.returncode != 0 and "trained on a Python dataset" in refused.stderr and "--split all" in refused.stderr
    )
    assert run_cli(["eval", "--checkpoint", best, "--data", tiny_shapes, "--split", "all"]).returncode == 0


def test_fit_from_a_notebook_like_session_forks_and_trains_the_same_weights(tiny_shapes, cli_run, tmp_path):
    # `python -` reads the code from stdin: __main__ has no file, as in a notebook; the factory is defined there
    out = tmp_path / "nb"
    session = (
        USER_CODE
        + MODEL
        + f"""
result = ddptrain.fit(build, the_runs_split({str(tiny_shapes)!r}, {str(cli_run)!r}), nproc=2, out={str(out)!r},
                      **{OPTIONS!r})
print("BEST", result.best["top1"], result.best_checkpoint)
"""
    )
    done = _python(["-"], code_stdin=session)
    assert "BEST" in done.stdout
    assert_same_weights(out, cli_run)
    assert load_checkpoint(out / "checkpoints" / "last.pt")["config"]["model"] == "object://build"
    failed = run_cli(
        ["eval", "--checkpoint", out / "checkpoints" / "best.pt", "--data", tiny_shapes, "--split", "all"], check=False
    )
    assert failed.returncode != 0 and "object://build is a model that was handed to ddptrain.fit" in failed.stderr
    assert "Traceback" not in failed.stderr
