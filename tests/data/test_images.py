import pytest
from PIL import Image

from ddptrain.data.images import UNREADABLE_ERRORS, is_image_file, load_rgb, open_rgb

from ..conftest import save_odd_modes


def test_every_mode_becomes_rgb(tmp_path):
    for path in save_odd_modes(tmp_path, "odd"):
        image = open_rgb(path)
        assert image.mode == "RGB", path.name
        assert image.size == (48, 40)


def test_sixteen_bit_keeps_its_range(tmp_path):
    import numpy as np

    values = np.full((8, 8), 65535, dtype=np.uint16)
    values[:, :4] = 0
    Image.fromarray(values).save(tmp_path / "wide.png")
    pixels = np.asarray(open_rgb(tmp_path / "wide.png"))
    assert pixels[0, 0].tolist() == [0, 0, 0]
    assert pixels[0, 7].tolist() == [255, 255, 255]  # not clipped to a single grey level


def test_transparent_pixels_become_white(tmp_path):
    image = Image.new("RGBA", (4, 4), (10, 20, 30, 0))
    image.save(tmp_path / "clear.png")
    assert open_rgb(tmp_path / "clear.png").getpixel((0, 0)) == (255, 255, 255)


@pytest.mark.parametrize("content", [b"", b"this is not an image", None])
def test_unreadable_files_raise_a_catchable_error(tmp_path, content):
    path = tmp_path / "bad.jpg"
    if content is None:  # a real JPEG cut in half
        Image.new("RGB", (64, 64), (200, 10, 10)).save(tmp_path / "full.jpg")
        content = (tmp_path / "full.jpg").read_bytes()[:200]
    path.write_bytes(content)
    with pytest.raises(UNREADABLE_ERRORS):
        open_rgb(path)
    with pytest.raises(UNREADABLE_ERRORS):  # the fast JPEG path hands broken files to PIL's errors
        load_rgb(path)


def test_draft_decoding_keeps_the_requested_side(tmp_path):
    Image.new("RGB", (480, 320), (1, 2, 3)).save(tmp_path / "big.jpg")
    image = open_rgb(tmp_path / "big.jpg", min_side=70)
    assert min(image.size) >= 70
    assert image.size[0] < 480  # decoded at a reduced scale


def test_extensions_case_insensitive_and_hidden_ignored():
    assert is_image_file("a/B.JPEG") and is_image_file("x.TiF") and is_image_file("y.webp")
    assert not is_image_file("notes.txt") and not is_image_file(".hidden.jpg")


def _photo(tmp_path, mode="RGB", size=(120, 90)):
    import numpy as np

    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).convert(mode)
    path = tmp_path / f"photo_{mode}.jpg"
    image.save(path, quality=90)
    return path


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_fast_jpeg_decoding_gives_the_pixels_pil_gives(tmp_path, mode):
    import torch
    from torchvision.transforms.v2.functional import pil_to_tensor

    path = _photo(tmp_path, mode)
    fast = load_rgb(path)
    assert isinstance(fast, torch.Tensor) and fast.dtype == torch.uint8 and fast.shape == (3, 90, 120)
    reference = pil_to_tensor(open_rgb(path))
    assert (fast.int() - reference.int()).abs().max() <= 1  # the same libjpeg-turbo; rounding at most


def test_files_the_fast_path_does_not_take_still_decode(tmp_path):
    cmyk = _photo(tmp_path, "CMYK")
    assert load_rgb(cmyk).mode == "RGB"  # through PIL
    big = _photo(tmp_path, "RGB", size=(480, 320))
    assert max(load_rgb(big, min_side=70).size) < 480  # large enough for draft decoding: PIL
    Image.new("RGB", (8, 8)).save(tmp_path / "small.png")
    assert load_rgb(tmp_path / "small.png").mode == "RGB"


def test_fast_path_keeps_the_decompression_bomb_guard(tmp_path, monkeypatch):
    path = _photo(tmp_path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 120 x 90 is now over twice the limit
    with pytest.raises(Image.DecompressionBombError):
        load_rgb(path)


def test_images_over_the_caps_are_refused_before_they_are_decoded(tmp_path, monkeypatch):
    from ddptrain.data.images import ImageLimits, ImageTooLarge

    Image.new("L", (300, 200)).save(tmp_path / "big.png")
    Image.new("RGB", (300, 200)).save(tmp_path / "big.jpg")
    small = ImageLimits(max_pixels=300 * 200 - 1)
    for name in ("big.png", "big.jpg"):  # PIL's path and the libjpeg-turbo fast path
        with pytest.raises(ImageTooLarge, match="300x200 = 0 Mpx, over the --max-image-pixels limit"):
            load_rgb(tmp_path / name, limits=small)
        assert load_rgb(tmp_path / name, limits=ImageLimits(max_pixels=300 * 200)) is not None

    opened = []
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a) or (_ for _ in ()).throw(AssertionError))
    with pytest.raises(ImageTooLarge, match=r"MB file, over the --max-image-mb limit .*; not read"):
        load_rgb(tmp_path / "big.png", limits=ImageLimits(max_bytes=10))
    assert opened == []  # the size comes from stat(): the file was never opened
