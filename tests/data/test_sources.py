import json

import pytest

from ddptrain.data.sources import all_images, load_split
from ddptrain.data.split import write_split_files
from ddptrain.errors import DataError

from ..conftest import write_synthetic


def test_split_is_stratified_and_deterministic(tiny_shapes):
    a = load_split(tiny_shapes, val_split=0.25, seed=3)
    b = load_split(tiny_shapes, val_split=0.25, seed=3)
    assert a.classes == ["disc", "ring", "star"]
    assert a.train == b.train and a.val == b.val
    per_class = [sum(1 for _, label in a.val if label == c) for c in range(3)]
    assert per_class == [3, 3, 3]
    assert not set(a.train) & set(a.val)
    assert len(a.train) + len(a.val) == 36
    assert load_split(tiny_shapes, val_split=0.25, seed=4).val != a.val


def test_extensions_any_case_and_other_files_ignored(tmp_path):
    write_synthetic(tmp_path, classes=2, per_class=3)
    (tmp_path / "disc" / "UPPER.JPEG").write_bytes((tmp_path / "disc" / "disc_0000.jpg").read_bytes())
    (tmp_path / "disc" / "readme.txt").write_text("not an image")
    split = load_split(tmp_path, val_split=0.0, seed=0)
    names = [p.split("/")[-1] for p, _ in split.train]
    assert "UPPER.JPEG" in names and "readme.txt" not in names
    assert len(split.train) == 7


def test_explicit_train_val_layout(tmp_path):
    write_synthetic(tmp_path / "train", classes=2, per_class=4)
    write_synthetic(tmp_path / "val", classes=2, per_class=2, start=50)
    split = load_split(tmp_path, val_split=0.2, seed=0)
    assert split.layout == "train/val"
    assert len(split.train) == 8 and len(split.val) == 4


def test_empty_class_and_missing_root_are_clear_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_split(tmp_path / "nope", 0.2, 0)
    write_synthetic(tmp_path, classes=2, per_class=2)
    (tmp_path / "zzz_empty").mkdir()
    with pytest.raises(DataError, match="zzz_empty"):
        load_split(tmp_path, 0.2, 0)


def test_unknown_class_folder_for_evaluation(tmp_path):
    write_synthetic(tmp_path, classes=3, per_class=1)
    with pytest.raises(DataError, match="star"):
        all_images(tmp_path, ["disc", "ring"])


def test_split_files_written(tiny_shapes, tmp_path):
    split = load_split(tiny_shapes, 0.25, 0)
    write_split_files(split, tmp_path)
    assert json.loads((tmp_path / "class_indices.json").read_text()) == {"0": "disc", "1": "ring", "2": "star"}
    header, *val_lines = (tmp_path / "splits" / "val.txt").read_text().splitlines()
    assert header == "# ddptrain splits 2"
    assert len(val_lines) == 9 and val_lines[0].startswith("disc/")


def test_the_library_api_and_train_split_alike_through_the_registry(tiny_shapes, tmp_path):
    import ddptrain
    from ddptrain.data import sources

    split = ddptrain.load_data(str(tiny_shapes), val_split=0.25, seed=3)
    same = load_split(tiny_shapes, 0.25, 3)
    assert split.classes == same.classes and split.val.digest() == same.val.digest()
    assert [s.name for s in sources.SOURCES] == [
        "Python dataset",
        "tar set",
        "shard set",
        "Hugging Face dataset",
        "Parquet manifest",
        "JSON Lines manifest",
        "manifest",
        "folder",
    ]
    assert sources.source_for(str(tmp_path / "list.csv")).name == "manifest"
    assert sources.source_for(str(tmp_path / "metadata.JSONL")).name == "JSON Lines manifest"
    assert sources.source_for("https://host/set/").name == "shard set"
    assert sources.source_for("https://host/set/train-{0000..0009}.tar").name == "tar set"
    assert sources.source_for("wds:/data/any").name == "tar set"
    assert sources.source_for("s3://bucket/set/").name == "shard set"
    assert sources.source_for("hf:beans").name == "Hugging Face dataset"
    with pytest.raises(DataError, match="not a kind of data ddptrain reads"):
        sources.source_for("gs://bucket/set/")


def test_a_relative_path_in_a_plain_list_is_read_from_the_current_folder(tmp_path, monkeypatch):
    """`bench input --data hymenoptera_data` looked for /hymenoptera_data/...: a plain (path, label) list (the
    library API, the benches) is indexed from `/`, so a relative path is now made absolute from the current folder."""
    from ddptrain.data.images import ImageLimits
    from ddptrain.data.index import as_samples

    write_synthetic(tmp_path / "rel", classes=2, per_class=1)
    monkeypatch.chdir(tmp_path)
    relative = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "rel").glob("*/*.jpg"))
    samples = as_samples([(relative[0], 0), (str(tmp_path / relative[1]), 1), ("https://host/c.jpg", 1)])
    assert [samples.path(i) for i in range(3)] == [str(tmp_path / r) for r in relative] + ["https://host/c.jpg"]
    assert samples.read(0, ImageLimits()) == (tmp_path / relative[0]).read_bytes()
