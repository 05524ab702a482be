"""What `ddptrain shard` does to each image before it stores it: pre-sizing (presize.py) and restart markers
(restarts.py). Both cost milliseconds an image (a decode, a resize and an encode; a lossless transcode), so for a
large set they run on several processes, in order, with a bounded number of images in flight."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence, Tuple

from ..errors import DataError
from .presize import Presize
from .restarts import with_restart_markers

IN_FLIGHT_PER_JOB = 4  # images read ahead per process: a camera's 5 MB photos x 16 processes stay near 320 MB


@dataclass(frozen=True)
class Reencode:
    presize: Optional[Presize] = None
    restart_markers: bool = False

    def __bool__(self) -> bool:
        return self.presize is not None or self.restart_markers

    def apply(self, data: bytes) -> Tuple[bytes, bool, bool]:
        """(the bytes to store, whether pre-sizing re-encoded the image, whether restart markers were written)."""
        smaller = self.presize.apply(data) if self.presize else None
        data = smaller or data
        marked = with_restart_markers(data) if self.restart_markers else None
        return marked or data, smaller is not None, marked is not None


def reencoded(
    read: Callable[[int], bytes], order: Sequence[int], reencode: Reencode, jobs: int
) -> Iterator[Tuple[bytes, Tuple[bytes, bool, bool]]]:
    """(the sample's bytes as read, `reencode.apply` of them) for each index in `order`, in that order; on `jobs`
    processes where there is something to do and more than one is asked for."""
    if not reencode or jobs <= 1 or len(order) < 2:
        for index in order:
            data = read(index)
            yield data, reencode.apply(data)
        return
    window = jobs * IN_FLIGHT_PER_JOB
    with ProcessPoolExecutor(jobs) as pool:
        for start in range(0, len(order), window):
            datas = [read(index) for index in order[start : start + window]]
            try:
                yield from zip(datas, pool.map(reencode.apply, datas))
            except BrokenProcessPool:
                raise DataError(
                    f"a re-encoding process ended without its result (killed, perhaps out of memory), at image "
                    f"{start + 1} of {len(order)}: the set in --out is incomplete; remove its tar files and run "
                    "shard again with fewer --jobs"
                ) from None
