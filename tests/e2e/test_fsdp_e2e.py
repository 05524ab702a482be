"""--strategy fsdp on 2 gloo processes: training equals DDP's, sharded checkpoints resume bit-identically after a
SIGTERM, reshard onto 1 process and onto DDP, an incomplete one is skipped, and export / eval / predict read them."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Dict

import pytest
import torch

from ddptrain.train.sharded import COMMIT, full_tensors

from ..conftest import RESUME_FLAGS, cli_env, fault_env, load_checkpoint, read_metrics, run_cli, started

EXIT_PREEMPTED = 75
FSDP = [*RESUME_FLAGS, "--strategy", "fsdp"]
VIT = ["--model", "timm:test_vit", "--img-size", 32, "--batch-size", 4, "--epochs", 2, "--lr", 0.01, "--workers", 0]
VIT += ["--val-split", 0.25, "--seed", 3, "--grad-accum", 2, "--clip-grad", 0.5, "--ema-decay", 0.9, "--drop-path", 0.1]


def weights(path: Path, part: str = "model") -> Dict[str, torch.Tensor]:
    """A checkpoint's tensors whole: a sharded folder's, or a checkpoint file's."""
    return full_tensors(path, part) if path.is_dir() else load_checkpoint(path)[part]


def assert_close(got: Dict[str, torch.Tensor], want: Dict[str, torch.Tensor], tol: float) -> None:
    assert sorted(got) == sorted(want)
    worst = max((got[k].double() - want[k].double()).abs().max().item() for k in want)
    assert worst <= tol, worst


@pytest.fixture(scope="module")
def fsdp_straight(tiny_shapes, tmp_path_factory) -> Path:
    """RESUME_FLAGS under --strategy fsdp on 2 processes, never interrupted."""
    run_dir = tmp_path_factory.mktemp("fsdp_straight") / "run"
    run_cli(["train", "--data", tiny_shapes, "--out", run_dir, *FSDP, "--nproc", 2])
    return run_dir


@pytest.fixture(scope="module")
def interrupted(tiny_shapes, tmp_path_factory) -> Path:
    """The same run, SIGTERMed during its 4th step (the first of epoch 2): a step-4 folder and the epoch-1 one."""
    run_dir = tmp_path_factory.mktemp("fsdp_interrupted") / "run"
    cmd = [sys.executable, "-m", "ddptrain", "train", "--data", tiny_shapes, "--out", run_dir, *FSDP, "--nproc", 2]
    with started([*map(str, cmd), "--log-every", "1"], cli_env(fault_env("signal:SIGTERM", rank=0, step=4))) as job:
        output, _ = job.communicate(timeout=120)
    assert job.returncode == EXIT_PREEMPTED, output[-4000:]
    assert "epoch 2 after 8 of its samples (step 4)" in output, output[-3000:]
    return run_dir


def resumed_copy(interrupted: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(interrupted, copy, symlinks=True)
    return copy


def test_fsdp_trains_a_resnet_as_ddp_does(fsdp_straight, straight):
    folder = fsdp_straight / "checkpoints"
    assert (folder / "last.dcp").resolve().name == "epoch-0002.dcp"
    assert {p.name for p in (folder / "last.dcp").iterdir()} >= {"__0_0.distcp", "__1_0.distcp", ".metadata", COMMIT}
    assert not (folder / "last.pt").exists()
    assert_close(weights(folder / "last.dcp"), weights(straight / "checkpoints" / "last.pt"), 1e-5)
    assert [m["val_top1"] for m in read_metrics(fsdp_straight)] == [m["val_top1"] for m in read_metrics(straight)]


def test_fsdp_with_grad_checkpointing_trains_a_vit_as_ddp_does(tiny_shapes, tmp_path):
    # gradient accumulation, clipping of the global norm, stochastic depth and the EMA, all under FSDP
    runs = {}
    for strategy, extra in (("ddp", []), ("fsdp", ["--grad-checkpointing"])):
        runs[strategy] = tmp_path / strategy
        proc = run_cli(
            [
                "train",
                "--data",
                tiny_shapes,
                "--out",
                runs[strategy],
                *VIT,
                "--strategy",
                strategy,
                *extra,
                "--nproc",
                2,
            ]
        )
    assert "gradient checkpointing: timm's set_grad_checkpointing" in proc.stderr
    for part in ("model", "ema"):
        got = weights(runs["fsdp"] / "checkpoints" / "last.dcp", part)
        assert_close(got, weights(runs["ddp"] / "checkpoints" / "last.pt", part), 1e-5)


def test_sigterm_mid_epoch_leaves_a_committed_step_folder(interrupted):
    folder = interrupted / "checkpoints"
    assert (folder / "last.dcp").resolve().name == "step-000000004.dcp"
    assert json.loads((folder / "last.dcp" / COMMIT).read_text()) == {"format": 3, "step": 4, "world_size": 2}
    assert (folder / "best.dcp").resolve().name == "epoch-0001.dcp"
    assert [m["epoch"] for m in read_metrics(interrupted)] == [0]


def _resume(data: Path, run_dir: Path, *extra) -> str:
    proc = run_cli(["train", "--data", data, "--out", run_dir, *RESUME_FLAGS, *extra, "--resume", "auto"])
    return proc.stderr


def test_sigterm_resume_is_bit_identical_and_reshards_onto_one_process_and_ddp(
    tiny_shapes, interrupted, fsdp_straight, tmp_path
):
    same = resumed_copy(interrupted, tmp_path / "same")
    said = _resume(tiny_shapes, same, "--strategy", "fsdp", "--nproc", 2)
    assert "continuing at epoch 2/2 after 8 of its samples (step 4, written by 2 processes)" in said
    got, want = weights(same / "checkpoints" / "last.dcp"), weights(fsdp_straight / "checkpoints" / "last.dcp")
    assert all(got[k].equal(want[k]) for k in want)  # bitwise
    assert [m["epoch"] for m in read_metrics(same)] == [0, 1]

    one = resumed_copy(interrupted, tmp_path / "one")
    said = _resume(tiny_shapes, one, "--strategy", "fsdp")
    assert "the rest of the epoch is re-sharded" in said and "keeps the global batch at 8" in said
    assert json.loads((one / "checkpoints" / "last.dcp" / COMMIT).read_text()) == {
        "format": 3,
        "step": 6,
        "world_size": 1,
    }

    ddp = resumed_copy(interrupted, tmp_path / "ddp")
    said = _resume(tiny_shapes, ddp, "--nproc", 2)
    assert "resumed from" in said and "last.dcp" in said
    assert load_checkpoint(ddp / "checkpoints" / "last.pt")["step"] == 6
    assert_close(weights(ddp / "checkpoints" / "last.pt"), want, 1e-5)


def test_a_checkpoint_without_its_commit_marker_is_skipped(tiny_shapes, interrupted, fsdp_straight, tmp_path):
    run_dir = resumed_copy(interrupted, tmp_path)
    (run_dir / "checkpoints" / "step-000000004.dcp" / COMMIT).unlink()  # as if the job died while writing it
    said = _resume(tiny_shapes, run_dir, "--strategy", "fsdp", "--nproc", 2)
    assert "refused last.dcp: incomplete: no commit marker" in said, said[-3000:]
    assert "continuing at epoch 2/2 (step 3" in said
    got, want = weights(run_dir / "checkpoints" / "last.dcp"), weights(fsdp_straight / "checkpoints" / "last.dcp")
    assert all(got[k].equal(want[k]) for k in want)  # from the epoch's end: the same run again
    assert not (run_dir / "checkpoints" / "step-000000004.dcp").exists()  # the incomplete folder is pruned


def test_export_eval_and_predict_read_a_sharded_checkpoint(fsdp_straight, tiny_shapes, tmp_path):
    best = fsdp_straight / "checkpoints" / "best.dcp"
    out = tmp_path / "model.safetensors"
    run_cli(["export", "--checkpoint", best, "--format", "safetensors", "--out", out])
    from safetensors.torch import load_file

    assert_close(load_file(str(out)), weights(best), 0.0)  # one file a plain model loads
    recorded = json.loads((fsdp_straight / "best_eval.json").read_text())
    evaluated = json.loads(run_cli(["eval", "--checkpoint", best, "--data", tiny_shapes, "--nproc", 2]).stdout)
    assert evaluated["top1"] == recorded["top1"] and evaluated["samples"] == recorded["samples"]
    images = tiny_shapes / "disc"
    from_folder = run_cli(["predict", "--checkpoint", best, images]).stdout
    assert from_folder and from_folder == run_cli(["predict", "--checkpoint", out, images]).stdout


def test_a_ddp_run_continues_under_fsdp_with_its_weights(tiny_shapes, straight, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(straight, run_dir)
    said = _resume(tiny_shapes, run_dir, "--strategy", "fsdp", "--nproc", 2, "--epochs", 3)
    assert "last.pt was written under --strategy ddp; under fsdp the weights continue" in said, said[-3000:]
    assert "continuing at epoch 3/3 (step 6, written by 2 processes)" in said
    assert json.loads((run_dir / "checkpoints" / "last.dcp" / COMMIT).read_text())["step"] == 9
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1, 2]
