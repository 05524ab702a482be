"""Remote shards fetched before they are needed: while a rank reads one shard, a thread of its main process downloads
the next few of its epoch order into the node's shard cache (at most `ahead` beyond the one being read), so a shard
boundary does not wait for a download. The loader's workers then find the shard cached; a shard still arriving is
waited for through the cache's lock, never downloaded twice. A failed prefetch is left to the worker that needs
the shard, which retries and reports it as any download.

The rank's position is the shard of the last index its sampler handed to the loader (the loader asks a few batches
ahead of training, so that is the shard being read).
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable, Iterator, List, Optional, Set, TypeVar

log = logging.getLogger("ddptrain")
T = TypeVar("T")


class Prefetcher:
    """Downloads a ShardSamples part's shards ahead of a sampler's order (see module doc)."""

    def __init__(self, samples, ahead: int):
        self.samples, self.ahead = samples, ahead
        self.plan: List[int] = []  # the shards of the epoch, in the order this rank reads them
        self.position = 0  # index in `plan` of the shard being read
        self.generation = 0  # a new epoch's plan stops the previous epoch's downloads
        self.changed = threading.Condition()
        self.thread: Optional[threading.Thread] = None
        self.fetched = 0

    def follow(self, items: Iterable[T], indices: List[int]) -> Iterator[T]:
        """`items` as they are, the shard of `indices[i]` marked as being read when item i is handed out."""
        shard_of = self.samples.shard
        plan: List[int] = []
        step_of: List[int] = []  # for each index, its shard's place in the plan
        for index in indices:
            shard = int(shard_of[index])
            if not plan or plan[-1] != shard:
                plan.append(shard)
            step_of.append(len(plan) - 1)
        with self.changed:
            self.plan, self.position, self.generation = plan, 0, self.generation + 1
            self.changed.notify_all()
        self._start()
        for i, item in enumerate(items):
            if step_of[i] != self.position:
                with self.changed:
                    self.position = step_of[i]
                    self.changed.notify_all()
            yield item

    def _start(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._run, name="ddptrain-prefetch", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        done: Set[int] = set()
        seen_generation = -1
        while True:
            with self.changed:
                if self.generation != seen_generation:
                    seen_generation, done = self.generation, set()
                target = self._next(done)
                while target is None:
                    self.changed.wait()
                    if self.generation != seen_generation:
                        seen_generation, done = self.generation, set()
                    target = self._next(done)
            done.add(target)
            try:
                self.samples.fetch_shard(target)
                self.fetched += 1
            except Exception as error:  # noqa: BLE001 (the worker that needs it downloads and reports it)
                log.debug("prefetch of shard %d failed (%s); the loader will fetch it", target, error)

    def _next(self, done) -> Optional[int]:
        """The first shard of the plan within `ahead` beyond the current one not yet fetched this epoch."""
        end = min(len(self.plan), self.position + 1 + self.ahead)
        for step in range(self.position, end):
            if self.plan[step] not in done:
                return self.plan[step]
        return None
