"""The checkpoint format has one owner: TrainState writes the dict every ddptrain checkpoint holds and
reads it back; no other module reads a checkpoint by its string keys."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from ddptrain.errors import CheckpointError
from ddptrain.train.state import FORMAT_VERSION, EpochPosition, PartialEpoch, TrainState, migrate

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "ddptrain"
STATE_MODULE = PACKAGE / "train" / "state.py"

# The file format `ddptrain train` writes (an epoch end, then a mid-epoch checkpoint): the keys it has always had,
# `global_batch` (images per optimizer step, kept when the number of processes changes) and `split` (digest and sizes
# of the train/val split the checkpoint was trained on), `since_best` (evaluations without a better --eval-metric; `best_metric` names it).
EPOCH_END_KEYS = [
    "format",
    "model",
    "optimizer",
    "scaler",
    "epoch",
    "step",
    "best",
    "best_metric",
    "since_best",
    "config",
    "class_names",
    "world_size",
    "global_batch",
    "split",
    "metrics",
    "ddptrain",
]
MID_EPOCH_KEYS = EPOCH_END_KEYS[:-2] + ["partial", "ddptrain"]


def _state(**extra) -> TrainState:
    return TrainState(
        model={"w": torch.ones(2)},
        optimizer={"state": {}, "param_groups": []},
        epoch=2,
        step=30,
        best=0.5,
        config={"model": "resnet18", "lr": 0.1},
        class_names=["a", "b"],
        world_size=2,
        **extra,
    )


def test_epoch_end_and_mid_epoch_dicts_keep_the_file_format():
    assert list(_state(metrics={"epoch": 2}).to_dict()) == EPOCH_END_KEYS
    partial = PartialEpoch(3, EpochPosition(8, 4.0, 8.0, 1), [{"torch": torch.get_rng_state()}] * 2)
    saved = _state(partial=partial).to_dict()
    assert list(saved) == MID_EPOCH_KEYS and saved["format"] == FORMAT_VERSION
    assert saved["partial"]["position"] == {
        "samples_done": 8,
        "loss_sum": 4.0,
        "loss_count": 8.0,
        "skipped": 1,
        "lanes": 0,  # added for shard sets; a checkpoint without it reads as 0
    }


def test_round_trip_through_a_weights_only_file(tmp_path):
    partial = PartialEpoch(3, EpochPosition(8, 4.0, 8.0, 1), [{"torch": torch.get_rng_state()}])
    torch.save(_state(partial=partial).to_dict(), tmp_path / "c.pt")
    back = TrainState.from_dict(torch.load(tmp_path / "c.pt", weights_only=True), tmp_path / "c.pt")
    assert (back.partial.epoch, back.partial.position) == (3, EpochPosition(8, 4.0, 8.0, 1))
    assert torch.equal(back.partial.rng[0]["torch"], partial.rng[0]["torch"])
    assert back.next_epoch() == 3 and back.partial is not None
    assert (back.epoch, back.step, back.best, back.class_names, back.world_size) == (2, 30, 0.5, ["a", "b"], 2)
    assert torch.equal(back.model["w"], torch.ones(2))
    assert _state().next_epoch() == 3 and _state().partial is None  # epoch end: the next one


def test_a_checkpoint_of_an_older_layout_loads_with_defaults():
    old = {"model": {"w": torch.zeros(1)}, "optimizer": {}, "epoch": 0, "step": 4}  # no format, rng, world_size
    state = TrainState.from_dict(old, "old.pt")
    assert (state.epoch, state.step, state.world_size, state.best, state.partial) == (0, 4, 1, None, None)
    assert state.global_batch == 0  # not recorded: a resume computes it from the saved config


def _string_keys(tree: ast.AST, reads_only: bool = False):
    """String constants used as keys: d["k"], d.get("k") and, unless `reads_only`, {"k": ...}."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            yield node.slice.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield node.args[0].value
        elif isinstance(node, ast.Dict) and not reads_only:
            yield from (k.value for k in node.keys if isinstance(k, ast.Constant))


def test_checkpoint_keys_are_written_as_strings_in_one_module_only():
    """Keys that only a checkpoint has appear as strings in train/state.py alone; and the modules that load
    or write checkpoints read none of the checkpoint's keys by string (they use TrainState's fields)."""
    only_in_checkpoints = {
        "scheduler",
        "scaler",
        "best_top1",
        "rng",
        "partial",
        "position",
        "samples_done",
        "loss_sum",
        "loss_count",
    }
    all_keys = set(MID_EPOCH_KEYS) | set(EPOCH_END_KEYS) | only_in_checkpoints
    checkpoint_users = {"train/trainer.py", "train/checkpointer.py", "tools/modelfile.py", "api.py"}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == STATE_MODULE:
            continue
        name = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        found += [f"{name}: '{key}'" for key in sorted(set(_string_keys(tree)) & only_in_checkpoints)]
        if name in checkpoint_users:
            found += [f"{name} reads '{key}'" for key in sorted(set(_string_keys(tree, reads_only=True)) & all_keys)]
    assert found == []
    reader = 'state["optimizer"]; state.get("rng"); out = {"scaler": None}'  # the scan sees every way of using a key
    assert set(_string_keys(ast.parse(reader))) == {"optimizer", "rng", "scaler"}


def test_a_mid_epoch_position_written_before_shard_sets_reads_with_no_lanes():
    position = EpochPosition.from_dict({"samples_done": 8, "loss_sum": 4.0, "loss_count": 8.0, "skipped": 1})
    assert position == EpochPosition(8, 4.0, 8.0, 1, lanes=0)


def test_a_format_2_checkpoint_keeps_its_best_top1_as_the_best_of_metric_top1():
    old = {**_state().to_dict(), "format": 2}
    del old["best"], old["best_metric"]
    back = TrainState.from_dict({**old, "best_top1": 0.75}, "old.pt")
    assert (back.best, back.best_metric, back.format) == (0.75, "top1", FORMAT_VERSION)
    assert TrainState.from_dict({**old, "best_top1": -1.0}, "old.pt").best is None  # -1: nothing evaluated yet


def test_a_format_1_checkpoint_is_migrated_and_a_newer_one_refused_naming_both_versions():
    """Format 1 (before 2026-12) also held the LR schedule's state and the saving rank's RNG state, never read."""
    old = {k: v for k, v in _state(metrics={"epoch": 2}).to_dict().items() if k not in ("format", "ddptrain")}
    old.update(scheduler={"lr": 1.0}, rng={"torch": torch.get_rng_state()})
    back = TrainState.from_dict(old, "old.pt")
    assert back.format == FORMAT_VERSION and back.epoch == 2 and back.metrics == {"epoch": 2}
    assert "scheduler" not in migrate(dict(old), "old.pt") and "rng" not in migrate(dict(old), "old.pt")
    newer = {**_state().to_dict(), "format": FORMAT_VERSION + 1, "ddptrain": "9.9.9"}
    with pytest.raises(
        CheckpointError,
        match=rf"new\.pt is a checkpoint of format {FORMAT_VERSION + 1}, written by "
        rf"ddptrain 9\.9\.9; this ddptrain \(.*\) reads formats up to {FORMAT_VERSION}: use ddptrain "
        r"9\.9\.9 or newer",
    ):
        TrainState.from_dict(newer, "new.pt")
