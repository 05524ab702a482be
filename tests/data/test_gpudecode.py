"""`--decode gpu`: the workers hand over JPEG bytes and the crop box the CPU path would crop; the device decodes and
crops. The device code runs here on the CPU (torchvision's CPU decoder): same boxes, pixels within the decoders'
tolerance of the CPU path. Where a GPU is lent, the CUDA tests run the same with nvJPEG, and a ResNet-50 trains on it."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from ddptrain.data.datasets import ImageDataset, augmentation_seed, collate
from ddptrain.data.gpudecode import EncodedImage
from ddptrain.data.loaders import choose_decode
from ddptrain.data.transforms import eval_transform, train_transform
from ddptrain.tools.bench.photos import photo, write_photos

from ..conftest import run_cli

SIZE = 48


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(6):
        path = folder / f"p{i}.jpg"
        photo(rng, 320 + 40 * i, 240).save(path, quality=90)
        paths.append(str(path))
    png = folder / "p.png"
    photo(rng, 300, 200).save(png)  # nvJPEG takes no PNG: the worker makes it ready
    cmyk = folder / "cmyk.jpg"
    photo(rng, 300, 200).convert("CMYK").save(cmyk, quality=90)
    return [*paths, str(png), str(cmyk)]


def _batches(files, transform, device="cpu"):
    samples = [(path, i) for i, path in enumerate(files)]
    cpu = ImageDataset(samples, transform, seed=5)
    gpu = ImageDataset(samples, transform, seed=5, encoded=True)
    items = [gpu[(i, 2)] for i in range(len(files))]
    reference = collate([cpu[(i, 2)] for i in range(len(files))]).images
    return items, reference, collate(items, prepare=transform).to_device(torch.device(device))


@pytest.mark.parametrize("kind", ["train", "eval"])
def test_the_device_path_crops_the_cpu_paths_boxes_within_the_decoders_tolerance(files, kind):
    transform = train_transform(SIZE, 0.08, reduced=False) if kind == "train" else eval_transform(SIZE, reduced=False)
    items, reference, (images, labels) = _batches(files, transform)
    assert [isinstance(item.image, EncodedImage) for item in items] == [True] * 6 + [False, False]
    assert labels.tolist() == list(range(len(files)))
    assert images.shape == reference.shape == (len(files), 3, SIZE, SIZE)
    expected = reference.float().div(255).sub(torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
    expected = expected.div(torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
    difference = (images - expected).abs().mul(0.229 * 255)  # back in 8-bit levels, about
    assert difference.mean() < 1.0 and difference.max() < 8  # the same decoder here: only the rounding differs


def test_the_box_handed_over_is_the_one_the_cpu_path_draws(files):
    transform = train_transform(SIZE, 0.08)
    item = ImageDataset([(files[0], 0)], transform, seed=5, encoded=True)[(0, 3)]
    torch.manual_seed(augmentation_seed(5, 3, 0))
    box, full = transform.plan(Path(files[0]).read_bytes())
    assert item.image.plan == (box, full) and full == (320, 240)
    assert bytes(item.image.data.numpy()) == Path(files[0]).read_bytes()


def test_a_jpeg_damaged_past_its_header_is_named_and_replaced_by_another_of_the_batch(files, tmp_path, caplog):
    data = Path(files[0]).read_bytes()
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(data[:400])  # header intact, scan data cut off
    items, _, (images, _) = _batches([files[1], str(broken)], train_transform(SIZE, 0.08))
    assert images.shape == (2, 3, SIZE, SIZE) and torch.isfinite(images).all()
    assert "broken.jpg could not be decoded on cpu" in caplog.text and "check or remove it" in caplog.text
    assert Path(files[1]).name not in caplog.text  # only the file at fault is named


cuda_only = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (nvJPEG); the CPU tests above cover the rest"
)


@cuda_only
def test_nvjpeg_on_the_gpu_agrees_with_the_cpu_path(files):
    transform = train_transform(SIZE, 0.08, reduced=False)
    _, reference, (images, _) = _batches(files, transform, device="cuda")
    _, _, (on_cpu, _) = _batches(files, transform, device="cpu")
    assert images.device.type == "cuda" and images.shape == reference.shape
    assert (images.cpu() - on_cpu).abs().mul(0.229 * 255).mean() < 2.0  # nvJPEG's IDCT and upsampling differ a little


@cuda_only
def test_resnet50_training_on_gpu_decoded_jpegs_keeps_a_finite_loss(tmp_path):
    """nvJPEG's hardware engine can write its output before the work queued on its stream has run, into blocks the
    caching allocator has just taken back from that work. Decoded on the training stream, this run (ResNet-50, bf16,
    224 px, batches of 256) reached a NaN loss at step 5 or 10 on an H200; decoding on a stream of its own, it
    trains as the CPU path does."""
    write_photos(tmp_path / "photos", 3072, jobs=os.cpu_count() or 1)
    args = [
        "train",
        "--data",
        tmp_path / "photos",
        "--out",
        tmp_path / "run",
        "--device",
        "cuda",
        "--model",
        "resnet50",
    ]
    args += ["--img-size", 224, "--batch-size", 256, "--epochs", 1, "--val-split", 0, "--amp", "bf16"]
    done = run_cli([*args, "--channels-last", "--decode", "gpu", "--workers", 4], check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    epoch = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert epoch["step"] == 12 and math.isfinite(epoch["train_loss"])


def test_the_gpu_path_is_refused_where_it_cannot_do_what_was_asked():
    from ddptrain.config import Config, DataConfig
    from ddptrain.config.sections import LaunchConfig
    from ddptrain.errors import ConfigError

    with pytest.raises(ConfigError, match="--decode gpu crops and flips on the GPU only"):
        DataConfig(path="d", decode="gpu", auto_augment="randaugment").validate()
    with pytest.raises(ConfigError, match="not with --device cpu"):
        Config(data=DataConfig(path="d", decode="gpu"), launch=LaunchConfig(device="cpu")).validate()
    Config(data=DataConfig(path="d", decode="full"), launch=LaunchConfig(device="cpu")).validate()
    with pytest.raises(ConfigError, match="nvJPEG on a CUDA device; this process is on cpu: use --decode cpu"):
        choose_decode("gpu", torch.device("cpu"), 0)  # a process without a GPU (train and eval ask here)


@pytest.mark.parametrize(
    ("asked", "device", "workers", "augments_on_cpu", "chosen"),
    [
        ("auto", "cuda", 2, False, "gpu"),  # 16 cores feeding 8 GPUs: the GPU path is twice as fast (H200)
        ("auto", "cuda", 3, False, "gpu"),
        ("auto", "cuda", 4, False, "cpu"),  # from about 4 workers the CPU path feeds more
        ("auto", "cuda", 8, False, "cpu"),
        ("auto", "cuda", 1, True, "cpu"),  # --auto-augment / --random-erasing run on the CPU path only
        ("auto", "cpu", 1, False, "cpu"),
        ("gpu", "cuda", 8, False, "gpu"),  # what was asked for is kept
        ("cpu", "cuda", 1, False, "cpu"),
        ("full", "cuda", 1, False, "full"),
    ],
)
def test_decode_auto_decodes_on_the_gpu_where_few_workers_feed_it(asked, device, workers, augments_on_cpu, chosen):
    assert choose_decode(asked, torch.device(device), workers, augments_on_cpu) == chosen
