"""Hostile inputs to the two surfaces a user's own code enters by: a model file or module (`--model FILE.py:F`,
`--model-kwargs`) and a Python dataset handed to `ddptrain.fit`. Each is refused in one line naming the input and
the fix, or handled."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from PIL import Image

from ddptrain import handed
from ddptrain.checks import check_model_source
from ddptrain.config.sections import parse_kwargs
from ddptrain.data.sources.pydataset import PyDatasetSource, as_image
from ddptrain.data.sources.reading import Reading
from ddptrain.errors import ConfigError, DataError
from ddptrain.models import build_model
from ddptrain.models.custom import ModelSourceError

FACTORY = "from torch import nn\n\ndef build(num_classes):\n    return nn.Linear(2, num_classes)\n"


# ---- file kinds: the model file is a folder, a FIFO ----------------------------------------------------------------
def test_a_model_path_that_is_a_folder_or_a_fifo_is_refused_before_launch_without_reading_it(tmp_path):
    (tmp_path / "net.py").mkdir()
    os.mkfifo(tmp_path / "fifo.py")
    for name in ("net.py", "fifo.py"):
        with pytest.raises(ConfigError, match=rf"model file .*{name} is not a regular file"):
            check_model_source(f"{tmp_path / name}:build")
        with pytest.raises(ModelSourceError, match=r"is not a regular file"):
            build_model(f"{tmp_path / name}:build", 2)  # never opened: a FIFO would block
    with pytest.raises(ConfigError, match=r"name the function or class after the colon"):
        check_model_source(f"{tmp_path / 'net.py'}:")


# ---- names: spaces, colons and non-ASCII in the path ---------------------------------------------------------------
def test_a_model_file_under_an_awkward_path_is_found(tmp_path):
    folder = tmp_path / "my models: v2 ünï"
    folder.mkdir()
    (folder / "net file.py").write_text(FACTORY)
    name = f"{folder / 'net file.py'}:build"
    check_model_source(name)
    assert build_model(name, 4).out_features == 4


# ---- identity: a model object's name without the object -------------------------------------------------------------
def test_an_object_handed_to_fit_named_where_it_does_not_exist_says_so(tmp_path):
    with pytest.raises(ConfigError, match=r"object://Net is a model that was handed to ddptrain.fit"):
        check_model_source("object://Net")
    with pytest.raises(ModelSourceError, match=r"load_state_dict\(ddptrain.load_checkpoint"):
        build_model("object://Net", 2)
    with pytest.raises(DataError, match=r"dataset://Gone is a dataset that was handed to ddptrain.fit"):
        PyDatasetSource().check("dataset://Gone", Reading())


# ---- parsers: --model-kwargs ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, parsed",
    [
        ("a=1,,b=2", {"a": 1, "b": 2}),  # an empty pair is nothing
        ("sizes=[1,2,3],act=gelu", {"sizes": [1, 2, 3], "act": "gelu"}),
        ("open=[1,2", {"open": "[1,2"}),  # not YAML: kept as the text
        ("=3", None),
        ("1x=3", None),
        ("a", None),
        ("a=1;rm -rf /", {"a": "1;rm -rf /"}),  # a value is data, never run
    ],
)
def test_model_kwargs_are_parsed_as_data_or_refused(text, parsed):
    assert parse_kwargs(text) == parsed


# ---- a Python dataset that does not keep its promises ---------------------------------------------------------------
class Items:
    def __init__(self, images, labels, targets=None, classes=None):
        self.images, self.labels = images, labels
        if targets is not None:
            self.targets = targets
        if classes is not None:
            self.classes = classes

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        return self.images[index], self.labels[index]


def _split(dataset, name="dataset://Items"):
    handed.hand(name, dataset)
    return PyDatasetSource().split(name, 0.25, 0, Reading())


@pytest.mark.parametrize(
    "dataset, message",
    [
        (Items([0, 0, 0], [0, 1, 0], targets=[0, 1]), r"2 targets for 3 items"),
        (Items([0, 0], [0, -1]), r"label -1 is negative"),
        (Items([0, 0], [0, "cat"]), r"labels must be class indices"),
        (Items([0, 0], [0, 3], classes=["a", "b"]), r"label 3 is beyond the dataset's 2 classes"),
    ],
)
def test_labels_that_do_not_fit_the_items_are_refused_naming_the_dataset(dataset, message):
    with pytest.raises(DataError, match=message):
        _split(dataset)


@pytest.mark.parametrize(
    "image",
    [torch.rand(3, 8, 8), torch.zeros(8, 8, 3, dtype=torch.uint8), np.zeros((8, 8), dtype=np.float32), "a.jpg"],
)
def test_an_item_that_is_not_an_8_bit_image_is_refused_saying_what_to_give(image):
    with pytest.raises(DataError, match=r"give images as PIL images, uint8 tensors .* without a transform"):
        as_image(image, "dataset://Items[3]")


def test_images_in_every_accepted_form_come_out_rgb_and_the_split_is_by_class_and_seed():
    rgb = np.full((6, 5, 3), 7, dtype=np.uint8)
    for image in (Image.fromarray(rgb).convert("L"), rgb[:, :, 0], rgb, torch.from_numpy(rgb).permute(2, 0, 1)):
        out = as_image(image, "x")
        size = out.size if isinstance(out, Image.Image) else (out.shape[2], out.shape[1])
        assert size == (5, 6) and (out.mode == "RGB" if isinstance(out, Image.Image) else out.shape[0] == 3)
    labels = [i % 2 for i in range(20)]
    split = _split(Items([rgb] * 20, labels))
    again = _split(Items([rgb] * 20, labels))
    assert list(split.val.indices) == list(again.val.indices)  # a function of (labels, seed)
    assert sorted(split.val.labels.tolist()) == [0, 0, 1, 1] and len(split.train) == 16  # round(10 x 0.25) each
    assert not set(split.val.indices) & set(split.train.indices)


class Flaky(Items):
    def __getitem__(self, index):
        if index == 3:
            raise KeyError("no such row")
        if index == 4:
            raise OSError("image file is truncated")
        return super().__getitem__(index)


def test_an_item_that_raises_is_one_line_naming_it_and_an_unreadable_image_is_skipped_and_counted():
    from ddptrain.data.datasets import ImageDataset
    from ddptrain.data.transforms import eval_transform

    rgb = np.zeros((8, 8, 3), dtype=np.uint8)
    handed.hand("dataset://Flaky", Flaky([rgb] * 7, [0, 1, 0, 1, 0, 1, 0]))
    samples = PyDatasetSource().all_images("dataset://Flaky", ["0", "1"], Reading())
    dataset = ImageDataset(samples, eval_transform(8), substitute=True)
    with pytest.raises(DataError, match=r"dataset://Flaky\[3\]: the dataset's __getitem__ raised KeyError"):
        dataset[3]
    substituted = dataset[4]  # training: another image takes its place, the failure travels with the batch
    assert substituted.image is not None and substituted.failures == (
        "dataset://Flaky[4]: OSError: image file is truncated",
    )


# ---- duplicates / conflicts: multi-label manifest rows ---------------------------------------------------------------
def _manifest(tmp_path, rows):
    from PIL import Image as PILImage

    for name in {row[0] for row in rows}:
        PILImage.new("RGB", (8, 8)).save(tmp_path / name)
    path = tmp_path / "labels.csv"
    path.write_text("path,label\n" + "".join(f"{image},{label}\n" for image, label in rows))
    return path


def test_a_multilabel_row_written_twice_in_another_order_is_one_image_and_a_different_set_is_refused(tmp_path, caplog):
    from ddptrain.data.sources.manifest import ManifestSource

    reading = Reading(multilabel=True)
    rows = [
        ("a.png", "cat|dog"),
        ("b.png", " dog | cat "),
        ("a.png", "dog|cat"),
        ("c.png", "cat||bird"),
        ("d.png", "2"),
    ]
    split = ManifestSource().split(str(_manifest(tmp_path, rows)), 0.0, 0, reading)
    assert split.classes == ["2", "bird", "cat", "dog"] and len(split.train) == 4  # a.png once
    assert "1 row repeats an earlier row exactly and was dropped (line 4 = line 2)" in caplog.text
    assert split.train.targets.tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [0, 1, 1, 0], [1, 0, 0, 0]]
    conflict = _manifest(tmp_path, [("a.png", "cat|dog"), ("a.png", "cat")])
    with pytest.raises(DataError, match=r"labels.csv:3: a.png has label 'cat' here and 'cat\|dog' on line 2"):
        ManifestSource().split(str(conflict), 0.0, 0, reading)
    empty = _manifest(tmp_path, [("a.png", "|"), ("b.png", "cat")])
    with pytest.raises(DataError, match=r"labels.csv:2: a row needs a path and a label"):
        ManifestSource().split(str(empty), 0.0, 0, reading)


def test_a_python_dataset_gives_label_sets_as_index_lists_or_0_1_rows_with_task_multilabel():
    rgb = np.zeros((8, 8, 3), dtype=np.uint8)
    as_lists = Items([rgb] * 8, [[0, 2], [1], [0, 1], [2], [0], [1, 2], [2, 0], [1]], classes=["a", "b", "c"])
    as_rows = Items([rgb] * 8, [np.asarray([int(c in s) for c in range(3)]) for s in as_lists.labels])
    handed.hand("dataset://Lists", as_lists)
    handed.hand("dataset://Rows", as_rows)
    reading = Reading(multilabel=True)
    lists = PyDatasetSource().split("dataset://Lists", 0.25, 1, reading)
    rows = PyDatasetSource().split("dataset://Rows", 0.25, 1, reading)
    assert lists.classes == ["a", "b", "c"] and rows.classes == ["0", "1", "2"]
    assert (lists.train.targets == rows.train.targets).all() and list(lists.val.indices) == list(rows.val.indices)
    assert len(lists.val) == 2 and lists.train.targets[0].tolist() == [1, 0, 1]
    handed.hand("dataset://Bad", Items([rgb] * 2, [[0], ["x"]]))
    with pytest.raises(DataError, match=r"a label must be a list of class indices or a 0/1 row"):
        PyDatasetSource().split("dataset://Bad", 0.25, 1, reading)
