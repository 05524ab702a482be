"""Pre-sized shard sets (`ddptrain shard --max-side N --quality Q`): larger images re-encoded once at that side,
smaller ones stored byte for byte, the choice recorded in the index and in every run on the set."""

import io
import json

import numpy as np
import pytest
from PIL import Image

from ddptrain.data.images import ImageLimits, image_size
from ddptrain.data.presize import Presize, recorded_side
from ddptrain.data.shards import open_shard_set, write_shards
from ddptrain.data.sources import load_split
from ddptrain.errors import ConfigError
from ddptrain.tools.bench.photos import photo

from ..conftest import run_cli


def _folder(root, sizes):
    rng = np.random.default_rng(0)
    for i, (w, h) in enumerate(sizes):
        folder = root / f"c{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        photo(rng, w, h).save(folder / f"i{i}.jpg", quality=95)
    return root


def test_a_larger_image_is_re_encoded_at_the_side_and_a_smaller_one_kept():
    buffer = io.BytesIO()
    photo(np.random.default_rng(1), 800, 600).save(buffer, format="JPEG", quality=95)
    smaller = Presize(400, 85).apply(buffer.getvalue())
    assert smaller is not None and image_size(smaller) == (400, 300) and len(smaller) < len(buffer.getvalue()) / 2
    assert Image.open(io.BytesIO(smaller)).format == "JPEG"
    assert Presize(800).apply(buffer.getvalue()) is None  # within the size: stored as it is
    assert Presize(100).apply(b"not an image") is None  # the loader skips and counts it, as before
    assert Presize(300).target(300, 1000) == (90, 300)


def test_a_shard_set_made_pre_sized_holds_small_images_and_says_so(tmp_path):
    sizes = [(640, 480), (200, 150), (480, 640), (300, 300), (1000, 500), (120, 90)]
    folder = _folder(tmp_path / "data", sizes)
    split = load_split(folder, 0.0, 0)
    summary = write_shards(split, tmp_path / "set", 1 << 20, 0, presize=Presize(256, 90))
    assert summary["resized"] == 4
    classes, train, _, index = open_shard_set(str(tmp_path / "set"))
    assert index["presized"] == {"max_side": 256, "quality": 90}
    originals = {split.train.relative(i): split.train.read(i, ImageLimits()) for i in range(len(split.train))}
    for i in range(len(train)):
        data = train.read(i, ImageLimits())
        original = originals[train.relative(i)]
        width, height = image_size(original)
        if max(width, height) > 256:
            assert max(image_size(data)) == 256
        else:
            assert data == original  # byte for byte


def test_a_run_records_the_sets_side_and_refuses_a_side_it_was_not_made_with():
    made = {"seed": 0, "presized": {"max_side": 384, "quality": 90}}
    assert recorded_side(made, None, "s/") == 384 and recorded_side(made, 384, "s/") == 384
    assert recorded_side({"seed": 0}, None, "s/") is None
    with pytest.raises(ConfigError, match="made with --max-side 384"):
        recorded_side(made, 256, "s/")
    with pytest.raises(ConfigError, match="not pre-sized"):
        recorded_side({}, 256, "folder/")


def test_the_command_line_refuses_a_side_or_quality_out_of_range(tmp_path):
    folder = _folder(tmp_path / "data", [(64, 48)] * 4)
    for flags, said in ((["--max-side", 4], "--max-side must be"), (["--max-side", 64, "--quality", 0], "--quality")):
        done = run_cli(["shard", "--data", folder, "--out", tmp_path / "out", *flags], check=False)
        assert done.returncode != 0 and said in done.stderr
    done = run_cli(["shard", "--data", folder, "--out", tmp_path / "out", "--max-side", 32, "--val-split", 0])
    assert json.loads((tmp_path / "out" / "shards.json").read_text())["presized"]["max_side"] == 32
    assert "re-encoded 4 images" in done.stderr
