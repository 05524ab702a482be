import pytest
import torch
from torch import nn

from ddptrain import checkpoint
from ddptrain.errors import CheckpointError


def test_failed_write_leaves_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    checkpoint.save_atomic({"model": {"w": torch.ones(2)}}, path)

    def exploding_save(obj, handle):
        handle.write(b"partial bytes")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", exploding_save)
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint .*last\.pt: No space left on device; "
                                              r"the previous last\.pt is intact"):
        checkpoint.save_atomic({"model": {"w": torch.zeros(2)}}, path)
    monkeypatch.undo()
    assert torch.equal(checkpoint.load(path)["model"]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temp file left behind


def test_exception_mid_write_leaves_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    checkpoint.save_atomic({"model": {"w": torch.ones(2)}}, path)

    def interrupted_save(obj, handle):
        handle.write(b"half a checkpoint")
        raise KeyboardInterrupt  # e.g. the process is told to stop while writing

    monkeypatch.setattr(checkpoint.torch, "save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_atomic({"model": {"w": torch.zeros(2)}}, path)
    monkeypatch.undo()
    assert torch.equal(checkpoint.load(path)["model"]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_unwrap_removes_wrappers():
    inner = nn.Linear(2, 2)

    class Wrapper(nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    assert checkpoint.unwrap(Wrapper(Wrapper(inner))) is inner


def test_load_refuses_non_checkpoints(tmp_path):
    torch.save({"w": torch.ones(1)}, tmp_path / "weights.pt")
    with pytest.raises(CheckpointError, match="--weights"):
        checkpoint.load(tmp_path / "weights.pt")
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint.load(tmp_path / "nothing.pt")


def test_rng_state_survives_a_weights_only_round_trip(tmp_path):
    checkpoint.save_atomic({"model": {}, "rng": checkpoint.capture_rng()}, tmp_path / "c.pt")
    state = checkpoint.load(tmp_path / "c.pt")
    assert torch.equal(state["rng"]["torch"], torch.get_rng_state())


def test_resume_lookup(tmp_path):
    assert checkpoint.find_resume("auto", tmp_path) is None
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.pt").write_bytes(b"x")
    assert checkpoint.find_resume("auto", tmp_path) == tmp_path / "checkpoints" / "last.pt"
    with pytest.raises(CheckpointError):
        checkpoint.find_resume(str(tmp_path / "missing.pt"), tmp_path)
