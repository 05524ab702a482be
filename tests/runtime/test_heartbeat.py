"""Heartbeats reach the job's store bounded by time, not by steps, and a stalled rank is still named."""

from __future__ import annotations

import datetime
import threading
import time

import pytest
import torch
import torch.distributed as tdist

from ddptrain.errors import PeerFailureError
from ddptrain.runtime import dist
from ddptrain.runtime.dist import Runtime
from ddptrain.runtime.env import DistEnv
from ddptrain.runtime.heartbeat import Heartbeat, describe, interval_s, naming_stalled_peers

from ..dist_harness import run_ranks


class CountingStore:
    """A real TCPStore client whose writes are counted."""

    def __init__(self, store: tdist.TCPStore):
        self.store, self.sets = store, 0

    def set(self, key, value):
        self.sets += 1
        self.store.set(key, value)

    def __getattr__(self, name):
        return getattr(self.store, name)


@pytest.fixture
def server():
    store = tdist.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=10), wait_for_workers=False)
    yield store


def runtime(server, rank=0, world_size=2, timeout_s=600.0):
    client = tdist.TCPStore("127.0.0.1", server.port, None, False, timeout=datetime.timedelta(seconds=10))
    env = DistEnv(rank=rank, world_size=world_size, launcher="test")
    return Runtime(env, torch.device("cpu"), "gloo", store=CountingStore(client), steady_timeout_s=timeout_s)


def test_the_interval_is_a_tenth_of_the_timeout_capped_at_five_seconds():
    assert interval_s(600) == 5.0
    assert interval_s(8) == pytest.approx(0.8)
    assert interval_s(None) == 5.0
    assert interval_s(0.01) == 0.05


def test_heartbeat_writes_are_bounded_by_time_not_by_steps(server):
    rt = runtime(server)
    heartbeat = Heartbeat(rt, interval=0.2)
    start, step = time.monotonic(), 0
    while time.monotonic() - start < 0.5 or step < 1000:  # at least 1,000 steps, two beats each
        step += 1
        heartbeat.beat(step)
        heartbeat.beat(step, done=True)
    elapsed = time.monotonic() - start
    assert server.get("ddptrain/heartbeat/0") in {str(2 * s + d).encode() for s in range(1, step + 1) for d in (0, 1)}
    time.sleep(0.45)  # the thread publishes the last step within an interval
    assert server.get("ddptrain/heartbeat/0") == str(2 * step + 1).encode()
    heartbeat.close()
    # one write for the first step, then one per 0.2 s at most (plus the one after the loop)
    assert rt.store.sets == heartbeat.writes <= 2 + elapsed / 0.2 + 1, (rt.store.sets, elapsed, step)
    heartbeat.beat(step + 1)
    heartbeat.flush()  # a failure: written at once, whatever the interval
    assert server.get("ddptrain/heartbeat/0") == str(2 * (step + 1)).encode()


def test_a_lagging_key_is_described_with_the_exact_steps_once_flushed(server):
    """Rank 1's thread has not published its last steps yet (a long interval), but it flushes within the grace:
    rank 0 names nobody. A rank that never catches up is named with the step its key holds."""
    rt0, rt1 = runtime(server, 0), runtime(server, 1)
    hb0, hb1 = Heartbeat(rt0, interval=60), Heartbeat(rt1, interval=60)
    hb0.beat(1), hb1.beat(1)
    hb0.beat(7), hb1.beat(7)  # neither written: the interval has not passed
    flushed = []

    def late_flush():  # rank 1's own failure handling runs a little later
        time.sleep(0.3)
        hb1.flush()
        flushed.append(True)

    threading.Thread(target=late_flush).start()
    error = describe(hb0, RuntimeError("Connection closed by peer"), 0)
    assert flushed and "did not join the collective" in str(error)
    hb0.close()

    hb1.beat(8)  # rank 1 moves on, unpublished; in a world of 3, rank 0 reaches step 8 and rank 2 never wrote
    hb0 = Heartbeat(runtime(server, 0, world_size=3), interval=60)
    hb0.beat(8)
    start = time.monotonic()
    error = describe(hb0, RuntimeError("Timed out waiting"), 1)
    assert time.monotonic() - start < 2.5  # the grace is bounded
    assert "ranks 1, 2 stopped at step 7 (before its optimizer update), no step at all while rank 0 reached step 8" in (
        str(error)
    )
    hb0.close(), hb1.close()
    hb0.close(), hb1.close()


def _fast_steps_then_rank1_stalls(rt: Runtime, stall_at: int):
    """Steps of one all-reduce each, as fast as the wire allows; rank 1 sleeps inside step `stall_at`'s update."""
    rt.steady_timeout_s = 3.0
    heartbeat = Heartbeat.of(rt)
    tensor = torch.ones(1)
    step = 0
    try:
        with naming_stalled_peers(rt, 0):
            for step in range(1, 10_000):
                heartbeat.beat(step)
                dist.all_reduce_sum(tensor)
                if step == 1:
                    rt.use_steady_timeout()
                if rt.rank == 1 and step == stall_at:
                    time.sleep(9)  # stuck in the optimizer update; its peers time out after 3 s
                    return {"steps": step, "writes": heartbeat.writes, "message": ""}
                heartbeat.beat(step, done=True)
    except PeerFailureError as error:
        return {"steps": step, "writes": heartbeat.writes, "message": str(error)}
    finally:
        heartbeat.close()
    return {"steps": step, "writes": heartbeat.writes, "message": "no failure"}


@pytest.mark.slow
def test_a_stalled_rank_is_named_when_steps_are_fast():
    rank0, rank1 = run_ranks(_fast_steps_then_rank1_stalls, 2, 300)
    assert rank0["steps"] == 301 and rank1["steps"] == 300
    assert (
        "rank 1 stopped at step 300 (before its optimizer update) while rank 0 reached step 301 "
        "(before its optimizer update)" in rank0["message"]
    ), rank0["message"]
    # 600 beats each; interval 0.3 s: the first step, then a few publications over the stall's 3 s
    assert rank0["writes"] <= 20 and rank1["writes"] <= 20, (rank0["writes"], rank1["writes"])
