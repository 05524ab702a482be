"""Sharded checkpoint folders (--strategy fsdp) as inputs: half-written, damaged, of another model, carrying code,
or named by a link into the user's own files — each refused in one line, skipped, or left alone."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from ddptrain.errors import CheckpointError
from ddptrain.train import sharded
from ddptrain.train.checkpointer import Checkpointer, load, load_for_resume, load_whole
from ddptrain.train.ckptio import UnreadableCheckpoint
from ddptrain.train.resume import Resume
from ddptrain.train.state import TrainState

from ..conftest import cli_env
from ..dist_harness import run_single


def _model(width: int = 4) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, width), nn.ReLU(), nn.Linear(width, 2))


def _write(rt, run_dir: str, steps) -> None:
    """A one-process run's sharded checkpoints at these steps (DCP needs a process group)."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    keeper = Checkpointer(Path(run_dir), keep_last=3, is_main=True, sharded_tensors=True)
    keeper.attach(lambda: sharded.live_tensors(model, optimizer, None))
    for step in steps:
        state = TrainState(model={}, step=step, epoch=-1, config={"model": "mlp"}, class_names=["a", "b"])
        keeper.save_step(state)


@pytest.fixture
def run_dir(tmp_path) -> Path:
    run_single(_write, str(tmp_path), [1, 2])
    return tmp_path


def test_a_folder_without_its_commit_marker_is_refused_and_resume_auto_takes_the_one_before(run_dir):
    newest = run_dir / "checkpoints" / "step-000000002.dcp"
    (newest / sharded.COMMIT).unlink()
    with pytest.raises(UnreadableCheckpoint, match="incomplete: no commit marker"):
        load(newest)
    path, state = load_for_resume("auto", run_dir, say=False)
    assert path.name == "step-000000001.dcp" and state.step == 1


def test_damaged_metadata_is_one_line_and_resume_auto_falls_back(run_dir):
    newest = run_dir / "checkpoints" / "step-000000002.dcp"
    (newest / ".metadata").write_bytes(b"\x80\x04 cut short")
    with pytest.raises(UnreadableCheckpoint, match="its DCP metadata cannot be read"):
        load(newest)
    assert load_for_resume("auto", run_dir, say=False)[0].name == "step-000000001.dcp"
    for older in (run_dir / "checkpoints").glob("step-*.dcp"):
        if older.name != newest.name:
            shutil.rmtree(older)
    with pytest.raises(CheckpointError, match="no checkpoint in .* can be loaded: .*metadata cannot be read"):
        load_for_resume("auto", run_dir, say=False)


def test_state_carrying_code_is_refused_without_running_it(run_dir, tmp_path):
    folder = run_dir / "checkpoints" / "step-000000002.dcp"
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with open(folder / sharded.META, "wb") as handle:
        pickle.dump({"model": {}, "x": Payload()}, handle)
    with pytest.raises(UnreadableCheckpoint):
        load(folder)
    assert not marker.exists()


def test_a_checkpoint_of_another_model_is_refused_naming_the_shapes(run_dir):
    path = run_dir / "checkpoints" / "last.dcp"
    resume = Resume(path, load(path))
    with pytest.raises(
        CheckpointError, match=r"cannot resume from .*last\.dcp: weights: shape mismatch: 0\.bias, 0\.weight, 2\.weight"
    ):
        resume._check(_model(width=5), ["a", "b"], resume.saved, rank=0)


def test_whole_weights_come_back_on_one_process_without_a_process_group(run_dir):
    state = load_whole(run_dir / "checkpoints" / "last.dcp")
    want = _model().state_dict()
    assert sorted(state.model) == sorted(want) and all(state.model[k].equal(want[k]) for k in want)


def test_links_and_folders_by_ddptrains_names_into_the_users_files_are_never_followed(tmp_path):
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "thesis.txt").write_text("keep me")
    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    os.symlink(precious, checkpoints / "step-000000000.dcp")  # would be pruned as the oldest step folder
    os.symlink(precious, checkpoints / "step-000000003.dcp")  # the name the next save writes
    os.symlink(precious, checkpoints / "last.dcp")
    run_single(_write, str(tmp_path / "run"), [1, 2, 3, 4, 5])
    assert (precious / "thesis.txt").read_text() == "keep me" and sorted(os.listdir(precious)) == ["thesis.txt"]
    assert (checkpoints / "last.dcp").resolve().name == "step-000000005.dcp"
    assert (
        sharded.committed(checkpoints / "step-000000003.dcp") and not (checkpoints / "step-000000003.dcp").is_symlink()
    )


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--sync-bn"], "--sync-bn is not supported with --strategy fsdp"),
        (["--amp", "fp16"], "use --amp bf16 (or off) with --strategy fsdp"),
        (["--grad-compress", "bf16"], "--grad-compress is a DDP communication hook"),
        (["--fsdp-offload", "--device", "cpu"], "--fsdp-offload moves shards from a CUDA device"),
        (["--compile", "--device", "cpu"], "--compile with --strategy fsdp on the CPU"),
        (
            ["--fsdp-offload"] if not torch.cuda.is_available() else ["--fsdp-offload", "--device", "cpu"],
            "--fsdp-offload",
        ),
    ],
)
def test_options_fsdp_cannot_honour_are_refused_in_one_line(tmp_path, tiny_shapes, flags, says):
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", tiny_shapes, "--out", tmp_path / "run"]
    cmd += ["--strategy", "fsdp"]
    proc = subprocess.run([*map(str, cmd), *flags], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert proc.returncode != 0 and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "run").exists()


def test_eval_of_a_folder_that_is_not_a_checkpoint_is_one_line(tmp_path, tiny_shapes):
    fake = tmp_path / "best.dcp"
    fake.mkdir()
    (fake / "notes.txt").write_text("not a checkpoint")
    cmd = [sys.executable, "-m", "ddptrain", "eval", "--checkpoint", fake, "--data", tiny_shapes]
    proc = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, env=cli_env(), timeout=120)
    assert proc.returncode != 0 and "a folder that is not a checkpoint" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (fake / "notes.txt").exists()
