"""Hangs become errors: heartbeats in the job's store name the rank that stopped.

Every rank records the optimizer step it is starting in the rendezvous store (a key per rank,
one small write per step). When a collective times out or a peer's connection drops, the ranks
still alive read those keys and report who fell behind, instead of a bare gloo/NCCL timeout.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Dict, Iterator, Optional

from ..errors import PeerFailureError
from .dist import Runtime

_KEY = "ddptrain/heartbeat/{rank}"
_PEER_FAILURE_WORDS = ("timed out", "timeout", "connection", "peer", "broken pipe", "closed")


class Heartbeat:
    def __init__(self, rt: Runtime):
        self.rt = rt

    def beat(self, step: int, done: bool = False) -> None:
        """Record that this rank started (or finished the update of) 1-based optimizer step `step`."""
        if self.rt.store is not None and self.rt.world_size > 1:
            self.rt.store.set(_KEY.format(rank=self.rt.rank), str(2 * step + int(done)))

    def progress(self) -> Dict[int, Optional[int]]:
        store = self.rt.store
        if store is None:
            return {}
        store.set_timeout(datetime.timedelta(seconds=5))
        steps: Dict[int, Optional[int]] = {}
        for rank in range(self.rt.world_size):
            try:
                steps[rank] = int(store.get(_KEY.format(rank=rank)))
            except Exception:  # the key was never written, or the store is gone
                steps[rank] = None
        return steps


@contextlib.contextmanager
def naming_stalled_peers(rt: Runtime, epoch: int) -> Iterator[None]:
    """Turn a collective that failed because a peer stalled or died (in training, evaluation, a
    checkpoint barrier) into an error that names that rank and how far it got."""
    try:
        yield
    except RuntimeError as error:
        if rt.world_size > 1 and is_peer_failure(error):
            raise describe(Heartbeat(rt), error, epoch) from error
        raise


def _where(progress: Optional[int]) -> str:
    if progress is None:
        return "no step at all"
    step, done = divmod(progress, 2)
    return f"step {step} ({'after' if done else 'before'} its optimizer update)"


def is_peer_failure(error: BaseException) -> bool:
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(word in text for word in _PEER_FAILURE_WORDS)


def describe(heartbeat: Heartbeat, error: BaseException, epoch: int) -> PeerFailureError:
    rt = heartbeat.rt
    try:
        progress = heartbeat.progress()
    except Exception:  # the store itself is unreachable: say what we know
        progress = {}
    known = [p for p in progress.values() if p is not None]
    ahead = max(known) if known else None
    behind = sorted(r for r, p in progress.items() if r != rt.rank and (p is None or (ahead is not None and p < ahead)))
    who = (
        f"rank(s) {', '.join(map(str, behind))} stopped at {', '.join(_where(progress[r]) for r in behind)} "
        f"while rank {rt.rank} reached {_where(progress.get(rt.rank))}"
        if behind
        else "a peer rank did not join the collective"
    )
    first_line = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
    return PeerFailureError(
        f"a collective failed in epoch {epoch + 1} ({first_line}): {who}. That rank is stalled "
        "(deadlock, slow storage, a debugger) or died — see its own output. If its steps legitimately take "
        f"longer, raise --dist-timeout (now {rt.steady_timeout_s:g} s); resume with --resume auto.",
        rank=rt.rank,
    )
