import pytest
from PIL import Image

from ddptrain.data.images import UNREADABLE_ERRORS, is_image_file, open_rgb

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


def test_draft_decoding_keeps_the_requested_side(tmp_path):
    Image.new("RGB", (480, 320), (1, 2, 3)).save(tmp_path / "big.jpg")
    image = open_rgb(tmp_path / "big.jpg", min_side=70)
    assert min(image.size) >= 70
    assert image.size[0] < 480  # decoded at a reduced scale


def test_extensions_case_insensitive_and_hidden_ignored():
    assert is_image_file("a/B.JPEG") and is_image_file("x.TiF") and is_image_file("y.webp")
    assert not is_image_file("notes.txt") and not is_image_file(".hidden.jpg")
