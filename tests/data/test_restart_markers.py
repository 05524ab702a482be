"""JPEGs with restart markers (`ddptrain shard --restart-markers`, data/restarts.py): the rewrite keeps every pixel
and the EXIF orientation; a crop's region is decoded from the segments it lies in, with exactly the pixels of a
whole decode; a shard set made with the flag says so and trains on the same samples."""

import io
import random
import re

import numpy as np
import pytest
import torch
from PIL import Image

from ddptrain.data.datasets import ImageDataset
from ddptrain.data.images import ImageLimits, image_geometry
from ddptrain.data.restarts import with_restart_markers
from ddptrain.data.shards import open_shard_set
from ddptrain.data.transforms import train_transform
from ddptrain.tools.bench.photos import photo

from ..conftest import run_cli
from .test_region_decode import LAYOUTS, _jpeg, _whole, assert_regions_exact, needs_decoder

RST = re.compile(rb"\xff[\xd0-\xd7]")


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@needs_decoder
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("size", [(300, 225), (97, 61), (250, 333)])
def test_the_rewrite_keeps_every_pixel_and_adds_markers(layout, size):
    original = _jpeg(*size, **LAYOUTS[layout])
    marked = with_restart_markers(original)
    assert marked is not None and marked != original
    assert np.array_equal(_pixels(marked), _pixels(original))  # PIL
    assert torch.equal(_whole(marked, 1), _whole(original, 1))  # torchvision, the loader's whole decode
    assert len(RST.findall(marked)) > 0 and b"\xff\xdd" in marked  # a restart interval, and its markers
    assert len(marked) < 1.1 * len(original)


@needs_decoder
def test_the_rewrite_keeps_the_exif_orientation_and_leaves_other_files_alone():
    exif = Image.Exif()
    exif[0x0112] = 6  # stored landscape, shown portrait
    buffer = io.BytesIO()
    photo(np.random.default_rng(3), 160, 120).save(buffer, format="JPEG", quality=90, exif=exif)
    marked = with_restart_markers(buffer.getvalue())
    assert marked is not None and image_geometry(marked) == (160, 120, 6)
    png = io.BytesIO()
    photo(np.random.default_rng(3), 32, 32).save(png, format="PNG")
    assert with_restart_markers(png.getvalue()) is None
    assert with_restart_markers(b"\xff\xd8 not really a JPEG") is None
    assert with_restart_markers(_jpeg()[:-3000]) is None  # cut short: kept as it is, for the loader's verdict


@needs_decoder
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("reduce", [1, 2, 4, 8])
def test_a_region_of_a_marked_jpeg_holds_exactly_the_pixels_of_the_whole_decode(layout, reduce):
    original = _jpeg(333, 250, **LAYOUTS[layout])
    marked = with_restart_markers(original)
    assert marked is not None
    assert_regions_exact(marked, reduce, _whole(original, reduce), random.Random(f"{layout}{reduce}"), 25)


@needs_decoder
def test_a_shard_set_made_with_restart_markers_says_so_and_trains_on_the_same_samples(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(8):
        folder = tmp_path / "data" / f"c{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        photo(rng, 200 + 16 * i, 150).save(folder / f"i{i}.jpg", quality=90)
    (tmp_path / "data" / "c0" / "flat.png").write_bytes(_png())
    done = run_cli(
        ["shard", "--data", tmp_path / "data", "--out", tmp_path / "set", "--val-split", 0, "--restart-markers"]
    )
    assert "rewrote 8 JPEGs with restart markers (the same pixels); 1 image that is not a colour" in done.stderr
    _, marked, _, index = open_shard_set(str(tmp_path / "set"))
    assert index["restart_markers"] == {"most_mcus": 4}
    run_cli(["shard", "--data", tmp_path / "data", "--out", tmp_path / "plain", "--val-split", 0])
    _, plain, _, _ = open_shard_set(str(tmp_path / "plain"))
    assert [marked.relative(i) for i in range(len(marked))] == [plain.relative(i) for i in range(len(plain))]
    for i in range(len(marked)):
        data = marked.read(i, ImageLimits())
        if marked.relative(i).endswith(".jpg"):
            assert RST.search(data) and np.array_equal(_pixels(data), _pixels(plain.read(i, ImageLimits())))
        else:
            assert data == plain.read(i, ImageLimits())  # not a JPEG: stored as it was
    transform = train_transform(64, 0.08)
    with_markers = ImageDataset(marked, transform, seed=5)
    without = ImageDataset(plain, transform, seed=5)
    for epoch in range(3):
        for i in range(len(marked)):
            assert torch.equal(with_markers[(i, epoch)].image, without[(i, epoch)].image), (i, epoch)


def _png() -> bytes:
    buffer = io.BytesIO()
    photo(np.random.default_rng(9), 64, 48).save(buffer, format="PNG")
    return buffer.getvalue()
