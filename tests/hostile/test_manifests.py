"""Duplicates and conflicts in a CSV manifest: a repeated row is dropped with a warning (never one image in training
and validation), one image with two labels or two splits is an error naming both lines, label texts that write the
same number are one class. Property-based: whatever rows repeat, no path lands in both parts."""

from __future__ import annotations

import csv
import logging
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddptrain.data.sources import load_split
from ddptrain.data.sources.manifest import canonical_labels, read_manifest
from ddptrain.errors import DataError


def _write(path: Path, rows, header=("path", "label")) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _images(folder: Path, count: int):
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(count):
        (folder / f"{i}.jpg").write_bytes(b"x")
        names.append(f"img/{i}.jpg")
    return names


def test_repeated_rows_are_dropped_with_a_warning_and_never_reach_both_parts(tmp_path, caplog):
    """The report: 9 of 15 validation images were also in splits/train.txt with repeated rows."""
    names = _images(tmp_path / "img", 30)
    rows = [(name, "cat" if i % 2 else "dog") for i, name in enumerate(names)]
    csv_path = _write(tmp_path / "list.csv", rows + rows[:20] + rows[5:10])
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        split = load_split(csv_path, 0.5, seed=0)
    train = {split.train.relative(i) for i in range(len(split.train))}
    val = {split.val.relative(i) for i in range(len(split.val))}
    assert not train & val and len(train) + len(val) == 30
    assert any(
        "25 rows repeat an earlier row exactly and were dropped (line 32 = line 2" in r.message for r in caplog.records
    )


def test_columns_that_could_each_be_the_label_take_the_one_named_label(tmp_path, caplog):
    """filename,path,class,label: `path` and `label` are read, as before other names were taken, and no line says a
    column was taken by another name."""
    names = _images(tmp_path / "img", 4)
    rows = [("elsewhere.jpg", name, "wrong", "cat" if i % 2 else "dog") for i, name in enumerate(names)]
    csv_path = _write(tmp_path / "list.csv", rows, header=("filename", "path", "class", "label"))
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        split = load_split(csv_path, 0.5, seed=0)
    assert split.classes == ["cat", "dog"]
    assert {split.train.relative(i) for i in range(len(split.train))} | {
        split.val.relative(i) for i in range(len(split.val))
    } == set(names)
    assert not any(" from '" in r.getMessage() for r in caplog.records)


def test_one_image_with_two_labels_is_an_error_naming_both_lines(tmp_path):
    names = _images(tmp_path / "img", 3)
    csv_path = _write(tmp_path / "list.csv", [(names[0], "cat"), (names[1], "dog"), (f"./{names[0]}", "dog")])
    with pytest.raises(DataError, match=r"list\.csv:4: \./img/0\.jpg has label 'dog' here and 'cat' on line 2"):
        read_manifest(csv_path)


def test_one_image_in_two_splits_is_an_error_naming_both_lines(tmp_path):
    names = _images(tmp_path / "img", 2)
    rows = [(names[0], "cat", "train"), (names[1], "dog", "val"), (names[0], "cat", "val")]
    csv_path = _write(tmp_path / "list.csv", rows, header=("path", "label", "split"))
    with pytest.raises(DataError, match=r"list\.csv:4: img/0\.jpg has split 'val' here and 'train' on line 2"):
        read_manifest(csv_path)


def test_labels_that_write_the_same_number_are_one_class(tmp_path):
    names = _images(tmp_path / "img", 4)
    manifest = read_manifest(_write(tmp_path / "list.csv", list(zip(names, ["1", "01", "+1", "2"]))))
    assert manifest.classes == ["1", "2"] and len(manifest.by_class["1"]) == 3
    assert canonical_labels(["1", "01", "cat"]) == {"1": "1", "01": "01", "cat": "cat"}  # texts when not all numbers
    # pandas writes an integer column that had a gap as floats: `1` and `1.0` in one file were two classes
    floats = _write(tmp_path / "floats.csv", list(zip(names, ["1", "1.0", "2.00", "+2."])))
    assert read_manifest(floats).classes == ["1", "2"]
    assert canonical_labels(["1", "1.5"]) == {"1": "1", "1.5": "1.5"}  # a fraction: every label is its text
    assert canonical_labels(["caf\u00e9", "cafe\u0301"]) == {"caf\u00e9": "caf\u00e9", "cafe\u0301": "caf\u00e9"}


def test_labels_and_class_folders_that_differ_only_in_case_are_said_once_per_pair(tmp_path, caplog):
    """'Cat' and 'cat' (two sources merged; one folder on a case-insensitive disk) stay two classes: a manifest said
    so, a folder of class folders did not."""
    names = _images(tmp_path / "img", 6)
    table = _write(tmp_path / "list.csv", list(zip(names, ["Cat", "cat", "dog", "CAT", "Кот", "кот"])))
    for name in ("Cat", "cat", "dog"):
        _images(tmp_path / "folders" / name, 2)
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        assert load_split(table, 0.0, 0).classes == ["CAT", "Cat", "cat", "dog", "Кот", "кот"]
        assert load_split(tmp_path / "folders", 0.0, 0).classes == ["Cat", "cat", "dog"]
    said = [r.getMessage() for r in caplog.records if "differ only in case" in r.getMessage()]
    rename = "they are two classes (rename one if they are the same)"
    assert said == [
        f"{table}: labels 'CAT' and 'Cat' differ only in case; {rename}",
        f"{table}: labels 'CAT' and 'cat' differ only in case; {rename}",
        f"{table}: labels 'Кот' and 'кот' differ only in case; {rename}",  # readable, not escaped
        f"{tmp_path / 'folders'}: class folders 'Cat' and 'cat' differ only in case; {rename}",
    ]


def test_a_multi_line_quoted_field_is_counted_in_the_line_numbers(tmp_path):
    names = _images(tmp_path / "img", 2)
    csv_path = tmp_path / "list.csv"
    csv_path.write_text(f'path,label\n{names[0]},"two\nlines"\n{names[1]},\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"list\.csv:4: a row needs a path and a label"):
        read_manifest(csv_path)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 11), st.sampled_from(["cat", "dog", "emu"])), min_size=4, max_size=40),
    st.sampled_from([0.25, 0.5]),
    st.integers(0, 3),
)
def test_whatever_rows_repeat_no_image_is_in_training_and_validation(rows, val_split, seed):
    label_of = {}
    rows = [(index, label_of.setdefault(index, label)) for index, label in rows]  # one label per image
    with tempfile.TemporaryDirectory() as tmp:
        names = _images(Path(tmp) / "img", 12)
        csv_path = _write(Path(tmp) / "list.csv", [(names[index], label) for index, label in rows])
        if len(set(label_of.values())) < 2:
            with pytest.raises(DataError, match="a classifier needs at least two"):
                load_split(csv_path, val_split, seed)
            return
        split = load_split(csv_path, val_split, seed)
        train = [split.train.relative(i) for i in range(len(split.train))]
        val = [split.val.relative(i) for i in range(len(split.val))]
        assert len(set(train)) == len(train) and len(set(val)) == len(val)
        assert not set(train) & set(val)
        assert len(train) + len(val) == len(label_of)


@pytest.mark.parametrize(
    "encoding, separator, newline",
    [("utf-8-sig", ",", "\r\n"), ("utf-8-sig", ";", "\r\n"), ("utf-8", "\t", "\n")],
    ids=["excel-csv-utf8-with-bom", "excel-where-the-decimal-mark-is-a-comma", "tab-separated"],
)
def test_a_spreadsheets_csv_reads_as_the_plain_one(tmp_path, encoding, separator, newline):
    """A manifest saved from a spreadsheet was refused as "not a manifest ... (found path,label)": the byte-order
    mark, invisible in the message, stuck to the first column's name; a semicolon or tab file was one column."""
    names = _images(tmp_path / "img", 4)
    rows = [("path", "label", "split")] + [(n, "ant, red" if i % 2 else "bee", "train") for i, n in enumerate(names)]
    plain = _write(tmp_path / "plain.csv", rows[1:], header=rows[0])
    text = newline.join(separator.join(f'"{v}"' if separator in v else v for v in row) for row in rows) + newline
    saved = tmp_path / "saved.csv"
    saved.write_bytes(text.encode(encoding))
    assert read_manifest(saved) == read_manifest(plain)
    assert read_manifest(saved).classes == ["ant, red", "bee"]


def test_tags_listed_apart_by_spaces_are_said_to_be_one_class_each(tmp_path, caplog):
    """Kaggle's Planet lists tags as `image_name,tags` with `haze primary`: the columns were not taken, and with
    them renamed, --task multilabel made each combination of tags one class, in silence."""
    from ddptrain.data.sources import Reading
    from ddptrain.data.sources.manifest import ManifestSource

    names = _images(tmp_path / "img", 6)
    tags = ["haze primary", "clear primary", "primary", "clear water", "haze", "water primary"]
    csv_path = _write(tmp_path / "train_v2.csv", list(zip(names, tags)), header=("image_name", "tags"))
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        ManifestSource().check(str(csv_path), Reading(multilabel=True))
    said = [r.getMessage() for r in caplog.records]
    assert f"{csv_path}: path from 'image_name', label from 'tags'" in said
    assert (
        f"{csv_path}: labels such as 'clear primary' list names apart by spaces, not '|': each whole label is one "
        "class here (6 in all); for several classes per image write them as 'clear|primary'"
    ) in said
    caplog.clear()
    named = _write(tmp_path / "breeds.csv", list(zip(names, ["golden retriever", "labrador retriever"] * 3)))
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        ManifestSource().check(str(named), Reading(multilabel=True))
    assert caplog.records == []  # class names of several words are not taken for tags


def test_a_manifest_whose_files_are_elsewhere_says_where_they_are(tmp_path):
    """Kaggle's layout: train.csv beside train_images/, its image_id column naming files without their folder,
    often without their extension either. The refusal said only that no path named a file."""
    from ddptrain.data.sources import Reading
    from ddptrain.data.sources.manifest import ManifestSource

    (tmp_path / "train_images").mkdir()
    rows = []
    for i in range(4):
        (tmp_path / "train_images" / f"{1000 + i}.jpg").write_bytes(b"x")
        rows.append((f"{1000 + i}.jpg", "ab"[i % 2]))
    beside = _write(tmp_path / "train.csv", rows, header=("image_id", "label"))
    with pytest.raises(DataError, match=r"; 1000.jpg is in .*train_images: write the paths as train_images/1000.jpg"):
        ManifestSource().check(str(beside), Reading())
    inside = _write(tmp_path / "train_images" / "train.csv", [(name[:-4], label) for name, label in rows])
    with pytest.raises(DataError, match=r"; the files are named with .jpg added \(1000.jpg\): write the names whole"):
        ManifestSource().check(str(inside), Reading())


def test_a_manifest_written_on_windows_reads_its_backslashed_paths(tmp_path, caplog):
    """pandas' to_csv of os.path.join paths on Windows writes `img\\0.jpg`: on Linux no path named a file. The
    first such path decides; a file whose own name holds a backslash is read as written."""
    names = _images(tmp_path / "img", 4)
    windows = _write(tmp_path / "win.csv", [(n.replace("/", "\\"), "ab"[i % 2]) for i, n in enumerate(names)])
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        assert read_manifest(windows) == read_manifest(
            _write(tmp_path / "plain.csv", [(n, "ab"[i % 2]) for i, n in enumerate(names)])
        )
    assert f"{windows}: its paths separate folders with '\\' (written on Windows): read with '/'" in caplog.text
    (tmp_path / "odd\\name.jpg").write_bytes(b"x")
    literal = _write(tmp_path / "odd.csv", [("odd\\name.jpg", "a"), (names[0], "b")])
    assert str(tmp_path / "odd\\name.jpg") in read_manifest(literal).by_class["a"]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b'{"path": "img/0.jpg", "label": "a"}\n{"path": "img/1.jpg", label: b}\n', r"m\.jsonl:2 is not JSON \("),
        (b'{"path": "img/0.jpg", "label": "a"}\n["img/1.jpg", "b"]\n', r"m\.jsonl:2: each line is a JSON object"),
        (b'{"path": "img/0.jpg", "label": "a"}\n{"path": "img/\xff.jpg", "label": "b"}\n', r"m\.jsonl:2 is not UTF-8"),
        (b'{"path": "img/0.jpg", "label": "' + b"a" * (1 << 21) + b'"}\n', r"m\.jsonl:1: a line over 1 MiB"),
        (b"\n\n", r"m\.jsonl lists no images"),
        (b'{"photo": "img/0.jpg", "label": "a"}\n', r"m\.jsonl is not a manifest: it needs a path and a label"),
    ],
    ids=["not-json", "an-array", "not-utf8", "endless-line", "empty", "no-path-field"],
)
def test_a_jsonl_line_that_is_not_a_row_is_one_error_naming_it(tmp_path, content, said):
    _images(tmp_path / "img", 2)
    (tmp_path / "m.jsonl").write_bytes(content)
    with pytest.raises(DataError, match=said):
        load_split(tmp_path / "m.jsonl", 0.5, 0)


def test_a_jsonl_saved_with_a_byte_order_mark_and_blank_lines_reads_as_the_plain_one(tmp_path):
    _images(tmp_path / "img", 4)
    lines = [f'{{"path": "img/{i}.jpg", "label": "{"ab"[i % 2]}"}}\n' for i in range(4)]
    (tmp_path / "plain.jsonl").write_text("".join(lines))
    (tmp_path / "saved.jsonl").write_bytes(("\ufeff" + "\n".join(lines) + "\n\n").encode())
    plain, saved = (load_split(tmp_path / name, 0.5, 0) for name in ("plain.jsonl", "saved.jsonl"))
    assert saved.classes == plain.classes == ["a", "b"]
    assert (list(saved.train), list(saved.val)) == (list(plain.train), list(plain.val))
