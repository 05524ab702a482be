"""The Trainer in one process (world size 1, the same code path as N)."""

import pytest

from ddptrain.config import Config, build_config
from ddptrain.logs import setup_logging
from ddptrain.runtime import dist
from ddptrain.runtime.env import DistEnv
from ddptrain.train.resume import resolve_preprocessing
from ddptrain.train.trainer import Trainer


@pytest.mark.slow
def test_trainer_advances_the_sampler_epoch_and_records_each_epoch(tiny_shapes, tmp_path):
    cfg = build_config(
        {
            "data": str(tiny_shapes),
            "out": str(tmp_path / "run"),
            "model": "timm:test_resnet",
            "img_size": 32,
            "batch_size": 8,
            "epochs": 3,
            "workers": 0,
            "val_split": 0.25,
        }
    )
    setup_logging(0, 1)
    rt = dist.setup(DistEnv(), "cpu", 60)
    try:
        trainer = Trainer(cfg, rt)
        seen_epochs = []
        original_iter = trainer.train_loader.sampler.__class__.__iter__

        def recording_iter(sampler):
            seen_epochs.append(sampler.epoch)
            return original_iter(sampler)

        trainer.train_loader.sampler.__class__.__iter__ = recording_iter
        try:
            trainer.fit()
        finally:
            trainer.train_loader.sampler.__class__.__iter__ = original_iter
    finally:
        dist.cleanup()
    assert seen_epochs == [0, 1, 2]  # set_epoch before every epoch: a new shuffle each time
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()


@pytest.mark.slow
def test_resuming_a_run_that_reached_its_epochs_trains_nothing_and_says_so(tiny_shapes, tmp_path, capfd):
    flags = {"data": str(tiny_shapes), "out": str(tmp_path / "run"), "model": "timm:test_resnet", "img_size": 32}
    flags.update({"batch_size": 8, "epochs": 1, "workers": 0, "val_split": 0.25})
    setup_logging(0, 1)
    rt = dist.setup(DistEnv(), "cpu", 60)
    try:
        Trainer(build_config(flags), rt).fit()
        last = tmp_path / "run" / "checkpoints" / "last.pt"
        written = last.stat().st_mtime_ns
        capfd.readouterr()
        Trainer(build_config({**flags, "resume": "auto"}), rt).fit()
    finally:
        dist.cleanup()
    assert (
        "1 epoch finished, as many as --epochs 1 asks for; nothing to train (raise --epochs" in capfd.readouterr().err
    )
    assert (
        last.stat().st_mtime_ns == written and len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 1
    )


def test_preprocessing_comes_from_the_command_line_then_the_checkpoint_then_the_model():
    cfg = build_config({"data": "d", "model": "timm:test_resnet", "img_size": 32})
    fresh, source = resolve_preprocessing(cfg, None)
    assert (fresh.data.img_size, fresh.data.mean, fresh.data.crop_fraction) == (32, (0.5, 0.5, 0.5), 0.95)
    assert source == "timm:test_resnet's pretrained config; img_size as given (flags or --config)"
    before = {"model": "timm:test_resnet", "img_size": 32}  # a checkpoint from before these options: ImageNet's
    resumed, source = resolve_preprocessing(cfg, Config.from_flat(before, "the checkpoint", strict=False))
    assert (resumed.data.mean, resumed.data.crop_fraction) == ((0.485, 0.456, 0.406), 0.875)
    assert source.startswith("the checkpoint's")
    given = build_config({"data": "d", "model": "timm:test_resnet", "mean": "0.4,0.4,0.4", "std": "0.2,0.2,0.2"})
    chosen, _ = resolve_preprocessing(given, fresh)
    assert (chosen.data.mean, chosen.data.std, chosen.data.img_size) == ((0.4, 0.4, 0.4), (0.2, 0.2, 0.2), 32)


@pytest.mark.slow
def test_an_epoch_that_leaves_much_of_the_data_in_a_partial_batch_says_so(tiny_shapes, tmp_path, capfd):
    """180 images of 60 classes at the default batch trained on 64 of 120 each epoch, in silence."""
    flags = {"data": str(tiny_shapes), "model": "timm:test_resnet", "img_size": 32, "epochs": 1, "workers": 0}
    flags["val_split"] = 0.25  # 27 training images
    setup_logging(0, 1)
    rt = dist.setup(DistEnv(), "cpu", 60)
    try:
        Trainer(build_config({**flags, "out": str(tmp_path / "a"), "batch_size": 12}), rt).fit()
        said = capfd.readouterr().err
        Trainer(build_config({**flags, "out": str(tmp_path / "b"), "batch_size": 9}), rt).fit()
        whole = capfd.readouterr().err
    finally:
        dist.cleanup()
    assert (
        "each epoch trains on 24 of each process's 27 training images: the last partial batch of --batch-size 12 is "
        "left out (other images each epoch); --batch-size 9 leaves none out"
    ) in said
    assert "partial batch" not in whole


@pytest.mark.slow
def test_a_val_split_given_to_data_that_splits_itself_is_said_not_to_be_used(tmp_path, capfd):
    """`--val-split 0.3` on a folder of train/ and val/ was dropped in silence."""
    from ..conftest import write_synthetic

    for part in ("train", "val"):
        write_synthetic(tmp_path / "data" / part, classes=2, per_class=4, start=0 if part == "train" else 50)
    flags = {"data": str(tmp_path / "data"), "model": "timm:test_resnet", "img_size": 32, "epochs": 1}
    flags.update({"workers": 0, "batch_size": 4})
    setup_logging(0, 1)
    rt = dist.setup(DistEnv(), "cpu", 60)
    try:
        Trainer(build_config({**flags, "out": str(tmp_path / "a"), "val_split": 0.3}), rt).fit()
        said = capfd.readouterr().err
        Trainer(build_config({**flags, "out": str(tmp_path / "b")}), rt).fit()
        default = capfd.readouterr().err
    finally:
        dist.cleanup()
    assert f"--val-split 0.3 is not used: folder {tmp_path / 'data'} gives its own split (train/val layout)" in said
    assert "is not used" not in default  # the default was not typed: nothing to say
