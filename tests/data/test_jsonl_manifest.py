"""JSON Lines manifests (a Hugging Face imagefolder's metadata.jsonl): the CSV manifest's rules and split for the same
rows, and a line that is not a row refused naming it."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import pytest

from ddptrain.data.sources import Reading, all_images, load_split, source_for
from ddptrain.errors import DataError

from ..conftest import write_synthetic


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def write_csv(path: Path, header, rows) -> Path:
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    return path


def _paths(part):
    return [part.path(i) for i in range(len(part))]


@pytest.fixture
def flat(tmp_path) -> Path:
    """The images of two classes in one folder, as a Hugging Face imagefolder keeps them beside metadata.jsonl."""
    classes = write_synthetic(tmp_path / "classes", classes=2, per_class=6)
    folder = tmp_path / "train"
    folder.mkdir()
    for image in sorted(classes.glob("*/*.jpg")):
        image.rename(folder / f"{image.parent.name}_{image.name}")
    return folder


def test_an_imagefolder_metadata_jsonl_splits_as_the_csv_of_the_same_rows(flat, caplog):
    names = sorted(p.name for p in flat.glob("*.jpg"))
    records = [{"file_name": name, "label": name.split("_")[0], "caption": "a shape"} for name in names]
    jsonl = write_jsonl(flat / "metadata.jsonl", [*records, records[2]])  # one exact repeat
    table = write_csv(flat / "metadata.csv", ["file_name", "label"], [(r["file_name"], r["label"]) for r in records])
    assert source_for(str(jsonl)).name == "JSON Lines manifest"
    with caplog.at_level(logging.WARNING, logger="ddptrain"):
        got = load_split(jsonl, 0.25, 3)
    assert "(line 13 = line 3)" in caplog.text  # the repeat named by its line
    want = load_split(table, 0.25, 3)
    assert got.classes == want.classes == ["disc", "ring"]
    assert (_paths(got.train), _paths(got.val)) == (_paths(want.train), _paths(want.val))
    assert (len(got.train), len(got.val)) == (8, 4)
    assert list(all_images(str(jsonl), got.classes)) == list(all_images(str(table), got.classes))


def test_a_split_field_integer_labels_and_label_lists_read_as_in_the_csv(flat):
    names = sorted(p.name for p in flat.glob("*.jpg"))
    records = [
        {"path": n, "class": [1, "01", 2][i % 3], "split": "val" if i % 4 == 0 else "train"}
        for i, n in enumerate(names)
    ]
    got = load_split(write_jsonl(flat / "split.jsonl", records), 0.25, 0)
    assert got.classes == ["1", "2"] and (len(got.train), len(got.val)) == (9, 3)

    sets = [{"file_name": n, "label": ["ring", "disc"] if i % 3 == 0 else ["disc"]} for i, n in enumerate(names)]
    text = [(s["file_name"], "|".join(s["label"])) for s in sets]
    reading = Reading(multilabel=True)
    got = load_split(write_jsonl(flat / "sets.jsonl", sets), 0.25, 3, reading)
    want = load_split(write_csv(flat / "sets.csv", ["path", "label"], text), 0.25, 3, reading)
    assert got.classes == want.classes == ["disc", "ring"]
    for part in ("train", "val"):
        assert list(getattr(got, part)) == list(getattr(want, part))
        assert (getattr(got, part).targets == getattr(want, part).targets).all()


def test_whole_float_labels_are_their_integers_and_booleans_and_nan_read_as_parquet_reads_them(flat):
    """pandas writes an integer column that had a gap as floats: rows `1` and `1.0` of one manifest made two
    classes, '1' and '1.0'. A NaN label made a class 'nan' where a Parquet manifest's null is refused."""
    names = sorted(p.name for p in flat.glob("*.jpg"))
    records = [{"file_name": n, "label": [1, 1.0, "01", 2.0][i % 4]} for i, n in enumerate(names)]
    assert load_split(write_jsonl(flat / "floats.jsonl", records), 0.25, 0).classes == ["1", "2"]
    flags = [{"file_name": n, "label": i % 2 == 0} for i, n in enumerate(names)]
    assert load_split(write_jsonl(flat / "flags.jsonl", flags), 0.25, 0).classes == ["false", "true"]
    halves = [{"file_name": n, "label": [0.5, 1.5][i % 2]} for i, n in enumerate(names)]
    assert load_split(write_jsonl(flat / "halves.jsonl", halves), 0.25, 0).classes == ["0.5", "1.5"]
    gap = flat / "gap.jsonl"
    gap.write_text(
        "".join(
            json.dumps({"file_name": n, "label": float("nan") if i == 4 else i % 2}) + "\n" for i, n in enumerate(names)
        )
    )  # Python's json writes NaN
    with pytest.raises(DataError, match=r"gap\.jsonl.*5.*a path and a label"):
        load_split(gap, 0.25, 0)


def test_an_image_with_two_labels_is_refused_naming_both_lines(flat):
    names = sorted(p.name for p in flat.glob("*.jpg"))
    records = [{"file_name": n, "label": n.split("_")[0]} for n in names]
    path = write_jsonl(flat / "metadata.jsonl", [*records, {"file_name": names[0], "label": "ring"}])
    with pytest.raises(DataError, match=rf"metadata\.jsonl:13: {names[0]} has label 'ring' here and 'disc' on line 1"):
        load_split(path, 0.25, 0)


def test_a_run_resumed_on_a_manifest_with_a_new_label_names_the_label_not_a_folder(flat, tmp_path):
    """Refused before: 'it has a class folder 'wasp'', in a manifest that has no class folders."""
    from ddptrain.data.split import read_run_split, write_split_files

    names = sorted(p.name for p in flat.glob("*.jpg"))
    records = [{"file_name": n, "label": n.split("_")[0]} for n in names]
    path = write_jsonl(flat / "metadata.jsonl", records)
    (tmp_path / "run").mkdir()
    write_split_files(load_split(path, 0.25, 0), tmp_path / "run")
    records[0]["label"] = "wasp"
    with pytest.raises(DataError, match=r"it has a class 'wasp' that the run's split \("):
        read_run_split(tmp_path / "run", load_split(write_jsonl(path, records), 0.25, 0))
    data = write_synthetic(tmp_path / "folder", classes=3, per_class=4)
    (tmp_path / "folder_run").mkdir()
    write_split_files(load_split(data, 0.25, 0), tmp_path / "folder_run")
    (data / "wasp").mkdir()
    (data / "wasp" / "0.jpg").write_bytes((data / "disc" / "disc_0000.jpg").read_bytes())
    (data / "hornet").mkdir()
    (data / "hornet" / "0.jpg").write_bytes((data / "disc" / "disc_0000.jpg").read_bytes())
    with pytest.raises(DataError, match=r"it has class folders 'hornet', 'wasp' that the run's split \("):
        read_run_split(tmp_path / "folder_run", load_split(data, 0.25, 0))
