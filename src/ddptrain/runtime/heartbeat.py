"""Hangs become errors: heartbeats in the job's store name the rank that stopped.

Every rank keeps the optimizer step it is in (a number in memory, set twice per step) and publishes it
to the rendezvous store under a key of its own, bounded by time rather than by steps: at once on the
first step, then at most once every `interval_s(--dist-timeout)` seconds from a background thread, and
only when it changed. The store is one process (rank 0's, or torchrun's agent's) that every rank talks
to: with one write per step per rank it would take 2 x ranks x steps/s writes (20,000/s at 1,000 ranks
and 10 steps/s); this way it takes at most ranks / interval (200/s at 1,000 ranks). `ddptrain bench
store` measures both; docs/multinode.md has the figures.

When a collective times out or a peer's connection drops, each rank still alive publishes its exact
progress at once, waits up to `FLUSH_GRACE_S` for the others' keys to catch up with its own, then names
the ranks still behind. A rank that is alive but stuck (a deadlock, slow storage, a debugger) has had
its exact step published by its thread long before: a peer's collective waits --dist-timeout, at
least ten intervals. A rank that died may have got up to one interval further than its key says.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import time
from typing import Dict, Iterable, Iterator, List, Optional

from ..errors import PeerFailureError
from ..util import first_line, ranks_named
from .dist import Runtime

_KEY = "ddptrain/heartbeat/{rank}"
_PEER_FAILURE_WORDS = ("timed out", "timeout", "connection", "peer", "broken pipe", "closed")

MAX_INTERVAL_S = 5.0  # 1,000 ranks: 200 writes/s at most; 10,000: 2,000/s
INTERVALS_PER_TIMEOUT = 10  # a stuck rank's exact step is in the store long before its peers time out
MIN_INTERVAL_S = 0.05
FLUSH_GRACE_S = 1.0  # on a failure, how long to wait for the other ranks' keys to catch up
_POLL_S = 0.1
_STORE_TIMEOUT_S = 5.0


def interval_s(dist_timeout_s: Optional[float]) -> float:
    """Seconds between two writes of a rank's key: min(5 s, --dist-timeout / 10).

    A peer of a stuck rank fails after --dist-timeout; by then the stuck rank's thread has published the
    step it is stuck in (an interval at most after it got there), with nine intervals to spare. The cap
    keeps the load on the store at ranks / 5 s whatever the timeout."""
    if dist_timeout_s is None:
        return MAX_INTERVAL_S
    return max(MIN_INTERVAL_S, min(MAX_INTERVAL_S, dist_timeout_s / INTERVALS_PER_TIMEOUT))


class Heartbeat:
    """This rank's progress (2 x step + done) in memory, published to the job's store bounded by time.

    `beat` costs an assignment; the first one writes at once and starts the publishing thread, which
    writes the latest value when it changed and the previous write is `interval_s` old. `flush` writes
    at once (a collective failed). One per Runtime: `Heartbeat.of(rt)`."""

    def __init__(self, rt: Runtime, interval: Optional[float] = None):
        self.rt = rt
        self.interval_s = interval_s(rt.steady_timeout_s) if interval is None else interval
        self.enabled = rt.store is not None and rt.world_size > 1
        self.writes = 0  # store writes made so far (tests, `bench store`)
        self._key = _KEY.format(rank=rt.rank)
        self._progress: Optional[int] = None
        self._written: Optional[int] = None
        self._written_at = 0.0
        self._lock = threading.Lock()  # one write at a time, so the key never goes backwards
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @classmethod
    def of(cls, rt: Runtime) -> Heartbeat:
        """The runtime's heartbeat, made on first use: the step loop beats it, a failure flushes it."""
        heartbeat = rt.heartbeat
        if not isinstance(heartbeat, Heartbeat):
            heartbeat = rt.heartbeat = cls(rt)
        return heartbeat

    def beat(self, step: int, done: bool = False) -> None:
        """This rank started (or finished the update of) 1-based optimizer step `step`."""
        self._progress = 2 * step + int(done)
        if self._thread is None and self.enabled:
            self.flush()  # the first step is published at once
            self._thread = threading.Thread(target=self._publish_loop, name="ddptrain-heartbeat", daemon=True)
            self._thread.start()

    def flush(self) -> None:
        """Write the current progress now, whenever the last write was (a collective failed)."""
        if self.enabled:
            with self._lock:
                self._write()

    def close(self) -> None:
        """Stop the publishing thread (the run is over); no further writes."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=_STORE_TIMEOUT_S)

    def _write(self) -> None:
        progress, store = self._progress, self.rt.store
        if progress is None or progress == self._written or store is None:
            return
        store.set(self._key, str(progress))
        self._written, self._written_at = progress, time.monotonic()
        self.writes += 1

    def _publish_loop(self) -> None:
        wait = self.interval_s
        while not self._stop.wait(wait):
            with self._lock:
                wait = self._written_at + self.interval_s - time.monotonic()
                if wait > 0:  # a flush wrote meanwhile: at most one write per interval
                    continue
                wait = self.interval_s
                try:
                    self._write()
                except Exception:  # the store is gone: the job is ending, its peers will say why
                    return

    def progress(self, ranks: Optional[Iterable[int]] = None) -> Dict[int, Optional[int]]:
        """Every rank's (or these ranks') last published progress; None where a rank never wrote one."""
        store = self.rt.store
        if store is None:
            return {}
        store.set_timeout(datetime.timedelta(seconds=_STORE_TIMEOUT_S))
        wanted = list(range(self.rt.world_size) if ranks is None else ranks)
        keys = [_KEY.format(rank=rank) for rank in wanted]
        try:
            if store.check(keys):  # one request for all keys when every rank wrote one
                return {rank: int(value) for rank, value in zip(wanted, store.multi_get(keys))}
        except Exception:  # a store without check/multi_get: one key at a time
            pass
        steps: Dict[int, Optional[int]] = {}
        for rank, key in zip(wanted, keys):
            try:
                steps[rank] = int(store.get(key)) if store.check([key]) else None
            except Exception:  # the store is gone
                steps[rank] = None
        return steps

    def settled_progress(self, grace_s: float = FLUSH_GRACE_S) -> Dict[int, Optional[int]]:
        """After a failure: publish this rank's exact progress, then read everyone's, re-reading the ranks
        behind for up to `grace_s` while their own flush or thread catches them up."""
        self.flush()
        progress = self.progress()
        deadline = time.monotonic() + grace_s
        while True:
            behind = _behind(progress, self.rt.rank)
            if not behind or time.monotonic() >= deadline:
                return progress
            time.sleep(_POLL_S)
            progress.update(self.progress(behind))


def close_heartbeat(rt: Runtime) -> None:
    """The run is over on this rank: stop publishing (before the process group and its store go)."""
    if isinstance(rt.heartbeat, Heartbeat):
        rt.heartbeat.close()


@contextlib.contextmanager
def naming_stalled_peers(rt: Runtime, epoch: int) -> Iterator[None]:
    """Turn a collective that failed because a peer stalled or died (in training, evaluation, a
    checkpoint barrier) into an error that names that rank and how far it got."""
    try:
        yield
    except RuntimeError as error:
        if rt.world_size > 1 and is_peer_failure(error):
            raise describe(Heartbeat.of(rt), error, epoch) from error
        raise


def _where(progress: Optional[int]) -> str:
    if progress is None:
        return "no step at all"
    step, done = divmod(progress, 2)
    return f"step {step} ({'after' if done else 'before'} its optimizer update)"


def _behind(progress: Dict[int, Optional[int]], me: int) -> List[int]:
    known = [p for p in progress.values() if p is not None]
    ahead = max(known) if known else None
    return sorted(r for r, p in progress.items() if r != me and (p is None or (ahead is not None and p < ahead)))


def is_peer_failure(error: BaseException) -> bool:
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(word in text for word in _PEER_FAILURE_WORDS)


def describe(heartbeat: Heartbeat, error: BaseException, epoch: int) -> PeerFailureError:
    rt = heartbeat.rt
    try:
        progress = heartbeat.settled_progress()
    except Exception:  # the store itself is unreachable: say what we know
        progress = {}
    behind = _behind(progress, rt.rank)
    who = (
        f"{ranks_named(behind)} stopped at {', '.join(_where(progress[r]) for r in behind)} "
        f"while rank {rt.rank} reached {_where(progress.get(rt.rank))}"
        if behind
        else "a peer rank did not join the collective"
    )
    cause = first_line(error, 200)
    lag = heartbeat.interval_s
    return PeerFailureError(
        f"a collective failed in epoch {epoch + 1} ({cause}): {who}. That rank is stalled "
        "(deadlock, slow storage, a debugger) or died — see its own output (ranks publish their step within "
        f"{lag:g} s of reaching it, so one that died may have run up to {lag:g} s beyond it). If its steps "
        f"legitimately take longer, raise --dist-timeout (now {rt.steady_timeout_s:g} s); resume with --resume auto.",
        rank=rt.rank,
    )
