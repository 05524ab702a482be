"""Crop boxes drawn before decoding, and decoding at reduced size where the box allows: the same box on every
decode path, never more upsampling than a full decode, pixels within a small error of the full decode."""

import io
import math

import numpy as np
import pytest
import torch
from PIL import Image

from ddptrain.data.crops import REDUCTIONS, Box, EvalCrop, TrainCrop, stack
from ddptrain.data.datasets import Item, collate
from ddptrain.data.transforms import Preprocess, eval_transform, normalize, train_transform
from ddptrain.tools.bench.photos import photo

SIZE = 64


def _jpeg(width=640, height=480, mode="RGB", seed=0) -> bytes:
    image = photo(np.random.default_rng(seed), width, height)
    buffer = io.BytesIO()
    image.convert(mode).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _load(transform, data, seed):
    torch.manual_seed(seed)
    return transform.load(data)


def _error(a: torch.Tensor, b: torch.Tensor):
    diff = (a.float() - b.float()).abs()
    return diff.mean().item(), diff.flatten().quantile(0.99).item()


def test_reduced_decoding_crops_the_same_box_as_a_full_decode_within_a_small_pixel_error():
    data = _jpeg()
    reduced, full = train_transform(96, 0.08), train_transform(96, 0.08, reduced=False)
    factors = []
    for seed in range(40):
        torch.manual_seed(seed)
        box, size = reduced.plan(data)
        torch.manual_seed(seed)
        assert full.plan(data) == (box, size) and size == (640, 480)
        factors.append(box.reduction(96))
        a, b = _load(reduced, data, seed), _load(full, data, seed)
        assert a.shape == b.shape == (3, 96, 96) and a.dtype == torch.uint8
        mean, p99 = _error(a, b)
        if box.reduction(96) == 1:
            assert mean == 0.0  # nothing reduced: the very same pixels
        else:
            assert mean < 3.0 and p99 < 40, (seed, box, mean, p99)  # out of 255
    assert {1, 2, 4} <= set(factors)  # the draws met each case on a 640x480 photo at 96 px


def test_the_box_is_a_function_of_the_seed_alone_whatever_decodes_it():
    data = _jpeg()
    boxes = set()
    for transform in (train_transform(SIZE, 0.08), train_transform(SIZE, 0.08, reduced=False)):
        torch.manual_seed(3)
        boxes.add(transform.plan(data)[0])
    assert len(boxes) == 1
    torch.manual_seed(4)
    assert train_transform(SIZE, 0.08).plan(data)[0] not in boxes


@pytest.mark.parametrize("seed", range(200))
def test_a_reduction_never_upsamples_a_crop_the_full_decode_would_downsample(seed):
    generator = torch.Generator().manual_seed(seed)
    height, width = (int(v) for v in torch.randint(16, 2000, (2,), generator=generator))
    top, left = (float(v) for v in torch.rand(2, generator=generator) * torch.tensor([height, width]) / 2)
    box = Box(top, left, height - top, width - left)
    factor = box.reduction(SIZE)
    assert factor in (1, *REDUCTIONS)
    if factor > 1:
        assert min(box.height, box.width) / factor >= SIZE  # at least the output size at the reduced size
    if factor < 8:
        assert min(box.height, box.width) / (2 * factor) < SIZE  # and the largest factor that keeps it
    snapped = box.snapped(SIZE)
    assert snapped.reduction(SIZE) == factor
    assert box.top <= snapped.top < box.top + factor and box.left <= snapped.left < box.left + factor
    if factor > 1:  # on whole pixels of the reduced image
        assert all(v % factor == 0 for v in (snapped.top, snapped.left, snapped.height, snapped.width))


def test_training_boxes_keep_random_resized_crops_area_and_aspect_ranges():
    crop, flips = TrainCrop(SIZE, (0.25, 1.0)), 0
    for seed in range(300):
        torch.manual_seed(seed)
        box = crop.box(500, 375)
        assert box.top >= 0 and box.top + box.height <= 375 and box.left >= 0 and box.left + box.width <= 500
        area = box.height * box.width / (500 * 375)
        assert 0.25 * 0.9 <= area <= 1.0 and 3 / 4 * 0.9 <= box.width / box.height <= 4 / 3 * 1.1
        flips += box.flip
    assert 100 < flips < 200


def test_evaluation_boxes_are_the_centre_of_the_resized_image_and_reduce_where_they_may():
    box = EvalCrop(160, 0.875).box(500, 375)  # shorter side to 182, the centre 160: 330 of 375 source pixels
    assert math.isclose(box.height, 160 * 375 / 182, abs_tol=2) and box.reduction(160) == 2  # 164 px at 1/2
    assert EvalCrop(224, 0.875).box(500, 375).reduction(224) == 1
    data = _jpeg(1200, 900)
    reduced, full = eval_transform(SIZE), eval_transform(SIZE, reduced=False)
    assert EvalCrop(SIZE).box(1200, 900).reduction(SIZE) == 8
    mean, p99 = _error(reduced.load(data), full.load(data))
    assert mean < 4.5 and p99 < 40  # decoded at 1/8 (112 px a side), against the full 900: the most reduced case


@pytest.mark.parametrize("mode", ["L", "CMYK"])
def test_grayscale_and_cmyk_jpegs_reduce_like_colour_ones(mode):
    data = _jpeg(mode=mode)
    for seed in range(6):
        full = train_transform(SIZE, 0.08, reduced=False)
        a, b = _load(train_transform(SIZE, 0.08), data, seed), _load(full, data, seed)
        assert a.shape == (3, SIZE, SIZE) and _error(a, b)[0] < 3.0


def test_a_png_is_decoded_whole_and_cropped_like_a_jpeg():
    buffer = io.BytesIO()
    photo(np.random.default_rng(1), 640, 480).save(buffer, format="PNG")
    reduced, full = train_transform(SIZE, 0.08), train_transform(SIZE, 0.08, reduced=False)
    for seed in range(5):
        assert torch.equal(_load(reduced, buffer.getvalue(), seed), _load(full, buffer.getvalue(), seed))


def test_channel_last_batches_hold_and_normalise_the_same_values_as_contiguous_ones():
    data = _jpeg()
    images = [_load(train_transform(SIZE, 0.08), data, seed) for seed in range(4)]
    batch = stack(images)
    assert batch.shape == (4, 3, SIZE, SIZE) and batch.permute(0, 2, 3, 1).is_contiguous()  # no reordering copy
    assert torch.equal(batch, torch.stack([image.contiguous() for image in images]))
    stats = Preprocess().stats
    assert torch.equal(normalize(batch, stats), normalize(batch.contiguous(), stats))
    collated = collate([Item(image, 0, ()) for image in images], normalized=True)
    assert torch.equal(collated.images, normalize(batch.contiguous(), stats))  # a CPU model's batch, normalised


def test_a_decoded_image_given_to_the_transform_is_cropped_from_its_own_size():
    image = Image.open(io.BytesIO(_jpeg())).convert("RGB")
    torch.manual_seed(0)
    out = train_transform(SIZE, 0.08)(image)
    assert out.shape == (3, SIZE, SIZE) and out.dtype == torch.uint8


@pytest.mark.parametrize("size", [160, 224])
def test_a_cpu_crop_holds_torchvisions_resize_of_the_region_byte_for_byte(size):
    """The loader's own call into torch's uint8 resampling gives exactly the pixels torchvision's `resize` would:
    training samples do not change with the faster path."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as F

    from ddptrain.data.crops import resize_region

    rng = np.random.default_rng(size)
    image = torch.from_numpy(np.array(photo(rng, 500, 375))).permute(2, 0, 1)
    for _ in range(20):
        h, w = int(rng.integers(40, 376)), int(rng.integers(40, 501))
        top, left = int(rng.integers(0, 376 - h)), int(rng.integers(0, 501 - w))
        region = image[:, top : top + h, left : left + w]
        flip = bool(rng.integers(0, 2))
        ours = resize_region(region, size, InterpolationMode.BILINEAR, flip)
        theirs = F.resize(region.unsqueeze(0), [size, size], interpolation=InterpolationMode.BILINEAR, antialias=True)[
            0
        ]
        assert torch.equal(ours, theirs.flip(-1) if flip else theirs)
