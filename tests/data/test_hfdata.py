"""Hugging Face datasets written by the `datasets` library (imagefolder builder, save_to_disk, Parquet): split like
the folder they were made from, with the dataset's own validation split when it has one, read exactly once per
epoch on two processes, and never fetched from the network."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddptrain.data.images import ImageLimits
from ddptrain.data.sources import Reading, all_images, load_split, source_for
from ddptrain.errors import DataError

from ..conftest import write_synthetic
from ..dist_harness import epoch_names, run_ranks
from ..hf_data import write_hf

LIMITS = ImageLimits()


@pytest.fixture(autouse=True)
def hf_home(tmp_path_factory, monkeypatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.getbasetemp() / "hf-home"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("folder"), classes=3, per_class=12)


@pytest.fixture(scope="module")
def saved(folder, tmp_path_factory) -> Path:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HOME", str(tmp_path_factory.getbasetemp() / "hf-home"))
        return write_hf(folder, tmp_path_factory.mktemp("hf") / "saved")


def test_a_saved_dataset_splits_like_the_folder_it_was_made_from(folder, saved):
    split = load_split(saved, 0.25, 3)
    by_folder = load_split(folder, 0.25, 3)
    assert source_for(str(saved)).name == "Hugging Face dataset" and split.classes == by_folder.classes
    assert (len(split.train), len(split.val)) == (27, 9) and split.made_with == {"seed": 3, "val_split": 0.25}
    originals = {p.read_bytes() for p in folder.glob("*/*.jpg")}
    assert all(split.train.read(i, LIMITS) in originals for i in range(len(split.train)))
    labels = sorted(split.train.labels.tolist() + split.val.labels.tolist())
    assert labels == sorted(by_folder.train.labels.tolist() + by_folder.val.labels.tolist())


def test_the_datasets_own_validation_split_is_used(folder, tmp_path):
    saved = write_hf(folder, tmp_path / "dd", validation=0.25)
    split = load_split(saved, 0.5, 0)
    assert (len(split.train), len(split.val)) == (27, 9) and split.made_with == {}
    assert len(all_images(str(saved), split.classes)) == 36


def test_a_folder_of_parquet_files_reads_like_the_saved_dataset(saved, tmp_path):
    import datasets

    datasets.load_from_disk(str(saved))["train"].to_parquet(str(tmp_path / "pq" / "train-00000.parquet"))
    a, b = load_split(tmp_path / "pq", 0.25, 3), load_split(saved, 0.25, 3)
    assert a.classes == b.classes and a.val.labels.tolist() == b.val.labels.tolist()
    assert all(a.val.read(i, LIMITS) == b.val.read(i, LIMITS) for i in range(len(a.val)))


def test_two_processes_read_every_training_row_once_per_epoch(saved, tmp_path):
    ranks = run_ranks(epoch_names, 2, str(saved), 2)
    train = load_split(saved, 0.25, 3).train
    expected = {train.relative(i) for i in range(len(train))}
    for epoch in range(2):
        both = ranks[0][epoch] + ranks[1][epoch]
        assert len(set(both)) == len(both) == len(expected) - 1 and set(both) <= expected  # 27 rows: one left over
    assert ranks[0][0] != ranks[0][1], "each epoch has its own order"


def test_a_hub_name_not_in_the_cache_says_how_to_fetch_it_and_downloads_nothing(monkeypatch):
    import socket

    tried = []
    real = socket.socket.connect

    def connect(self, address):
        if isinstance(address, tuple) and not str(address[0]).startswith("127."):
            tried.append(address)
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: tried.append(host) or [])
    with pytest.raises(DataError, match=r"hf:someone/pets: someone/pets is neither a folder nor a dataset in the"):
        load_split("hf:someone/pets", 0.2, 0)
    assert tried == [], "no connection was even looked up"


def test_label_key_names_another_column(saved):
    with pytest.raises(DataError, match=r"split train has no label column .*; its columns: image, label"):
        load_split(saved, 0.25, 0, Reading(label_key="species"))


def _multilabel_dataset(path: Path, tags, feature) -> Path:
    import io

    import datasets
    import numpy as np
    from PIL import Image

    rows = []
    for i, labels in enumerate(tags):
        buffer = io.BytesIO()
        Image.fromarray(np.full((20, 24, 3), i * 9, dtype=np.uint8)).save(buffer, format="PNG")
        rows.append({"image": {"bytes": buffer.getvalue(), "path": None}, "labels": labels})
    features = datasets.Features({"image": datasets.Image(), "labels": feature})
    datasets.Dataset.from_list(rows, features=features).save_to_disk(str(path))
    return path


@pytest.mark.parametrize("kind", ["class labels", "strings"])
def test_a_list_label_column_is_each_rows_classes_with_task_multilabel(tmp_path, kind):
    import datasets

    names = ["cat", "dog", "sky"]
    sets = [sorted({i % 3, (i // 3) % 3}) for i in range(12)]
    if kind == "class labels":
        feature, tags = datasets.Sequence(datasets.ClassLabel(names=names)), sets
    else:
        feature, tags = datasets.Sequence(datasets.Value("string")), [[names[c] for c in s] for s in sets]
    location = str(_multilabel_dataset(tmp_path / "tags", tags, feature))
    split = load_split(location, 0.25, 0, Reading(multilabel=True))
    assert split.classes == names and len(split.train) == 9 and len(split.val) == 3
    for part in (split.train, split.val):
        for i in range(len(part)):
            row = int(part.relative(i).rpartition("/")[2])
            assert part.targets[i].tolist() == [int(c in sets[row]) for c in range(3)]
    everything = all_images(location, names, Reading(multilabel=True))
    assert everything.targets.sum() == sum(len(s) for s in sets)
    with pytest.raises(DataError, match=r"holds lists \(several classes per row\): add --task multilabel"):
        load_split(location, 0.25, 0, Reading())
