"""JPEGs at the decode limit, against what a file can say about itself: the crop box is drawn from the header before
any decoding, so a header that lies, a file cut short at any reduction, a damaged file handed to the device, a
pre-sizing record that is not one, and `--max-side` (with or without `--restart-markers`) on images that are not
images are each answered — skipped and
counted, left as they were, or refused in one line — never a crash or a wrong crop."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from ddptrain.data import images
from ddptrain.data.datasets import ImageDataset
from ddptrain.data.images import ImageLimits
from ddptrain.data.presize import Presize, recorded_side
from ddptrain.data.shards import open_shard_set, write_shards
from ddptrain.data.sources import load_split
from ddptrain.data.transforms import train_transform
from ddptrain.errors import DataError
from ddptrain.tools.bench.photos import photo


def _jpeg(width=800, height=600) -> bytes:
    buffer = io.BytesIO()
    photo(np.random.default_rng(0), width, height).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _with_header_size(data: bytes, width: int, height: int) -> bytes:
    out = bytearray(data)
    at = out.find(b"\xff\xc0")
    out[at + 5 : at + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(out)


@pytest.mark.parametrize(
    "name, data, reason",
    [
        ("zero-height.jpg", _with_header_size(_jpeg(), 800, 0), "0 pixels in its JPEG header"),
        ("zero-width.jpg", _with_header_size(_jpeg(), 0, 600), "0x600 pixels in its JPEG header"),
        ("huge-header.jpg", _with_header_size(_jpeg(), 65000, 65000), "over the --max-image-pixels limit"),
        ("cut-short.jpg", _jpeg()[:30000], "truncated"),
        ("header-only.jpg", _jpeg()[:700], ""),
    ],
)
@pytest.mark.parametrize("reduced", [True, False])
def test_a_jpeg_whose_header_misleads_is_skipped_and_counted_on_every_decode_path(
    tmp_path, name, data, reason, reduced
):
    path = tmp_path / name
    path.write_bytes(data)
    dataset = ImageDataset([(str(path), 0)], train_transform(64, 0.08, reduced=reduced), seed=1)
    for epoch in range(4):  # boxes that reduce by 1, 2, 4: the same verdict
        item = dataset[(0, epoch)]
        assert item.image is None and len(item.failures) == 1 and name in item.failures[0]
        assert reason in item.failures[0]


def test_a_header_smaller_than_the_scan_crops_within_what_is_decoded(tmp_path):
    """A header that says 64x48 over a 800x600 scan: decoders follow the header, and so does the box."""
    path = tmp_path / "small-header.jpg"
    path.write_bytes(_with_header_size(_jpeg(), 64, 48))
    item = ImageDataset([(str(path), 0)], train_transform(32, 0.08), seed=1)[(0, 0)]
    assert (item.image is not None and item.image.shape == (3, 32, 32)) or item.failures


def test_a_damaged_pre_sizing_record_in_a_shard_index_is_refused_in_one_line(tmp_path):
    for record in ("big", {"max_side": "384"}, {"max_side": -1}, {"max_side": True}, ["384"]):
        with pytest.raises(DataError, match="index is damaged: re-make the set"):
            recorded_side({"presized": record}, None, "shards/")


@pytest.mark.parametrize("marked", [False, True], ids=["max-side", "max-side and restart markers"])
def test_max_side_leaves_what_is_not_an_image_as_it_was_for_the_loader_to_count(tmp_path, marked):
    if marked and images.region_decoder() is None:
        pytest.skip("restart markers are written by ddptrain's compiled decoder, not built in this install")
    folder = tmp_path / "data" / "a"
    folder.mkdir(parents=True)
    (folder / "text.jpg").write_bytes(b"not an image at all")
    (folder / "cut.jpg").write_bytes(_jpeg()[:20000])
    (folder / "bomb.jpg").write_bytes(_with_header_size(_jpeg(), 65000, 65000))
    (folder / "fine.jpg").write_bytes(_jpeg())
    (tmp_path / "data" / "b").mkdir()
    (tmp_path / "data" / "b" / "small.jpg").write_bytes(_jpeg(120, 90))
    split = load_split(tmp_path / "data", 0.0, 0)
    summary = write_shards(split, tmp_path / "set", 1 << 20, 0, presize=Presize(256), restart_markers=marked)
    assert summary["resized"] == 1 and summary["restart_marked"] == 2 * marked
    _, train, _, index = open_shard_set(str(tmp_path / "set"))
    kept = {train.relative(i): train.read(i, ImageLimits()) for i in range(len(train))}
    assert kept["a/text.jpg"] == b"not an image at all" and kept["a/cut.jpg"] == _jpeg()[:20000]
    assert json.loads((tmp_path / "set" / "shards.json").read_text())["presized"]["max_side"] == 256
    loader = ImageDataset(train, train_transform(32, 0.08), seed=0)
    items = [loader[(i, 0)] for i in range(len(train))]
    assert sum(len(item.failures) for item in items) == 3  # skipped and counted, as without the flags
    assert [tuple(item.image.shape) for item in items if item.image is not None] == [(3, 32, 32)] * 2


def test_a_cut_short_jpeg_is_skipped_even_where_its_crop_lies_before_the_cut(tmp_path):
    """Region decoding stops after the crop's last row: a file cut at 90 % must still be skipped on every box,
    the top ones included, as the whole decode skips it."""
    data = _jpeg(800, 600)
    path = tmp_path / "cut-late.jpg"
    path.write_bytes(data[: len(data) * 9 // 10])
    dataset = ImageDataset([(str(path), 0)], train_transform(64, 0.08), seed=1)
    for epoch in range(12):
        item = dataset[(0, epoch)]
        assert item.image is None and len(item.failures) == 1, epoch


@pytest.mark.skipif(images.region_decoder() is None, reason="installed without the compiled region decoder")
def test_what_it_cannot_decode_exactly_goes_to_the_whole_decode():
    data = _jpeg(300, 225)
    buffer = io.BytesIO()
    Image.new("CMYK", (64, 48), (10, 20, 30, 40)).save(buffer, format="JPEG")
    png = io.BytesIO()
    Image.new("RGB", (64, 48)).save(png, format="PNG")
    for refused in (
        data[: len(data) // 2],  # cut short: its region may lie before the cut, the verdict must not depend on it
        data[:-2],  # no end-of-image marker
        data + b"trailing bytes",
        buffer.getvalue(),  # CMYK
        png.getvalue(),
        b"\xff\xd8 not a jpeg \xff\xd9",
    ):
        assert images.decode_region(refused, 1, 0, 0, 10, 10) is None
    assert images.decode_region(data, 1, 0, 0, 300, 10) is None  # below the image
    assert images.decode_region(data, 2, 0, 0, 10, 151) is None  # right of the image at half size
    assert images.decode_region(data, 1, 5, 5, 5, 9) is None  # empty


def _exif_segment(tiff: bytes) -> bytes:
    payload = b"Exif\x00\x00" + tiff
    return b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload


def _orientation_entry(order: str, value: int, kind: int = 3) -> bytes:
    return (
        (0x0112).to_bytes(2, order)
        + kind.to_bytes(2, order)
        + (1).to_bytes(4, order)
        + value.to_bytes(2, order)
        + b"\0\0"
    )


_BIG = b"MM\x00\x2a\x00\x00\x00\x08"
_LIES = {
    "orientation 9": _BIG + b"\x00\x01" + _orientation_entry("big", 9),
    "orientation 0": _BIG + b"\x00\x01" + _orientation_entry("big", 0),
    "a RATIONAL, not a number": _BIG + b"\x00\x01" + _orientation_entry("big", 6, kind=5),
    "a directory past the end": b"MM\x00\x2a\x7f\xff\xff\xff",
    "65535 entries in 12 bytes": _BIG + b"\xff\xff" + _orientation_entry("big", 6)[:10],
    "cut inside the entry": _BIG + b"\x00\x01" + _orientation_entry("big", 6)[:9],
    "not TIFF": b"XX\x00\x2a\x00\x00\x00\x08\x00\x00",
    "empty": b"",
}


@pytest.mark.parametrize("lie", list(_LIES), ids=list(_LIES))
def test_an_exif_block_that_lies_leaves_the_photo_as_stored(lie):
    """A damaged or hand-made EXIF orientation is no orientation: the photo is trained on as its pixels are stored,
    never an error, a wrong size or a turn by a value EXIF does not define."""
    plain = _jpeg(160, 120)
    data = plain[:2] + _exif_segment(_LIES[lie]) + plain[2:]
    assert images.image_geometry(data) == (160, 120, 1)
    assert train_transform(48, 0.5).load(data).shape == (3, 48, 48)


def test_an_exif_segment_whose_length_runs_past_the_file_reads_no_orientation():
    plain = _jpeg(160, 120)
    cut = plain[:2] + b"\xff\xe1\xff\xf0Exif\x00\x00MM\x00\x2a"  # says 65,520 bytes, has 12
    assert images.exif_orientation_tag(cut[6:]) is None
    assert images._jpeg_header(cut) is None  # no frame header within the file: not read as a JPEG


def test_several_exif_segments_give_the_first_orientation_they_hold():
    """Duplicates: an editor that appended a second EXIF block; the first that holds an orientation counts."""
    plain = _jpeg(160, 120)
    none = _BIG + b"\x00\x00"  # an empty directory
    six = _BIG + b"\x00\x01" + _orientation_entry("big", 6)
    three = _BIG + b"\x00\x01" + _orientation_entry("big", 3)
    data = plain[:2] + _exif_segment(none) + _exif_segment(six) + _exif_segment(three) + plain[2:]
    assert images.image_geometry(data) == (160, 120, 6)


def test_a_full_size_exif_directory_without_an_orientation_is_read_to_its_end_and_counts_as_none():
    """Size: the largest directory a segment can hold (5,450 entries, none the orientation) is bounded work."""
    entries = ((0x0100).to_bytes(2, "big") + bytes(10)) * 5450  # 5,450 image-width tags
    tiff = _BIG + (5450).to_bytes(2, "big") + entries
    plain = _jpeg(160, 120)
    data = plain[:2] + _exif_segment(tiff) + plain[2:]
    assert len(tiff) <= 65_535 - 2 - 6  # what one segment can hold after its length and "Exif\0\0"
    assert images.image_geometry(data) == (160, 120, 1)


def test_full_size_xmp_packets_of_near_misses_are_read_to_the_frame_and_count_as_none():
    """Size: 100 XMP segments of 64 KB, each full of `tiff:Orientation` with no value, before the frame (6.5 MB
    scanned in 12 ms here): bounded work, no orientation, the frame still found."""
    packet = b"http://ns.adobe.com/xap/1.0/\x00" + b"tiff:Orientation " * (65_000 // 17)
    segment = b"\xff\xe1" + (len(packet) + 2).to_bytes(2, "big") + packet
    plain = _jpeg(160, 120)
    assert images.image_geometry(plain[:2] + segment * 100 + plain[2:]) == (160, 120, 1)
    six = b'<x:xmpmeta><rdf:Description tiff:Orientation="6"/></x:xmpmeta>'
    cut = b"\xff\xe1" + (65_000).to_bytes(2, "big") + b"http://ns.adobe.com/xap/1.0/\x00" + six  # runs past the end
    with pytest.raises(images.UNREADABLE_ERRORS):  # no frame: unreadable (skipped and counted), as before
        images.image_geometry(plain[:2] + cut)
