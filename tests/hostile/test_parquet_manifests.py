"""Parquet manifests at odds with themselves: repeated rows, an image given two splits, missing values, bytes that
are not text, no rows — each dropped and counted, or one error naming the rows (never an image in training and
validation at once)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ddptrain.data.sources import load_split
from ddptrain.errors import DataError

from ..conftest import write_synthetic


@pytest.fixture
def images(tmp_path):
    folder = write_synthetic(tmp_path / "img", classes=2, per_class=4)
    return [str(p) for p in sorted(folder.glob("*/*.jpg"))]


def _write(tmp_path, columns, schema=None):
    path = tmp_path / "list.parquet"
    pq.write_table(pa.table(columns, schema=schema), path)
    return path


def test_repeated_rows_are_dropped_and_counted(tmp_path, images, caplog):
    labels = [p.split("/")[-2] for p in images]
    path = _write(tmp_path, {"path": images + images[:3], "label": labels + labels[:3]})
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        split = load_split(path, 0.25, 0)
    assert len(split.train) + len(split.val) == 8
    assert "3 rows repeat an earlier row exactly and were dropped (row 9 = row 1, row 10 = row 2" in caplog.text


def test_an_image_in_both_splits_is_refused_naming_both_rows(tmp_path, images):
    labels = [p.split("/")[-2] for p in images]
    splits = ["train"] * 8 + ["val"]
    path = _write(tmp_path, {"path": images + images[:1], "label": labels + labels[:1], "split": splits})
    with pytest.raises(DataError, match=r"row 9: .*\.jpg has split 'val' here and 'train' on row 1"):
        load_split(path, 0.25, 0)


@pytest.mark.parametrize(
    ("label", "said"),
    [
        (None, r"row 2: a row needs a path and a label"),
        ("   ", r"row 2: a row needs a path and a label"),
    ],
)
def test_a_missing_label_is_refused_naming_the_row(tmp_path, images, label, said):
    labels = [p.split("/")[-2] for p in images]
    labels[1] = label
    with pytest.raises(DataError, match=said):
        load_split(_write(tmp_path, {"path": images, "label": labels}), 0.25, 0)


def test_bytes_that_are_not_text_and_an_empty_manifest_are_one_error(tmp_path, images):
    schema = pa.schema([("path", pa.binary()), ("label", pa.string())])
    path = _write(tmp_path, {"path": [b"\xff\xfe.jpg"] * 2, "label": ["a", "b"]}, schema)
    with pytest.raises(DataError, match=r"list\.parquet: column path is not UTF-8 text"):
        load_split(path, 0.25, 0)
    empty = _write(tmp_path, {"path": pa.array([], pa.string()), "label": pa.array([], pa.string())})
    with pytest.raises(DataError, match=r"list\.parquet lists no images"):
        load_split(empty, 0.25, 0)
