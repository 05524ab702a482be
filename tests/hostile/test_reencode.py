"""Re-encoding for shard sets on several processes against a process that dies (as the out-of-memory killer kills
it): shard stops in one line naming the image, that the set is incomplete, and what to do — not a traceback."""

import os

import pytest

from ddptrain.data.reencode import Reencode, reencoded
from ddptrain.errors import DataError


class _Dies(Reencode):
    """A re-encoding process that is killed (as the out-of-memory killer would) on one image."""

    def apply(self, data: bytes):
        if data == b"die":
            os._exit(9)
        return super().apply(data)


def test_a_re_encoding_process_that_dies_stops_shard_in_one_line_saying_what_to_do():
    datas = [b"fine"] * 5 + [b"die"] + [b"fine"] * 5
    with pytest.raises(DataError, match="killed, perhaps out of memory.*remove its tar files.*fewer --jobs"):
        list(reencoded(datas.__getitem__, range(len(datas)), _Dies(restart_markers=True), jobs=2))
