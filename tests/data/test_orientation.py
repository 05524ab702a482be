"""Photos stored turned, with an EXIF orientation (a camera's portrait shot stored landscape, tag 6 or 8), are
trained on, evaluated, predicted, pre-sized and shown as viewers show them: upright. The geometry is checked against
PIL's `ImageOps.exif_transpose`; the pipeline on pictures whose four quarters have four colours."""

from __future__ import annotations

import base64
import io
import random

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from ddptrain.data import images
from ddptrain.data.crops import Box, stored_box
from ddptrain.data.datasets import ImageDataset, collate
from ddptrain.data.images import PIL_TRANSPOSE, image_geometry, orient, upright_size
from ddptrain.data.presize import Presize
from ddptrain.data.transforms import eval_transform, train_transform
from ddptrain.tools.worst import _thumbnail

ORIENTATIONS = range(1, 9)
INVERSE = {6: 8, 8: 6}  # the other turns undo themselves
QUARTERS = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255))  # top-left, top-right, bottom-left, bottom-right


def upright_picture(width: int = 96, height: int = 64) -> Image.Image:
    pixels = np.zeros((height, width, 3), np.uint8)
    for k, colour in enumerate(QUARTERS):
        rows = slice(0, height // 2) if k < 2 else slice(height // 2, height)
        cols = slice(0, width // 2) if k % 2 == 0 else slice(width // 2, width)
        pixels[rows, cols] = colour
    return Image.fromarray(pixels)


def stored(picture: Image.Image, orientation: int, fmt: str = "JPEG") -> bytes:
    """`picture` stored turned, with the EXIF orientation that shows it upright again."""
    turned = picture if orientation == 1 else picture.transpose(PIL_TRANSPOSE[INVERSE.get(orientation, orientation)])
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    turned.save(out, fmt, exif=exif.tobytes(), **({"quality": 95} if fmt == "JPEG" else {}))
    return out.getvalue()


def assert_upright(image: torch.Tensor, flip: bool = False) -> None:
    """Each quarter of a (3, H, W) uint8 image has its colour (mirrored left-right if `flip`)."""
    h, w = image.shape[-2:]
    expected = [QUARTERS[1], QUARTERS[0], QUARTERS[3], QUARTERS[2]] if flip else list(QUARTERS)
    for k, colour in enumerate(expected):
        y, x = (h // 4 if k < 2 else 3 * h // 4), (w // 4 if k % 2 == 0 else 3 * w // 4)
        got = image[:, y, x].tolist()
        assert max(abs(a - b) for a, b in zip(got, colour)) < 40, f"quarter {k}: {got}, expected {colour}"


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_turning_and_the_box_map_agree_with_pils_exif_transpose(orientation):
    rng = np.random.default_rng(orientation)
    pixels = rng.integers(0, 256, (13, 21, 3), dtype=np.uint8)
    png = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(pixels).save(png, "PNG", exif=exif.tobytes())
    upright = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(png.getvalue()))))
    tensor = torch.from_numpy(pixels).permute(2, 0, 1)
    assert (orient(tensor, orientation).permute(1, 2, 0).numpy() == upright).all()
    width, height = upright_size(21, 13, orientation)
    assert upright.shape[:2] == (height, width)
    draw = random.Random(orientation)
    for _ in range(50):  # any box of the upright picture is the turned region of the stored pixels it maps to
        x0, y0 = draw.randrange(width), draw.randrange(height)
        x1, y1 = draw.randint(x0 + 1, width), draw.randint(y0 + 1, height)
        box = stored_box(Box(y0, x0, y1 - y0, x1 - x0), orientation, 21, 13)
        region = tensor[:, int(box.top) : int(box.top + box.height), int(box.left) : int(box.left + box.width)]
        assert (orient(region, box.orient).permute(1, 2, 0).numpy() == upright[y0:y1, x0:x1]).all()


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_the_orientation_is_read_from_the_header(fmt, orientation):
    data = stored(upright_picture(), orientation, fmt)
    if fmt == "JPEG":  # decoded as stored (turned: 64 x 96), the crop's region turned after
        assert image_geometry(data) == (*upright_size(96, 64, orientation), orientation)
    else:  # decoded upright
        assert image_geometry(data) == (96, 64, 1)


def _app1(payload: bytes) -> bytes:
    return b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload


def _xmp(orientation: str, form: str = "attribute") -> bytes:
    inner = (
        f'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="{orientation}"/>'
        if form == "attribute"
        else f"<rdf:Description><tiff:Orientation>{orientation}</tiff:Orientation></rdf:Description>"
    )
    packet = f'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF>{inner}</rdf:RDF></x:xmpmeta>'
    return _app1(b"http://ns.adobe.com/xap/1.0/\x00" + packet.encode())


def _exif(orientation=None) -> bytes:
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    exif[0x0131] = "an editor"  # a tag besides, so that a block without an orientation is not empty
    return _app1(exif.tobytes())


XMP_CASES = {  # APP1 segments before the frame -> the orientation PIL's exif_transpose applies
    "xmp attribute, no exif": ([_xmp("6")], 6),
    "xmp element, no exif": ([_xmp("8", "element")], 8),
    "exif without the tag, then xmp": ([_exif(), _xmp("3")], 3),
    "xmp, then exif without the tag": ([_xmp("5"), _exif()], 5),
    "exif says 1: xmp ignored": ([_exif(1), _xmp("6")], 1),
    "exif says 6, xmp 8": ([_xmp("8"), _exif(6)], 6),
    "the last xmp packet counts": ([_xmp("6"), _xmp("7")], 7),
    "the last xmp packet holds none": ([_xmp("6"), _app1(b"http://ns.adobe.com/xap/1.0/\x00" + b"<x:xmpmeta/>")], 1),
    "xmp out of range": ([_xmp("9")], 1),
    "xmp zero": ([_xmp("0")], 1),
    "not a number": ([_xmp("six")], 1),
}


@pytest.mark.parametrize("case", XMP_CASES)
def test_an_orientation_kept_in_xmp_is_read_as_pil_reads_it(case):
    """Some editors keep the orientation in XMP only; PIL turns by it where EXIF has no orientation tag."""
    segments, expected = XMP_CASES[case]
    plain = io.BytesIO()
    picture = upright_picture()
    turned = picture if expected == 1 else picture.transpose(PIL_TRANSPOSE[INVERSE.get(expected, expected)])
    turned.save(plain, "JPEG", quality=95)
    data = plain.getvalue()[:2] + b"".join(segments) + plain.getvalue()[2:]
    pil = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    assert pil.size == (96, 64)  # PIL turns it upright: the case says what PIL reads
    assert image_geometry(data) == (*upright_size(96, 64, expected), expected)
    assert_upright(eval_transform(32).load(data))
    assert images.open_upright(data).size == (96, 64)


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_a_turned_photo_is_evaluated_and_trained_on_upright(orientation, monkeypatch):
    data = stored(upright_picture(), orientation)
    assert_upright(eval_transform(32).load(data))
    assert_upright(eval_transform(32, reduced=False).load(data))
    transform = train_transform(32, 0.9)
    samples = []
    for seed in range(4):
        torch.manual_seed(seed)
        box, _ = transform.plan(data)
        torch.manual_seed(seed)
        samples.append(transform.load(data))  # the box's region alone, where the compiled decoder is installed
        assert_upright(samples[-1], box.flip)
        torch.manual_seed(seed)
        assert_upright(train_transform(32, 0.9, reduced=False).load(data), box.flip)
    monkeypatch.setattr(images, "region_decoder", lambda: None)
    for seed, sample in enumerate(samples):  # the whole decode at the same scale gives the same bytes
        torch.manual_seed(seed)
        assert torch.equal(sample, transform.load(data))


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "TIFF"])
@pytest.mark.parametrize("orientation", [2, 6, 8])
def test_other_formats_decode_upright_once(fmt, orientation):
    """Pillow turns a TIFF itself as it loads it, and not a PNG or a WebP: each is turned exactly once."""
    data = stored(upright_picture(), orientation, fmt)
    assert image_geometry(data) == (96, 64, 1)  # decoded upright: nothing left to turn
    for seed in range(3):
        torch.manual_seed(seed)
        box, _ = train_transform(32, 0.9).plan(data)
        torch.manual_seed(seed)
        assert_upright(train_transform(32, 0.9).load(data), box.flip)
    assert_upright(eval_transform(32).load(data))


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_a_pil_image_from_a_python_dataset_is_turned_upright_once(orientation):
    opened = Image.open(io.BytesIO(stored(upright_picture(), orientation)))
    assert_upright(eval_transform(32)(opened))
    assert_upright(eval_transform(32)(ImageOps.exif_transpose(opened)))  # already turned by its library


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_a_turned_png_gives_the_sample_its_upright_copy_gives(orientation):
    """Lossless, so exactly: the crop is drawn on the upright picture, whatever way its pixels are stored."""
    picture = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 56, 3), dtype=np.uint8))
    turned, upright = stored(picture, orientation, "PNG"), stored(picture, 1, "PNG")
    for transform in (train_transform(24, 0.3), eval_transform(24)):
        for seed in range(3):
            torch.manual_seed(seed)
            a = transform.load(turned)
            torch.manual_seed(seed)
            assert torch.equal(a, transform.load(upright))


def test_the_device_path_turns_what_the_cpu_path_turns(tmp_path):
    paths = []
    for orientation in (1, 6, 3, 8):
        path = tmp_path / f"o{orientation}.jpg"
        path.write_bytes(stored(upright_picture(160, 120), orientation))
        paths.append((str(path), orientation))
    for transform in (train_transform(32, 0.9, reduced=False), eval_transform(32, reduced=False)):
        cpu = ImageDataset(paths, transform, seed=3)
        device = ImageDataset(paths, transform, seed=3, encoded=True)
        reference = collate([cpu[(i, 1)] for i in range(len(paths))]).images
        batch = collate([device[(i, 1)] for i in range(len(paths))], prepare=transform)
        assert batch.encoded is not None
        on_device = batch.encoded.decode(torch.device("cpu"))
        assert (on_device.float() - reference.float()).abs().max() < 8


def test_a_pre_sized_photo_is_stored_upright(tmp_path):
    data = stored(upright_picture(600, 400), 6)
    assert image_geometry(data) == (400, 600, 6)
    smaller = Presize(max_side=300).apply(data)
    assert smaller is not None and image_geometry(smaller) == (300, 200, 1)
    assert_upright(torch.from_numpy(np.array(Image.open(io.BytesIO(smaller)).convert("RGB"))).permute(2, 0, 1))


def test_the_reports_thumbnail_is_upright(tmp_path):
    path = tmp_path / "turned.jpg"
    path.write_bytes(stored(upright_picture(200, 120), 8))
    uri = _thumbnail(path)
    assert uri is not None
    image = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB")
    assert image.width > image.height
    assert_upright(torch.from_numpy(np.array(image)).permute(2, 0, 1))
