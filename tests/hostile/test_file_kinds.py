"""File kinds and sizes: what is not a regular file is never read (a FIFO would block its reader for ever,
`/dev/zero` never ends and reports size 0), nothing is read beyond `--max-image-mb`, and a link loop cannot make a
listing endless. Each is skipped and counted (a training image), or refused in one line (`predict`)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest

from ddptrain.data import images
from ddptrain.data.datasets import ImageDataset
from ddptrain.data.images import ImageLimits, ImageTooLarge, NotARegularFile, read_image_file
from ddptrain.data.index import SampleIndex, scan_images
from ddptrain.tools.demodata import render_image

from ..conftest import cli_env


@contextmanager
def _within(seconds: int):
    """Fail the test instead of hanging it: a read that blocks is the bug under test."""

    def expired(signum, frame):
        raise AssertionError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_fifo_named_like_an_image_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "x.jpg"
    os.mkfifo(fifo)
    with _within(5), pytest.raises(NotARegularFile, match="a FIFO, not a regular file"):
        read_image_file(fifo, ImageLimits())


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_a_device_or_a_link_to_one_is_refused_before_a_byte_is_read(tmp_path, target):
    link = tmp_path / "zero.jpg"
    link.symlink_to(target)
    with _within(5), pytest.raises(NotARegularFile, match="a character device"):
        read_image_file(link, ImageLimits())


def test_a_folder_where_an_image_is_expected_is_refused(tmp_path):
    (tmp_path / "x.jpg").mkdir()
    with pytest.raises(NotARegularFile, match="a folder"):
        read_image_file(tmp_path / "x.jpg", ImageLimits())


def test_a_huge_sparse_file_is_refused_from_its_size_without_reading_it(tmp_path):
    huge = tmp_path / "huge.jpg"
    with open(huge, "wb") as handle:
        handle.truncate(10 * 2**30)  # 10 GB, nothing on disk
    with _within(5), pytest.raises(ImageTooLarge, match="10240.0 MB file, over the --max-image-mb limit of 128 MB"):
        read_image_file(huge, ImageLimits())


def test_manifest_rows_naming_a_fifo_and_a_device_are_skipped_and_counted_in_training(tmp_path):
    """The report: a FIFO row blocked its rank, a /dev/zero row ate 21 GB in a second."""
    good = tmp_path / "good.jpg"
    good.write_bytes(render_image(0, 0, 0, "disc"))
    os.mkfifo(tmp_path / "fifo.jpg")
    samples = SampleIndex.from_pairs(tmp_path, [(str(tmp_path / "fifo.jpg"), 0), ("/dev/zero", 1), (str(good), 0)])
    dataset = ImageDataset(samples, lambda image: image, substitute=True)
    with _within(10):
        items = [dataset[(i, 0)] for i in range(3)]
    assert all(item.image is not None for item in items)  # substituted by the readable image
    failures = [failure for item in items for failure in item.failures]
    assert any("fifo.jpg: a FIFO, not a regular file" in f for f in failures)
    assert any("/dev/zero: a character device, not a regular file" in f for f in failures)


def test_a_link_loop_in_the_data_folder_is_listed_once_with_a_warning(tmp_path, caplog):
    cls = tmp_path / "cat"
    cls.mkdir()
    (cls / "a.jpg").write_bytes(b"x")
    (cls / "loop").symlink_to(cls)  # cat/loop -> cat
    (cls / "deeper").mkdir()
    (cls / "deeper" / "up").symlink_to(tmp_path)
    with _within(10), caplog.at_level(logging.WARNING, logger="ddptrain"):
        found = scan_images(tmp_path)
    assert found == ["cat/a.jpg"]
    assert any("lead to a folder already listed" in r.message for r in caplog.records)


def _predict(checkpoint, *paths):
    return subprocess.run(
        [sys.executable, "-m", "ddptrain", "predict", "--checkpoint", str(checkpoint), *map(str, paths)],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A model file `predict` loads: a tiny model exported as safetensors, its card beside it."""
    from safetensors.torch import save_model

    from ddptrain.models import build_model
    from ddptrain.tools.modelfile import ModelCard, sidecar_path

    path = tmp_path_factory.mktemp("model") / "tiny.safetensors"
    save_model(build_model("timm:test_resnet", 2), str(path))
    config = {"model": "timm:test_resnet", "img_size": 32, "data": "/d"}
    card = ModelCard(
        "ddptrain",
        "timm:test_resnet",
        32,
        ["disc", "ring"],
        "RGB",
        [0.5] * 3,
        [0.5] * 3,
        None,
        None,
        1,
        "test",
        "0",
        config,
    )
    sidecar_path(path).write_text(json.dumps(card.to_dict()))
    return path


def test_predict_on_a_fifo_says_so_and_on_no_images_is_an_error(checkpoint, tmp_path):
    os.mkfifo(tmp_path / "pipe.jpg")
    (tmp_path / "empty").mkdir()
    proc = _predict(checkpoint, tmp_path / "pipe.jpg")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"] == "a FIFO, not a regular file; not read"
    empty = _predict(checkpoint, tmp_path / "empty")
    assert empty.returncode != 0 and empty.stdout == ""
    assert "no images in" in empty.stderr and len(empty.stderr.strip().splitlines()) == 1


def test_predict_on_a_folder_gives_each_fifo_and_broken_link_in_it_a_line_and_reads_the_rest(checkpoint, tmp_path):
    """A folder's FIFO or broken link named x.jpg was passed over in silence; named alone it had a line."""
    (tmp_path / "one.jpg").write_bytes(render_image(0, 0, 0, "disc"))
    os.mkfifo(tmp_path / "pipe.jpg")
    (tmp_path / "gone.png").symlink_to(tmp_path / "nowhere.png")
    with _within(60):
        proc = _predict(checkpoint, tmp_path)
    lines = {json.loads(line)["path"]: json.loads(line) for line in proc.stdout.splitlines()}
    assert "topk" in lines[str(tmp_path / "one.jpg")]
    assert lines[str(tmp_path / "pipe.jpg")]["error"] == "a FIFO, not a regular file; not read"
    assert lines[str(tmp_path / "gone.png")]["error"] == "a broken link, not a regular file; not read"
    assert proc.returncode == 1  # as for any image that could not be read


def test_a_class_folders_fifo_device_and_broken_links_are_left_out_counted_and_named(tmp_path, caplog):
    """A data set whose images are links into a git-annex or DVC store not fetched yet, or a FIFO or device named
    x.jpg, lost those images from training without a word: now one warning counts each kind and names them."""
    from ddptrain.data.sources.folder import scan_classes

    for name in ("ants", "bees"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.jpg").write_bytes(b"x")
    (tmp_path / "ants" / "annexed.jpg").symlink_to("../.git/annex/objects/xx/SHA256E-s1--0.jpg")
    (tmp_path / "ants" / "annexed2.JPG").symlink_to("../.git/annex/objects/yy/SHA256E-s1--1.jpg")
    os.mkfifo(tmp_path / "bees" / "pipe.png")
    (tmp_path / "bees" / "zero.jpg").symlink_to("/dev/zero")
    (tmp_path / "bees" / "old.gif").write_bytes(b"GIF89a")
    with _within(10), caplog.at_level(logging.WARNING, logger="ddptrain"):
        classes, found = scan_classes(tmp_path)
    assert {c: [os.path.basename(p) for p in found[c]] for c in classes} == {"ants": ["a.jpg"], "bees": ["a.jpg"]}
    warnings = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert warnings == [
        f"{tmp_path}: 1 picture in a format ddptrain does not read from folders is left out (1 .gif: bees/old.gif); "
        f"convert it to JPEG or PNG to use it (read: {images.EXTENSIONS_NAMED}); 4 files named as images are not "
        "regular files and are left out (2 broken link, 1 FIFO, 1 character device: ants/annexed.jpg, "
        "ants/annexed2.JPG, bees/pipe.png, ...); a broken link is often a file of a git-annex or DVC store not "
        "fetched yet (git annex get, dvc pull)"
    ]


def test_a_manifest_row_that_is_a_broken_link_is_skipped_as_one(tmp_path):
    (tmp_path / "annexed.jpg").symlink_to(".git/annex/objects/xx/SHA256E-s1--0.jpg")
    with pytest.raises(NotARegularFile, match=r"^a broken link \(to .git/annex/objects/xx/SHA256E-s1--0.jpg\), not a"):
        read_image_file(tmp_path / "annexed.jpg", ImageLimits())
    with pytest.raises(FileNotFoundError):  # a file that is not there at all stays the system's error
        read_image_file(tmp_path / "nothing.jpg", ImageLimits())


def test_a_class_folder_of_unfetched_links_is_refused_before_launch_naming_them(tmp_path):
    from ddptrain.data import sources
    from ddptrain.errors import DataError

    (tmp_path / "ants").mkdir()
    (tmp_path / "ants" / "a.jpg").write_bytes(render_image(0, 0, 0, "disc"))
    (tmp_path / "bees").mkdir()
    (tmp_path / "bees" / "b.jpg").symlink_to("../.git/annex/objects/b.jpg")
    with pytest.raises(
        DataError,
        match=r"class folder 'bees' .* 1 file named as an image is not a regular file .*"
        r"\(1 broken link: b.jpg\); a broken link is often .* \(git annex get, dvc pull\)",
    ):
        sources.check(str(tmp_path), sources.Reading())


def test_pictures_in_other_formats_are_left_out_counted_and_named_once(tmp_path, caplog):
    """A phone's HEIC photos or a GIF in a class folder were passed over in silence: the listing now says how many
    of each kind it left out, names a few, and says what to do; dot-files and other files stay unmentioned."""
    from ddptrain.data.sources.folder import scan_classes

    for name in ("ants", "bees"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.jpg").write_bytes(b"x")
    (tmp_path / "ants" / "phone.HEIC").write_bytes(b"x")
    (tmp_path / "ants" / "deeper").mkdir()
    (tmp_path / "ants" / "deeper" / "old.heic").write_bytes(b"x")
    (tmp_path / "bees" / "imageNotFound.gif").write_bytes(b"GIF89a")
    (tmp_path / "bees" / "labels.txt").write_text("not a picture")
    (tmp_path / "bees" / ".hidden.gif").write_bytes(b"GIF89a")
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        classes, images = scan_classes(tmp_path)
    assert [len(images[c]) for c in classes] == [1, 1]
    warnings = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert warnings == [
        f"{tmp_path}: 3 pictures in a format ddptrain does not read from folders are left out (2 .heic, 1 .gif: "
        "ants/deeper/old.heic, ants/phone.HEIC, bees/imageNotFound.gif); convert them to JPEG or PNG to use them "
        "(read: bmp jfif jpe jpeg jpg png tif tiff webp)"
    ]


def test_predict_on_a_folder_says_which_pictures_it_left_out(checkpoint, tmp_path):
    (tmp_path / "one.jpg").write_bytes(render_image(0, 0, 0, "disc"))
    (tmp_path / "two.gif").write_bytes(b"GIF89a")
    proc = _predict(checkpoint, tmp_path)
    assert proc.returncode == 0 and [json.loads(line)["path"] for line in proc.stdout.splitlines()] == [
        str(tmp_path / "one.jpg")
    ]
    assert "1 picture in a format ddptrain does not read from folders is left out (1 .gif: two.gif)" in proc.stderr


def test_jpeg_files_named_jfif_or_jpe_are_read_and_sharded_as_jpg(tmp_path):
    """What a browser on Windows saves a photo as: a JPEG by its bytes, listed, decoded and stored as KEY.jpg."""
    import tarfile

    from ddptrain.data.shards import write_shards
    from ddptrain.data.sources import load_split

    for label, name in enumerate(("ants", "bees")):
        (tmp_path / "photos" / name).mkdir(parents=True)
        for i, suffix in enumerate((".jfif", ".JPE", ".jpg")):
            (tmp_path / "photos" / name / f"{i}{suffix}").write_bytes(render_image(0, label, i, "disc"))
    split = load_split(tmp_path / "photos", 0.0, 0)
    assert len(split.train) == 6
    dataset = ImageDataset(split.train, lambda image: image, seed=0)
    assert all(dataset[(i, 0)][0] is not None for i in range(6))  # decoded, not skipped
    write_shards(split, tmp_path / "shards", 64 * 1024, 0)
    images = []
    for shard in (tmp_path / "shards").glob("train-*.tar"):
        with tarfile.open(shard) as tar:
            images += [m.name for m in tar.getmembers() if not m.name.endswith(".cls")]
    assert len(images) == 6 and all(name.endswith(".jpg") for name in images)


def test_a_class_folder_of_scans_in_other_formats_says_what_it_holds(tmp_path):
    """A hospital's DICOM files or a scanner's JPEG 2000 in class folders: the refusal names them and the fix,
    instead of "has no images"."""
    for name in ("normal", "sick"):
        (tmp_path / "scans" / name).mkdir(parents=True)
        (tmp_path / "scans" / name / "a.dcm").write_bytes(b"x" * 200)
        (tmp_path / "scans" / name / "b.jp2").write_bytes(b"x" * 200)
    proc = subprocess.run(
        [sys.executable, "-m", "ddptrain", "train", "--data", tmp_path / "scans", "--out", tmp_path / "run"],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
    )
    assert proc.returncode == 1  # a data error, as for any data folder that gives no images
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "class folder 'normal' in "
            f"{tmp_path / 'scans'} has no images ddptrain reads; {tmp_path / 'scans' / 'normal'}: 2 pictures in a format "
            "ddptrain does not read from folders are left out (1 .dcm, 1 .jp2: a.dcm, b.jp2); convert them to JPEG or "
            "PNG to use them (read: bmp jfif jpe jpeg jpg png tif tiff webp)"
        )
    )
    assert not (tmp_path / "run").exists()


def _png(path, size):
    from PIL import Image

    Image.new("L", size, 90).save(path)
    return path


def test_a_pixel_limit_raised_above_pillows_own_is_the_one_that_counts(tmp_path, monkeypatch):
    """--max-image-pixels above Pillow's process-wide threshold (89 Mpx; its error at twice that) let large scans
    through ddptrain's check and Pillow then refused them with its own error: the user's limit now decides."""
    from PIL import Image

    from ddptrain.data.images import load_rgb

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # stands for Pillow's 89 Mpx: 60 x 60 is over twice it
    monkeypatch.setattr(images, "PILLOW_DEFAULT_PIXELS", 1000)
    png = _png(tmp_path / "scan.png", (60, 60))
    Image.new("RGB", (60, 60)).save(tmp_path / "scan.jpg")
    assert load_rgb(png, limits=ImageLimits(max_pixels=60 * 60)).size == (60, 60)
    assert tuple(load_rgb(tmp_path / "scan.jpg", limits=ImageLimits(max_pixels=60 * 60)).shape) == (3, 60, 60)
    with pytest.raises(ImageTooLarge, match=r"60x60 = 0 Mpx, over the --max-image-pixels limit"):
        load_rgb(png, limits=ImageLimits(max_pixels=60 * 60 - 1))


def test_pillows_own_bomb_and_damage_warnings_give_way_to_ddptrains_verdict(tmp_path, monkeypatch):
    """On a folder of damaged files Pillow printed its warnings (decompression bomb, "Tag data larger than file",
    three times per file) and its own error for a bomb, beside ddptrain's one line per skipped file: now the file
    decodes, or it is refused in ddptrain's words, and no warning of Pillow's reaches the console."""
    import struct
    import warnings

    from PIL import Image

    from ddptrain.data.images import describe_unreadable, load_rgb

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # Pillow warns above 1,000 pixels, refuses above 2,000
    monkeypatch.setattr(images, "PILLOW_DEFAULT_PIXELS", 1000)
    limits = ImageLimits(max_pixels=1000)
    tiff = tmp_path / "lying.tif"  # a tag whose data would run past the end of the file: Pillow skips it, and warns
    Image.new("RGB", (8, 8), (200, 10, 10)).save(tiff)
    data = bytearray(tiff.read_bytes())
    data[8 + 2 + 12 * 9 : 8 + 2 + 12 * 10] = struct.pack("<HHII", 305, 2, 100_000, 134)
    tiff.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        assert load_rgb(tiff, limits=limits).getpixel((0, 0)) == (200, 10, 10)
        for size in ((40, 40), (100, 100)):  # over Pillow's warning; over its error
            with pytest.raises(ImageTooLarge) as refused:
                load_rgb(_png(tmp_path / f"{size[0]}.png", size), limits=limits)
            assert "over the --max-image-pixels limit of 0 Mpx" in describe_unreadable(refused.value)
    assert [str(warning.message) for warning in shown] == []


def test_a_damaged_tiff_is_refused_without_libtiffs_own_lines_on_stderr(tmp_path):
    """libtiff wrote its errors about a damaged TIFF straight to stderr (hundreds of lines for a file with a mangled
    directory, again on each read, beside ddptrain's one line): now only the error reaches ddptrain."""
    import struct

    from PIL import Image

    tiff = tmp_path / "cut.tif"
    Image.new("RGB", (16, 16), (10, 200, 10)).save(tiff, compression="tiff_lzw")  # read back through libtiff
    data = bytearray(tiff.read_bytes())
    directory = struct.unpack("<I", data[4:8])[0]
    for at in range(directory + 2, directory + 2 + 12 * struct.unpack("<H", data[directory : directory + 2])[0], 12):
        if struct.unpack("<H", data[at : at + 2])[0] == 279:  # the strip's byte count: far past the end of the file
            data[at : at + 12] = struct.pack("<HHII", 279, 4, 1, 100_000)
    tiff.write_bytes(bytes(data))
    read = (
        "from ddptrain.data.images import UNREADABLE_ERRORS, describe_unreadable, load_rgb\n"
        "try:\n    load_rgb(__import__('sys').argv[1])\n"
        "except UNREADABLE_ERRORS as error:\n    print(describe_unreadable(error))\n"
    )
    proc = subprocess.run([sys.executable, "-c", read, tiff], capture_output=True, text=True, env=cli_env())
    assert proc.stdout.startswith("OSError: decoder error")  # refused, as before
    assert proc.stderr == ""  # no "TIFFFillStrip: Read error on strip 0; got 222 bytes, expected 100000."
