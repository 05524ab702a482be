"""Hugging Face datasets that are not what they should be: rows without a label or an image, a dataset without an
image or label column, Parquet files that are not Parquet — each row left out and counted, or one error naming the
dataset and its columns."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from PIL import Image

from ddptrain.data.images import ImageLimits
from ddptrain.data.sources import load_split
from ddptrain.errors import DataError


@pytest.fixture(autouse=True)
def hf_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


def _jpeg(shade: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (shade, 0, 0)).save(out, format="JPEG")
    return out.getvalue()


def _save(path: Path, images, labels, features=None, columns=("image", "label")) -> Path:
    import datasets

    datasets.disable_progress_bars()
    features = features or datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=["a", "b"])}
    )
    table = dict(zip(columns, (images, labels)))
    datasets.Dataset.from_dict(table, features=features).save_to_disk(str(path))
    return path


def test_rows_without_a_label_are_left_out_and_counted(tmp_path, caplog):
    images = [{"bytes": _jpeg(i), "path": None} for i in range(8)]
    saved = _save(tmp_path / "d", images, [0, 1, -1, None, 0, 1, 0, 1])
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        split = load_split(saved, 0.0, 0)
    assert len(split.train) == 6 and "2 rows of split train have no label" in caplog.text


def test_an_image_path_whose_file_is_gone_fails_that_row_only(tmp_path):
    import datasets

    (tmp_path / "here.jpg").write_bytes(_jpeg(1))
    features = datasets.Features({"image": datasets.Value("string"), "label": datasets.ClassLabel(names=["a", "b"])})
    paths = [str(tmp_path / "here.jpg"), str(tmp_path / "gone.jpg")] * 2
    split = load_split(_save(tmp_path / "d", paths, [0, 1, 0, 1], features), 0.0, 0)
    by_label = {int(split.train.labels[i]): i for i in range(len(split.train))}
    assert split.train.read(by_label[0], ImageLimits()) == _jpeg(1)
    with pytest.raises(OSError, match="gone.jpg"):  # the loader skips and counts it as an unreadable image
        split.train.read(by_label[1], ImageLimits())


def test_a_dataset_without_an_image_or_label_column_is_one_error_listing_its_columns(tmp_path):
    import datasets

    features = datasets.Features({"photo_id": datasets.Value("string"), "label": datasets.Value("int64")})
    saved = _save(tmp_path / "d", ["x", "y"], [0, 1], features, columns=("photo_id", "label"))
    with pytest.raises(DataError, match=r"has no image column .*; its columns: photo_id, label"):
        load_split(saved, 0.0, 0)


def test_parquet_files_that_are_not_parquet_are_one_error(tmp_path):
    (tmp_path / "pq").mkdir()
    (tmp_path / "pq" / "train-0.parquet").write_bytes(b"not parquet at all" * 100)
    with pytest.raises(DataError, match=r"--data .*pq: not a dataset the `datasets` library reads"):
        load_split(tmp_path / "pq", 0.2, 0)
