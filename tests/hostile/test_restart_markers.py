"""JPEG restart markers against what a file can say about itself: markers that disagree with the header's
restart interval are never used to cut the file into segments, so a region comes out exactly as the whole decode's
or goes to the whole decode for its usual verdict; never a wrong crop. Damage outside a crop's segments is met when
a crop reaches it; `shard --restart-markers` where this install cannot write them is refused in one line."""

import io
import re

import numpy as np
import pytest
import torch

from ddptrain.data import images
from ddptrain.data.restarts import with_restart_markers
from ddptrain.tools.bench.photos import photo

RST = re.compile(rb"\xff[\xd0-\xd7]")

needs_decoder = pytest.mark.skipif(
    images.region_decoder() is None,
    reason="ddptrain was installed without its compiled JPEG decoder (no C compiler or libjpeg-turbo headers)",
)


def _jpeg(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    photo(np.random.default_rng(0), width, height).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _whole(data: bytes) -> torch.Tensor:
    decoded = images.decode_rgb(data)
    assert isinstance(decoded, torch.Tensor)
    return decoded


def _renumbered(marked: bytes, which: int, number: int) -> bytes:
    at = [m.start() for m in RST.finditer(marked)][which]
    return marked[:at] + bytes([0xFF, 0xD0 + number]) + marked[at + 2 :]


@needs_decoder
@pytest.mark.parametrize(
    "harm",
    ["a marker out of turn", "a marker missing", "an interval the markers do not keep", "an interval with no markers"],
)
def test_markers_that_do_not_match_the_header_are_never_trusted(harm):
    """A file whose markers disagree with its restart interval: the region decoder does not cut it into segments;
    each region it returns is the whole decode's, or it returns none and the whole decode gives the verdict."""
    original = _jpeg(320, 240)
    marked = with_restart_markers(original)
    if harm == "a marker out of turn":
        bad = _renumbered(marked, 5, 7)
    elif harm == "an interval the markers do not keep":
        at = marked.index(b"\xff\xdd")  # DRI: its length, then the MCUs between markers (4 here)
        assert marked[at + 4 : at + 6] == b"\x00\x04"
        bad = marked[: at + 4] + b"\x00\x08" + marked[at + 6 :]
    elif harm == "a marker missing":
        at = [m.start() for m in RST.finditer(marked)][-3]
        bad = marked[:at] + marked[at + 2 :]
    else:
        bad = RST.sub(b"", marked)  # the header keeps its interval; the data has no markers
    whole = _whole(original)
    for top, left, bottom, right in ((0, 0, 16, 16), (200, 260, 240, 320), (100, 0, 140, 320), (0, 0, 240, 320)):
        region = images.decode_region(bad, 1, top, left, bottom, right)
        assert region is None or torch.equal(region, whole[:, top:bottom, left:right]), (harm, top, left)


def _damage_first_segment(marked: bytes) -> bytes:
    """The file with the entropy-coded bytes of its first segment (the top-left corner) overwritten."""
    start = marked.index(b"\xff\xda") + 2 + int.from_bytes(marked[marked.index(b"\xff\xda") + 2 :][:2], "big")
    end = RST.search(marked, start).start()
    return marked[:start] + bytes([0x55]) * (end - start) + marked[end:]


@needs_decoder
def test_a_region_is_decoded_from_its_own_segments_alone():
    """Damage in the top-left corner: a crop in the bottom-right of the marked file never reads it (its pixels
    are exact), while the same file without markers would have to; a crop over the damage goes to the whole
    decode, which gives the damaged file its usual verdict."""
    original = _jpeg(320, 240)
    marked = with_restart_markers(original)
    damaged = _damage_first_segment(marked)
    whole = _whole(original)
    assert torch.equal(images.decode_region(damaged, 1, 160, 200, 240, 320), whole[:, 160:240, 200:320])
    assert images.decode_region(damaged, 1, 0, 0, 40, 40) is None


def test_the_flag_is_refused_in_one_line_where_the_compiled_decoder_is_missing(tmp_path, monkeypatch):
    from ddptrain.data import restarts
    from ddptrain.errors import ConfigError
    from ddptrain.tools import shard

    (tmp_path / "data" / "a").mkdir(parents=True)
    (tmp_path / "data" / "a" / "x.png").write_bytes(_png())
    monkeypatch.setattr(restarts, "available", lambda: False)
    with pytest.raises(ConfigError, match="--restart-markers: ddptrain was installed without its compiled JPEG"):
        shard.make_shards(str(tmp_path / "data"), str(tmp_path / "set"), "1MB", 0.0, 0, False, restart_markers=True)
    with pytest.raises(ConfigError, match="--jobs 0: give at least 1 process"):
        shard.make_shards(str(tmp_path / "data"), str(tmp_path / "set"), "1MB", 0.0, 0, False, jobs=0)
    assert not (tmp_path / "set").exists()  # refused before anything was written


def _png() -> bytes:
    buffer = io.BytesIO()
    photo(np.random.default_rng(9), 64, 48).save(buffer, format="PNG")
    return buffer.getvalue()
