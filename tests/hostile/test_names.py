"""Names: every file name ddptrain can list comes back unchanged through every file it writes about it (the run's
splits/, the checkpoint's split digest, a CSV manifest) — newlines, tabs, backslashes, bytes that are not UTF-8,
leading and trailing spaces, long names, other normalisation forms. Property-based (hypothesis), and one real
2-process run that trains on such names and resumes."""

from __future__ import annotations

import csv
import os
import re
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddptrain.data import splitfile
from ddptrain.data.sources import load_split
from ddptrain.data.sources.manifest import read_manifest
from ddptrain.data.split import read_run_split, split_summary, write_split_files
from ddptrain.errors import DataError
from ddptrain.tools.demodata import render_image

from ..conftest import TINY, read_metrics, run_cli

# File-name bytes: anything but "/" and NUL; the awkward ones made likely.
AWKWARD = [b"\n", b"\t", b"\r", b"\\", b" ", b"\xff", b"\xe9", b"\xc3\xa9", b"e\xcc\x81", b"\xe2\x80\xa8", b"#", b","]
NAME_BYTE = st.one_of(st.sampled_from(AWKWARD), st.binary(min_size=1, max_size=1).filter(lambda b: b not in b"/\0"))
# a name that starts with a dot is a hidden file, which listing leaves out by design
STEM = st.lists(NAME_BYTE, min_size=1, max_size=12).map(b"".join).filter(lambda stem: not stem.startswith(b"."))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.text(alphabet=st.characters(codec=None), max_size=40), st.binary(max_size=20))
def test_split_file_escaping_round_trips_any_text_and_any_bytes(text, raw):
    for name in (text, os.fsdecode(raw) if b"\0" not in raw else text):
        escaped = splitfile.escape(name)
        assert "\t" not in escaped and "\n" not in escaped and "\r" not in escaped
        escaped.encode("utf-8")  # strict: the file is plain UTF-8
        assert splitfile.unescape(escaped) == name


def _write(path: bytes, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def _make_folder(root: Path, stems) -> None:
    image = render_image(0, 0, 0, "disc")
    for name in ("a class", "b\tclass"):
        folder = root / name
        folder.mkdir(parents=True)
        for i, stem in enumerate(stems):
            _write(os.path.join(os.fsencode(folder), stem + f"{i}.jpg".encode()), image)
        (folder / "plain.jpg").write_bytes(image)  # every class keeps a file whatever the generated names are


@SETTINGS
@given(st.lists(STEM, min_size=1, max_size=6, unique=True), st.sampled_from([0.0, 0.5]))
def test_every_listable_name_round_trips_through_the_runs_split_files(stems, val_split):
    with tempfile.TemporaryDirectory() as tmp:
        data, run_dir = Path(tmp) / "data", Path(tmp) / "run"
        _make_folder(data, stems)
        split = load_split(data, val_split, seed=1)
        assert len(split.train) + len(split.val) == 2 * (len(stems) + 1)  # every file listed, none merged
        run_dir.mkdir()
        write_split_files(split, run_dir)
        found = read_run_split(run_dir, load_split(data, val_split, seed=1))
        assert found is not None
        stored, added = found
        assert added == []
        for part, back in ((split.train, stored.train), (split.val, stored.val)):
            assert [part.relative(i) for i in range(len(part))] == [back.relative(i) for i in range(len(back))]
            assert part.labels.tolist() == back.labels.tolist()
            assert all(os.path.isfile(back.path(i)) for i in range(len(back)))
        assert split_summary(split) == split_summary(stored)


@SETTINGS
@given(
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_characters="\0/"), min_size=1, max_size=20).filter(str.strip),
        min_size=2,
        max_size=6,
        unique_by=lambda t: unicodedata.normalize("NFC", t.strip()),
    )
)
def test_a_manifest_keeps_every_path_and_label_text_it_can_hold(texts):
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "list.csv"
        rows = [(f"img/{text}.jpg", text) for text in texts]
        with open(csv_path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["path", "label"])
            writer.writerows(rows)
        manifest = read_manifest(csv_path)
        labels = {unicodedata.normalize("NFC", text.strip()) for text in texts}
        if all(re.fullmatch(r"[+-]?[0-9]+", label) for label in labels):
            labels = {str(int(label)) for label in labels}
        assert set(manifest.classes) == labels
        listed = sorted(p for paths in manifest.by_class.values() for p in paths)
        want = sorted(os.path.normpath(os.path.join(tmp, path.strip())) for path, _ in rows)
        assert listed == want


def _class_folders(root: Path, names) -> Path:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "x.jpg").write_bytes(render_image(0, 0, 0, "disc"))
    return root


COMPOSED, DECOMPOSED = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")


def test_class_folders_named_in_two_unicode_forms_are_said_and_refused_as_such_across_parts(tmp_path, caplog):
    """A class folder named on a Mac (decomposed) beside one named elsewhere (composed) looks the same and is not:
    two classes said nothing, and a val/ folder made on the other machine was refused as a class training lacks,
    naming 'café' and 'café'."""
    flat = _class_folders(tmp_path / "flat", (COMPOSED, DECOMPOSED, "dog"))
    with caplog.at_level("WARNING", logger="ddptrain"):
        assert len(load_split(flat, 0.0, 0).classes) == 3
    assert "class folders 'cafe\\u0301' and 'caf\\xe9' are one name written in two Unicode forms" in caplog.text
    _class_folders(tmp_path / "parts" / "train", (COMPOSED, "dog"))
    _class_folders(tmp_path / "parts" / "val", (DECOMPOSED, "dog"))
    with pytest.raises(DataError, match=r"'cafe\\u0301' is 'caf\\xe9' written in another Unicode form.*convmv"):
        load_split(tmp_path / "parts", 0.0, 0)


def test_a_manifest_that_is_not_utf8_is_one_line_naming_the_line(tmp_path):
    path = tmp_path / "list.csv"
    path.write_bytes(b"path,label\nimg/a.jpg,cat\nimg/caf\xe9.jpg,cat\n")
    with pytest.raises(DataError, match=r"list\.csv:3 is not UTF-8 text \(invalid continuation byte\); save the"):
        read_manifest(path)


def test_a_split_file_of_a_newer_format_is_refused_naming_both_versions(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("# ddptrain splits 9\na.jpg\tx\n")
    with pytest.raises(DataError, match=r"format 9; this ddptrain \(.*\) reads formats up to 2"):
        splitfile.read(path)


def test_a_split_file_written_before_version_2_is_still_read(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("cat/a b.jpg\tcat\ndog/c.jpg\tdog\n")
    assert splitfile.read(path) == [(1, "cat/a b.jpg", "cat"), (2, "dog/c.jpg", "dog")]


@pytest.mark.slow
def test_a_run_on_newline_tab_and_non_utf8_names_trains_and_resumes(tmp_path):
    """The crash loop of `6e5c216`: such a name trained, then every `--resume auto` failed on splits/train.txt."""
    data = tmp_path / "data"
    for label, name in enumerate(("disc", "ring")):
        folder = data / name
        folder.mkdir(parents=True)
        for i in range(8):
            stem = [b"new\nline", b"tab\there", b"caf\xe9", b" lead", b"back\\slash", b"plain"][i % 6]
            _write(os.path.join(os.fsencode(folder), stem + f"-{i}.jpg".encode()), render_image(0, label, i, name))
    run_dir = tmp_path / "run"
    common = ["train", "--data", data, "--out", run_dir, *TINY, "--nproc", 2]
    run_cli([*common, "--epochs", 1])
    lines = (run_dir / "splits" / "train.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# ddptrain splits 2" and any("\\x0a" in line or "\\u000a" in line for line in lines)
    resumed = run_cli([*common, "--epochs", 2, "--resume", "auto"])
    assert "train/val split read back" in resumed.stderr
    assert [m["epoch"] for m in read_metrics(run_dir)] == [0, 1]


def test_a_skipped_file_or_left_out_picture_with_a_newline_in_its_name_is_one_warning_line(tmp_path):
    """A name with a newline printed as it is splits a warning in two, the second half looking like a log line of
    its own; such names are shown escaped, as Python writes them (printable names stay as they are)."""
    from ddptrain.data.datasets import ImageDataset
    from ddptrain.data.images import left_out_pictures
    from ddptrain.data.transforms import train_transform

    bad = tmp_path / "new\nline.jpg"
    bad.write_bytes(b"not an image")
    good = tmp_path / "caf\u00e9 back\\slash.jpg"
    good.write_bytes(b"not an image either")
    dataset = ImageDataset([(str(bad), 0), (str(good), 0)], train_transform(32, 0.08))
    said = [dataset[(i, 0)].failures[0] for i in range(2)]
    assert "\n" not in said[0] and "new\\nline.jpg: " in said[0], said
    assert f"{good}: " in said[1]  # printable: as it is
    line = left_out_pictures(tmp_path, ["a\nb.gif", "c\td.heic"])
    assert "\n" not in line and "\t" not in line and "a\\nb.gif" in line and "c\\td.heic" in line, line
