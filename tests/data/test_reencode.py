"""Re-encoding for shard sets on several processes (data/reencode.py): the same bytes, in the same order, as on one;
what cannot be re-encoded is handed on as it was."""

import io

import numpy as np

from ddptrain.data.images import ImageLimits
from ddptrain.data.presize import Presize
from ddptrain.data.reencode import Reencode, reencoded
from ddptrain.data.shards import open_shard_set, write_shards
from ddptrain.data.sources import load_split
from ddptrain.tools.bench.photos import photo

from .test_region_decode import needs_decoder


def _photos(count: int) -> list:
    rng, out = np.random.default_rng(4), []
    for index in range(count):
        buffer = io.BytesIO()
        photo(rng, 120 + 40 * (index % 4), 90 + 30 * (index % 3)).save(buffer, format="JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


@needs_decoder
def test_several_processes_give_the_bytes_one_gives_in_the_same_order():
    datas = [*_photos(11), b"not an image", _photos(1)[0][:900]]
    order = list(reversed(range(len(datas))))
    work = Reencode(Presize(160, 85), restart_markers=True)
    one = list(reencoded(datas.__getitem__, order, work, jobs=1))
    two = list(reencoded(datas.__getitem__, order, work, jobs=2))
    assert one == two and [given for given, _ in two] == [datas[i] for i in order]
    stored = {i: result for i, (_, result) in zip(order, two)}
    assert stored[11] == (b"not an image", False, False) and stored[12] == (datas[12], False, False)
    assert sum(resized for _, resized, _ in stored.values()) == 5  # wider than 160 px: 200 and 240, 5 of 11
    assert all(marked for _, _, marked in list(stored.values())[2:])  # every photo (order is reversed)


@needs_decoder
def test_a_shard_set_made_on_two_processes_holds_what_one_process_makes(tmp_path):
    for index, data in enumerate(_photos(10)):
        folder = tmp_path / "data" / f"c{index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{index}.jpg").write_bytes(data)
    split = load_split(tmp_path / "data", 0.2, 0)
    made = {}
    for jobs in (1, 2):
        summary = write_shards(split, tmp_path / f"set{jobs}", 1 << 20, 0, None, 0.2, Presize(150), True, jobs)
        _, train, val, _ = open_shard_set(str(tmp_path / f"set{jobs}"))
        made[jobs] = (summary, [(s.relative(i), s.read(i, ImageLimits())) for s in (train, val) for i in range(len(s))])
    assert made[1] == made[2] and made[2][0]["restart_marked"] == 10
