import pytest
import torch
from torch import nn

from ddptrain.errors import CheckpointError
from ddptrain.models import unwrap
from ddptrain.train import checkpointer as checkpoint
from ddptrain.train.checkpointer import Checkpointer
from ddptrain.train.state import EpochPosition, PartialEpoch, TrainState, capture_rng, restore_rng


def test_failed_write_leaves_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    checkpoint.save_atomic({"model": {"w": torch.ones(2)}}, path)

    def exploding_save(obj, handle):
        handle.write(b"partial bytes")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", exploding_save)
    with pytest.raises(
        CheckpointError,
        match=r"cannot write checkpoint .*last\.pt: No space left on device; "
        r"the previous last\.pt is intact",
    ):
        checkpoint.save_atomic({"model": {"w": torch.zeros(2)}}, path)
    monkeypatch.undo()
    assert torch.equal(checkpoint.load(path).model["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temp file left behind


def test_exception_mid_write_leaves_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    checkpoint.save_atomic({"model": {"w": torch.ones(2)}}, path)

    def interrupted_save(obj, handle):
        handle.write(b"half a checkpoint")
        raise KeyboardInterrupt  # e.g. the process is told to stop while writing

    monkeypatch.setattr(torch, "save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_atomic({"model": {"w": torch.zeros(2)}}, path)
    monkeypatch.undo()
    assert torch.equal(checkpoint.load(path).model["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_unwrap_removes_wrappers():
    inner = nn.Linear(2, 2)

    class Wrapper(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    assert unwrap(Wrapper(Wrapper(inner))) is inner


def test_load_refuses_non_checkpoints(tmp_path):
    torch.save({"w": torch.ones(1)}, tmp_path / "weights.pt")
    with pytest.raises(CheckpointError, match="--weights"):
        checkpoint.load(tmp_path / "weights.pt")
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint.load(tmp_path / "nothing.pt")


def _mid_epoch(rng) -> TrainState:
    return TrainState(model={}, partial=PartialEpoch(0, EpochPosition(), [rng]))


def test_rng_state_survives_a_weights_only_round_trip(tmp_path):
    checkpoint.save_atomic(_mid_epoch(capture_rng()).to_dict(), tmp_path / "c.pt")
    state = checkpoint.load(tmp_path / "c.pt")
    assert state.partial is not None and torch.equal(state.partial.rng[0]["torch"], torch.get_rng_state())


def test_resume_lookup(tmp_path):
    assert checkpoint.load_for_resume("auto", tmp_path) is None  # nothing there yet: a fresh start
    saver = Checkpointer(tmp_path, keep_last=3, is_main=True)
    saver.save_epoch(TrainState(model={"w": torch.ones(1)}, step=5), is_best=True)
    path, state = checkpoint.load_for_resume("auto", tmp_path)
    assert path == tmp_path / "checkpoints" / "last.pt" and state.step == 5
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        checkpoint.load_for_resume(str(tmp_path / "missing.pt"), tmp_path)


def test_resume_auto_falls_back_over_damaged_checkpoints_and_says_why(tmp_path, caplog):
    saver = Checkpointer(tmp_path, keep_last=3, is_main=True)
    folder = tmp_path / "checkpoints"
    saver.save_epoch(TrainState(model={"w": torch.zeros(1)}, step=2), is_best=True)  # best.pt: step 2
    for step in (3, 4):
        saver.save_step(TrainState(model={"w": torch.full((1,), float(step))}, step=step))
    saver.save_epoch(TrainState(model={"w": torch.ones(1)}, step=6), is_best=False)  # last.pt: step 6
    assert [p.name for p in checkpoint.resume_candidates(folder)] == [
        "last.pt",
        "step-000000004.pt",
        "step-000000003.pt",
        "best.pt",
    ]
    last = folder / "last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # truncated by a full disk
    checkpoint.save_atomic(
        TrainState(model={"w": torch.tensor([float("nan")])}, step=4).to_dict(), folder / "step-000000004.pt"
    )  # NaN weights
    with caplog.at_level("WARNING", logger="ddptrain"):
        path, state = checkpoint.load_for_resume("auto", tmp_path)
    assert path.name == "step-000000003.pt" and state.step == 3
    assert "refused last.pt: not a zip archive (truncated" in caplog.text
    assert "step-000000004.pt: non-finite weights (w); continuing from step-000000003.pt" in caplog.text
    for name in ("step-000000003.pt", "best.pt"):
        (folder / name).write_bytes(b"not a checkpoint")
    with pytest.raises(
        CheckpointError,
        match=r"no checkpoint in .* can be loaded: last\.pt: not a zip archive .*; "
        r"best\.pt: not a zip archive",
    ):
        checkpoint.load_for_resume("auto", tmp_path)
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):  # an explicit path must load
        checkpoint.load_for_resume(str(last), tmp_path)


def test_step_checkpoints_become_last_and_only_the_newest_are_kept(tmp_path):
    saver = Checkpointer(tmp_path, keep_last=2, is_main=True)
    folder = tmp_path / "checkpoints"
    for step in (2, 4, 6):
        saver.save_step(TrainState(model={"w": torch.full((2,), float(step))}, step=step))
    assert sorted(p.name for p in folder.glob("step-*.pt")) == ["step-000000004.pt", "step-000000006.pt"]
    assert checkpoint.load(folder / "last.pt").step == 6
    saver.save_epoch(TrainState(model={"w": torch.zeros(2)}, step=7), is_best=False)  # epoch end
    assert checkpoint.load(folder / "step-000000006.pt").step == 6  # the step file is untouched
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_a_new_best_is_last_pt_linked_not_written_twice_and_stays_when_last_moves_on(tmp_path):
    saver = Checkpointer(tmp_path, keep_last=2, is_main=True)
    folder = tmp_path / "checkpoints"
    saver.save_epoch(TrainState(model={"w": torch.zeros(2)}, step=3), is_best=True)
    assert (folder / "best.pt").stat().st_ino == (folder / "last.pt").stat().st_ino  # one file, two names
    saver.save_epoch(TrainState(model={"w": torch.ones(2)}, step=6), is_best=False)
    assert checkpoint.load(folder / "best.pt").step == 3 and checkpoint.load(folder / "last.pt").step == 6
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]


def test_only_rank_0_writes(tmp_path):
    saver = Checkpointer(tmp_path, keep_last=2, is_main=False)
    saver.save_epoch(TrainState(model={"w": torch.zeros(2)}), is_best=True)
    assert saver.save_step(TrainState(model={"w": torch.zeros(2)}, step=3)) is None
    assert not (tmp_path / "checkpoints").exists()


def test_rng_state_survives_a_checkpoint_round_trip(tmp_path):
    import random

    import numpy as np

    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    checkpoint.save_atomic(_mid_epoch(capture_rng()).to_dict(), tmp_path / "c.pt")
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(9), np.random.seed(9), random.seed(9)
    restore_rng(checkpoint.load(tmp_path / "c.pt").partial.rng[0])
    assert torch.equal(torch.rand(3), expected[0])
    assert (np.random.rand(3) == expected[1]).all() and random.random() == expected[2]
