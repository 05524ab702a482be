"""Property-based: every parser of user or network input answers anything with its result or one DdptrainError —
never another exception, never a hang. YAML configs, shards.json and the offsets file (mutated from a real shard
set), split files and the run marker; CSV manifests and split names are covered in test_manifests.py and
test_names.py."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddptrain.config import build_config, load_yaml
from ddptrain.data import splitfile
from ddptrain.data.shards import ARRAYS, INDEX, open_shard_set, write_shards
from ddptrain.data.sources import load_split
from ddptrain.errors import ConfigError, DdptrainError
from ddptrain.train.rundir import MARKER, read_marker

from ..conftest import write_synthetic

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True), st.text(max_size=12)
)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)  # fmt: skip
OPTION_NAMES = st.sampled_from(
    ["lr", "epochs", "data", "mean", "optim", "model", "log_to", "nnodes", "x", "batch-size"]
)


@SETTINGS
@given(st.dictionaries(st.one_of(OPTION_NAMES, st.text(max_size=10)), JSON, max_size=6))
def test_any_yaml_config_is_read_or_refused_in_one_error(tmp_path, values):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values))
    try:
        load_yaml(path)
    except DdptrainError as error:
        assert "\n" not in str(error)


@SETTINGS
@given(st.binary(max_size=200))
def test_any_bytes_as_a_yaml_config_are_read_or_refused(tmp_path, raw):
    path = tmp_path / "config.yaml"
    path.write_bytes(raw)
    try:
        load_yaml(path)
    except DdptrainError:
        pass


@pytest.fixture(scope="module")
def shard_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("parsers")
    write_synthetic(root / "data", classes=2, per_class=4)
    write_shards(load_split(root / "data", 0.25, 0), root / "shards", 4 * 1024, 0)
    return root / "shards"


def _mutate(value, path, replacement):
    if not path:
        return replacement
    key, rest = path[0], path[1:]
    if isinstance(value, dict) and value:
        name = sorted(value)[key % len(value)]
        return {**value, name: _mutate(value[name], rest, replacement)}
    if isinstance(value, list) and value:
        index = key % len(value)
        return [*value[:index], _mutate(value[index], rest, replacement), *value[index + 1 :]]
    return replacement


@SETTINGS
@given(st.lists(st.integers(0, 50), min_size=1, max_size=4), JSON)
def test_any_change_to_shards_json_is_read_or_refused_in_one_error(shard_set, where, replacement):
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(shutil.copytree(shard_set, Path(tmp) / "s"))
        index = json.loads((copy / INDEX).read_text())
        (copy / INDEX).write_text(json.dumps(_mutate(index, where, replacement)))
        try:
            classes, train, val, _ = open_shard_set(str(copy))
        except DdptrainError:
            return
        assert all(0 <= label < len(classes) for label in train.labels.tolist() + val.labels.tolist())


@SETTINGS
@given(st.sampled_from(["train_shard", "train_offset", "train_size", "train_label", "val_name_offsets"]),
       st.lists(st.integers(-(2**33), 2**33), max_size=12))  # fmt: skip
def test_any_offsets_array_is_read_or_refused_in_one_error(shard_set, name, values):
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(shutil.copytree(shard_set, Path(tmp) / "s"))
        with np.load(copy / ARRAYS) as loaded:
            arrays = {key: loaded[key] for key in loaded.files}
        arrays[name] = np.asarray(values, dtype=np.int64)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        (copy / ARRAYS).write_bytes(buffer.getvalue())
        index = json.loads((copy / INDEX).read_text())
        index.pop("arrays")  # as a version-1 index: the offsets are checked by their content alone
        index["version"] = 1
        (copy / INDEX).write_text(json.dumps(index))
        try:
            open_shard_set(str(copy))
        except DdptrainError:
            pass


@SETTINGS
@given(st.binary(max_size=300))
def test_any_bytes_as_a_split_file_are_read_or_refused(tmp_path, raw):
    path = tmp_path / "train.txt"
    path.write_bytes(raw)
    try:
        splitfile.read(path)
    except DdptrainError:
        pass


@SETTINGS
@given(JSON)
def test_any_json_as_the_run_marker_is_read_or_refused(tmp_path, value):
    (tmp_path / MARKER).write_text(json.dumps(value))
    try:
        read_marker(tmp_path)
    except DdptrainError:
        pass


@SETTINGS
@given(st.one_of(st.text(max_size=16), st.floats().map(repr)))
def test_any_text_as_progress_every_is_seconds_or_refused_naming_it(text):
    from ddptrain.cli import _seconds

    try:
        value = _seconds(text)
    except argparse.ArgumentTypeError as error:
        assert repr(text) in str(error)
    else:
        assert value >= 0  # never NaN, never negative (inf: no lines)


@pytest.mark.parametrize("command", ["eval", "shard", "predict"])
@pytest.mark.parametrize("text", ["nan", "-1", "soon"])
def test_a_bad_progress_interval_is_refused_before_anything_runs(tmp_path, command, text):
    proc = subprocess.run(
        [sys.executable, "-m", "ddptrain", command, "--data", tmp_path, "--progress-every", text]
        + (["--out", tmp_path / "out"] if command == "shard" else ["--checkpoint", tmp_path / "c.pt"]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"argument --progress-every: '{text}' is not a number of seconds (0 or more)" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("scale", [0, -0.1, 1.5, "nan", "inf"])
def test_a_crop_scale_outside_zero_to_one_is_refused_by_name(scale):
    """The default keeps at least 35 % of the picture; an area fraction outside (0, 1] (or NaN) is no crop."""
    assert build_config({"data": "d"}).data.min_crop_scale == 0.35
    with pytest.raises(ConfigError, match=r"--min-crop-scale must be in \(0, 1\]"):
        build_config({"data": "d", "min_crop_scale": scale})
