"""The uint8 pipeline (crop, resize, flip in 8 bits; normalise whole batches on the device) keeps the
plain pipeline's semantics: the same crops and flips for the same random draws, the same values."""

import pytest
import torch
from PIL import Image
from torchvision.transforms import v2
from torchvision.transforms.v2.functional import pil_to_tensor

from ddptrain.config import DataConfig
from ddptrain.data.transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Augment,
    Preprocess,
    eval_transform,
    normalize,
    train_transform,
)


def test_normalize_equals_the_per_image_float_pipeline():
    images = torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8)
    plain = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    expected = torch.stack([plain(v2.functional.to_image(image)) for image in images])
    torch.testing.assert_close(normalize(images), expected, rtol=0, atol=1e-5)
    floats = torch.zeros(1, 3, 2, 2)
    assert normalize(floats) is floats  # already normalised batches pass through


def _gradient_image() -> Image.Image:
    x = torch.arange(96).view(1, 96).expand(64, 96)
    y = torch.arange(64).view(64, 1).expand(64, 96)
    return Image.fromarray(torch.stack([x * 2, y * 3, (x + y)], dim=-1).to(torch.uint8).numpy())


@pytest.mark.parametrize("seed", range(6))
def test_tensor_and_pil_inputs_get_the_same_crop_and_flip(seed):
    """A decoded JPEG arrives as a tensor, other files as PIL images: for the same draws the crop
    box and flip are the same, and the pixels agree up to the two resamplers' rounding."""
    transform = train_transform(32, 0.08)
    image = _gradient_image()
    torch.manual_seed(seed)
    from_pil = transform(image)
    torch.manual_seed(seed)
    from_tensor = transform(pil_to_tensor(image))
    assert from_pil.dtype == from_tensor.dtype == torch.uint8 and from_pil.shape == from_tensor.shape == (3, 32, 32)
    assert (from_pil.float() - from_tensor.float()).abs().mean() < 2.0  # out of 255: same region, same flip


def test_normalize_uses_the_models_mean_and_std():
    images = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    half = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    torch.testing.assert_close(normalize(images, half), images.float() / 127.5 - 1.0, rtol=0, atol=1e-5)


def test_a_config_without_preprocessing_values_means_imagenets():
    """Runs written before these options existed were trained with ImageNet's values: eval and predict keep them."""
    old = Preprocess.of(DataConfig(img_size=64))
    assert old == Preprocess(64, IMAGENET_MEAN, IMAGENET_STD, "bilinear", 0.875)
    recorded = Preprocess.of(DataConfig(img_size=32, mean="0.5,0.5,0.5", std="0.5,0.5,0.5", crop_fraction=0.95))
    assert recorded.stats == ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)) and recorded.crop_fraction == 0.95
    assert Preprocess.of(DataConfig(**recorded.flat())) == recorded  # what config.yaml records reads back the same


def test_evaluation_resizes_by_the_crop_fraction_with_the_interpolation_given():
    """The centre box is cropped first and resized alone: the pixels of Resize(40) + CenterCrop(32), up to the
    resampling filter's reach over the box's edge."""
    image = pil_to_tensor(_gradient_image().resize((48, 60)))
    bicubic = Preprocess(32, interpolation="bicubic", crop_fraction=0.8)
    expected = v2.functional.center_crop(
        v2.functional.resize(image, 40, interpolation=v2.InterpolationMode.BICUBIC, antialias=True), 32
    )
    got = eval_transform(32, bicubic)(image)  # 32 / 0.8 = 40, then the centre 32
    assert got.shape == expected.shape == (3, 32, 32)
    assert (got.float() - expected.float()).abs().mean() < 1.5


@pytest.mark.parametrize("policy", ["randaugment", "trivialaugment", "autoaugment"])
def test_augmentation_policies_change_the_image_and_repeat_for_the_same_draws(policy):
    image = _gradient_image()
    plain, augmented = train_transform(32, 0.5), train_transform(32, 0.5, Preprocess(), Augment(policy, 15, 1.0))
    outputs = []
    for transform in (plain, augmented, augmented):
        torch.manual_seed(4)
        outputs.append(transform(image))
    assert outputs[1].dtype == torch.uint8 and outputs[1].shape == (3, 32, 32)  # still the uint8 fast path
    assert not torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[1], outputs[2])


@pytest.mark.parametrize("policy", ["randaugment", "trivialaugment", "autoaugment"])
def test_augmentation_policies_run_for_models_preprocessed_with_bicubic(policy):
    """A ViT's pretrained config says bicubic; the policies' tensor rotations and shears take nearest or bilinear."""
    transform = train_transform(32, 0.5, Preprocess(32, interpolation="bicubic"), Augment(policy, 30, 1.0))
    for seed in range(20):  # enough draws to meet the geometric operations
        torch.manual_seed(seed)
        assert transform(_gradient_image()).shape == (3, 32, 32)
