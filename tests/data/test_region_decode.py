"""Decoding a training crop's region alone (`images.decode_region`, the compiled `_jpegregion`): the region's pixels
are exactly those of a whole decode at the same scale, on every JPEG layout; what it cannot decode exactly goes to
the whole decode; and training samples come out byte for byte as they did without it."""

import io
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from ddptrain.data import images
from ddptrain.data.datasets import ImageDataset
from ddptrain.data.transforms import train_transform
from ddptrain.tools.bench.photos import photo

HEADERS = Path("/usr/include/jpeglib.h")

needs_decoder = pytest.mark.skipif(
    images.region_decoder() is None,
    reason="ddptrain was installed without its compiled region decoder (no C compiler or libjpeg-turbo headers)",
)


def _jpeg(width=300, height=225, seed=0, **save) -> bytes:
    buffer = io.BytesIO()
    image = photo(np.random.default_rng(seed), width, height)
    if save.pop("gray", False):
        image = image.convert("L")
    image.save(buffer, format="JPEG", **{"quality": 90, **save})
    return buffer.getvalue()


def _whole(data: bytes, reduce: int) -> torch.Tensor:
    """The whole image at 1/reduce, by the usual decoders (torchvision at full size, PIL's draft when reduced)."""
    decoded = images.decode_rgb(data, reduce=reduce)
    if isinstance(decoded, torch.Tensor):
        return decoded
    return torch.from_numpy(np.asarray(decoded.convert("RGB")).copy()).permute(2, 0, 1)


def test_the_region_decoder_is_built_where_libjpeg_turbo_headers_are():
    if not HEADERS.exists():
        pytest.skip(f"{HEADERS} is missing: the install leaves the region decoder out, by design")
    assert images.region_decoder() is not None, "make venv should have compiled ddptrain/data/_jpegregion"


LAYOUTS = {
    "4:2:0": {},
    "4:2:2": {"subsampling": 1},
    "4:4:4": {"subsampling": 0},
    "progressive": {"progressive": True},
    "grayscale": {"gray": True},
}


@needs_decoder
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("reduce", [1, 2, 4, 8])
def test_a_region_holds_exactly_the_pixels_of_the_whole_decode(layout, reduce):
    data = _jpeg(**LAYOUTS[layout])
    assert_regions_exact(data, reduce, _whole(data, reduce), random.Random(f"{layout}{reduce}"), 12)


def assert_regions_exact(data: bytes, reduce: int, whole: torch.Tensor, draw: random.Random, count: int) -> None:
    """The whole image, its corners, a one-pixel column and `count` random regions of `data` decoded at 1/`reduce`
    alone hold exactly the pixels of `whole` there."""
    height, width = whole.shape[-2:]
    regions = [(0, 0, height, width), (0, 0, 1, 1), (height - 1, width - 1, height, width), (height // 2, 0, height, 1)]
    regions += [
        (top, left, draw.randint(top + 1, height), draw.randint(left + 1, width))
        for top, left in ((draw.randrange(height), draw.randrange(width)) for _ in range(count))
    ]
    for top, left, bottom, right in regions:
        region = images.decode_region(data, reduce, top, left, bottom, right)
        assert region is not None
        assert torch.equal(region, whole[:, top:bottom, left:right]), (top, left, bottom, right)


@needs_decoder
@pytest.mark.parametrize("size", [48, 96])
def test_training_samples_are_byte_for_byte_those_of_the_whole_decode(tmp_path, monkeypatch, size):
    files = []
    for index, layout in enumerate(["4:2:0", "progressive", "grayscale", "4:2:2"]):
        path = tmp_path / f"{index}.jpg"
        path.write_bytes(_jpeg(640, 480, seed=index, **LAYOUTS[layout]))
        files.append((str(path), 0))
    calls = []
    monkeypatch.setattr(images, "region_decoder", lambda real=images.region_decoder: calls.append(1) or real())
    with_regions = ImageDataset(files, train_transform(size, 0.08), seed=3)
    samples = [with_regions[(index, epoch)].image for epoch in range(6) for index in range(len(files))]
    assert len(calls) == len(samples)  # every sample went through the region decoder
    monkeypatch.setattr(images, "region_decoder", lambda: None)
    without = ImageDataset(files, train_transform(size, 0.08), seed=3)
    for at, sample in enumerate(samples):
        assert torch.equal(sample, without[(at % len(files), at // len(files))].image), at
