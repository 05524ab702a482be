"""Parquet manifests: the CSV manifest's rules and split for the same rows (written with pyarrow, as other tools
write them), listed column-wise into the same compact arrays, and read once per epoch on two processes."""

from __future__ import annotations

import csv
import logging
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ddptrain.data.sources import all_images, load_split, source_for
from ddptrain.errors import DataError

from ..conftest import write_synthetic
from ..dist_harness import epoch_names, run_ranks


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("folder"), classes=3, per_class=12)


def rows_of(folder: Path, lists: Path):
    """Every image once: relative to `lists` for even ones (every fifth through ./ and a detour), absolute for odd."""
    rows = []
    for i, image in enumerate(sorted(folder.glob("*/*.jpg"))):
        where = str(image) if i % 2 else os.path.relpath(image, lists)
        if i % 5 == 0:
            where = f"./{image.parent.name}/../{where}" if not i % 2 else where.replace("/disc/", "/disc/./", 1)
        rows.append((where, image.parent.name))
    random.Random(0).shuffle(rows)
    return rows


def write_both(rows, lists: Path, extra=None):
    lists.mkdir(parents=True, exist_ok=True)
    columns = {"path": [r[0] for r in rows], "label": [r[1] for r in rows], **(extra or {})}
    pq.write_table(pa.table(columns), lists / "list.parquet")
    with open(lists / "list.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(list(columns))
        writer.writerows(zip(*columns.values()))
    return lists / "list.parquet", lists / "list.csv"


def _same(a, b) -> None:
    assert a.classes == b.classes and list(a.train) == list(b.train) and list(a.val) == list(b.val)


def test_a_parquet_manifest_splits_exactly_as_the_csv_of_the_same_rows(folder, tmp_path, caplog):
    rows = rows_of(folder, tmp_path / "lists")
    parquet, table = write_both([*rows, rows[3], rows[7]], tmp_path / "lists")  # two exact repeats
    assert source_for(str(parquet)).name == "Parquet manifest"
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        a = load_split(parquet, 0.25, 3)
    assert "2 rows repeat an earlier row exactly and were dropped (row 37 = row 4, row 38 = row 8)" in caplog.text
    _same(a, load_split(table, 0.25, 3))
    assert (len(a.train), len(a.val)) == (27, 9) and not a.by_data
    by_folder = load_split(folder, 0.25, 3)
    assert [a.val.path(i) for i in range(9)] == [str(by_folder.val.path(i)) for i in range(9)]
    every = all_images(str(parquet), a.classes)
    assert len(every) == 36 and list(every) == list(all_images(str(table), a.classes))


def test_a_split_column_and_integer_labels_read_as_in_the_csv(folder, tmp_path):
    rows = [(p, str(["1", "01", "+2"][i % 3])) for i, (p, _) in enumerate(rows_of(folder, tmp_path / "lists"))]
    parquet, table = write_both(
        rows, tmp_path / "lists", {"split": ["val" if i % 4 == 0 else "Train " for i in range(36)]}
    )
    a = load_split(parquet, 0.25, 0)
    _same(a, load_split(table, 0.25, 0))
    assert a.classes == ["1", "2"] and (len(a.train), len(a.val)) == (27, 9)
    assert a.by_data and load_split(table, 0.25, 0).by_data  # the split column, not --val-split, made it


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"label": "other"}, r"row 37: .*\.jpg has label 'other' here and '\w+' on row \d+; give each image one label"),
        ({"path": " "}, r"row 37: a row needs a path and a label"),
    ],
)
def test_a_row_at_odds_is_one_error_naming_the_rows(folder, tmp_path, change, said):
    rows = rows_of(folder, tmp_path / "lists")
    bad = {"path": rows[0][0], "label": rows[0][1], **change}
    parquet, _ = write_both([*rows, (bad["path"], bad["label"])], tmp_path / "lists")
    with pytest.raises(DataError, match=said):
        load_split(parquet, 0.25, 0)


def test_a_file_that_is_not_a_parquet_manifest_is_one_error(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"PAR1 but not really")
    with pytest.raises(DataError, match=r"x\.parquet is not a Parquet file"):
        load_split(tmp_path / "x.parquet", 0.2, 0)
    pq.write_table(pa.table({"photo": ["a.jpg"], "label": ["a"]}), tmp_path / "y.parquet")
    with pytest.raises(
        DataError, match=r"y\.parquet is not a manifest: it needs a path and a label column.*\(found photo,label;"
    ):
        load_split(tmp_path / "y.parquet", 0.2, 0)


@pytest.mark.parametrize("columns", [("filename", "class"), ("Image", "Category", "subset")])
def test_columns_named_as_other_tools_name_them_read_as_path_label_split(tmp_path, columns, caplog):
    """filename,class (a Kaggle CSV) or image,category,subset: the same split as path,label,split, said once."""
    folder = write_synthetic(tmp_path / "img", classes=2, per_class=5)
    images = sorted(folder.glob("*/*.jpg"))
    rows = [(str(p), p.parent.name, "val" if i % 5 == 0 else "train") for i, p in enumerate(images)]
    keep = len(columns)
    plain = pa.table({n: [r[i] for r in rows] for i, n in enumerate(("path", "label", "split")[:keep])})
    renamed = pa.table({n: [r[i] for r in rows] for i, n in enumerate(columns)})
    pq.write_table(plain, tmp_path / "plain.parquet")
    pq.write_table(renamed, tmp_path / "renamed.parquet")
    header = ",".join(columns)
    (tmp_path / "renamed.csv").write_text(header + "\n" + "".join(",".join(r[:keep]) + "\n" for r in rows))
    expected = load_split(tmp_path / "plain.parquet", 0.2, 0)
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        for other in ("renamed.parquet", "renamed.csv"):
            split = load_split(tmp_path / other, 0.2, 0)
            assert [split.train.path(i) for i in range(len(split.train))] == [
                expected.train.path(i) for i in range(len(expected.train))
            ]
            assert [split.val.path(i) for i in range(len(split.val))] == [
                expected.val.path(i) for i in range(len(expected.val))
            ]
    said = [r.getMessage() for r in caplog.records if "path from" in r.getMessage()]
    assert said and said[0].endswith(
        f"path from '{columns[0]}', label from '{columns[1]}'" + (f", split from '{columns[2]}'" if keep == 3 else "")
    )


def test_two_processes_read_every_training_image_once_per_epoch(folder, tmp_path):
    parquet, _ = write_both(rows_of(folder, tmp_path / "lists"), tmp_path / "lists")
    ranks = run_ranks(epoch_names, 2, str(parquet), 2)
    train = load_split(parquet, 0.25, 3).train
    expected = {train.relative(i) for i in range(len(train))}
    for epoch in range(2):
        both = ranks[0][epoch] + ranks[1][epoch]
        assert len(set(both)) == len(both) == len(expected) - 1 and set(both) <= expected
    assert ranks[0][0] != ranks[0][1]


def test_multilabel_rows_as_lists_or_a_b_text_read_as_the_csv_of_the_same_sets(folder, tmp_path):
    from ddptrain.data.sources import Reading

    images = sorted(str(p) for p in folder.rglob("*.jpg"))[:12]
    sets = [["disc"] if i % 3 else ["ring", "disc"] for i in range(len(images))]
    csv_path = tmp_path / "m.csv"
    with open(csv_path, "w", newline="") as handle:
        csv.writer(handle).writerows([["path", "label"], *[[p, "|".join(s)] for p, s in zip(images, sets)]])
    as_lists, as_text = tmp_path / "lists.parquet", tmp_path / "text.parquet"
    pq.write_table(pa.table({"path": images, "label": sets}), as_lists)
    pq.write_table(pa.table({"path": images, "label": ["|".join(s) for s in sets]}), as_text)
    reading = Reading(multilabel=True)
    want = load_split(csv_path, 0.25, 3, reading)
    for path in (as_lists, as_text):
        got = load_split(path, 0.25, 3, reading)
        assert got.classes == want.classes == ["disc", "ring"]
        for part in ("train", "val"):
            assert list(getattr(got, part)) == list(getattr(want, part))
            assert (getattr(got, part).targets == getattr(want, part).targets).all()


def test_label_key_names_the_label_column_of_every_manifest_kind_and_nothing_else(folder, tmp_path):
    """`--label-key colour` on a CSV with label and colour columns trained on `label`, in silence."""
    import json

    from ddptrain.data.sources import Reading

    rows = rows_of(folder, tmp_path / "lists")
    colours = ["red" if i % 3 else "blue" for i in range(len(rows))]
    parquet, table = write_both(rows, tmp_path / "lists", {"colour": colours})
    jsonl = tmp_path / "lists" / "list.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"path": p, "label": c, "colour": k}) + "\n" for (p, c), k in zip(rows, colours))
    )
    keyed = Reading(label_key="Colour")  # any case, as the other column names
    for path in (table, parquet, jsonl):
        split = load_split(path, 0.25, 0, keyed)
        assert split.classes == ["blue", "red"], path
        assert (len(split.train), len(split.val)) == (27, 9)
        assert load_split(path, 0.25, 0).classes == ["disc", "ring", "star"]  # without it: the label column
        with pytest.raises(DataError, match=rf"--label-key breed: .*{path.name} has no column of that name \(it has "):
            load_split(path, 0.25, 0, Reading(label_key="breed"))
    from ddptrain.data.sources import check_label_key

    with pytest.raises(DataError, match=r"--label-key Colour: .* is a folder, whose labels are not chosen by a key"):
        check_label_key(str(folder), keyed)  # train's check before launch
    assert load_split(folder, 0.25, 0, keyed).classes == ["disc", "ring", "star"]  # eval: a checkpoint's own key
    from ddptrain.data.sources import reading_for

    # eval of a run's checkpoint on other data: its key where it names a column there too, not a tar set's member
    assert reading_for(str(jsonl), keyed, str(table)).label_key == "Colour"
    member = Reading(label_key="txt")
    assert reading_for(str(table), member, str(tmp_path / "set.tar")).label_key == "cls"
    assert load_split(table, 0.25, 0, reading_for(str(table), member, str(tmp_path / "set.tar"))).classes == [
        "disc",
        "ring",
        "star",
    ]
