"""`ddptrain bench store`: what the job's rendezvous store (one TCPStore server, rank 0's or torchrun's
agent's) takes in heartbeat writes, and what ddptrain's heartbeats ask of it.

A real `torch.distributed.TCPStore` server listens on loopback in this process; N simulated ranks are
spread over a few client processes, one thread and one store connection per rank (the connections are opened
once, for the largest N; a run with fewer ranks leaves the rest idle). For each N:

- `old`:      every rank writes its key twice per step at --step-rate (the per-step heartbeat before
              it was bounded by time): 2 x N x steps/s writes/s offered;
- `flat-out`: every rank writes as fast as it can: the most this store took here (the ceiling);
- `new`:      every rank drives a real `runtime.heartbeat.Heartbeat` at --step-rate with --interval:
              N / interval writes/s offered.

"achieved" counts writes the server has applied in the window (each `old`/`flat-out` rank writes a
counter, read back from the server at the window's start and end; `new` counts the heartbeats' writes
and checks the server then answers at once). torch's `set` does not wait for the server, so its
latency stays small until the sockets' buffers fill; the probe's round trip (a `get` from this process
every 20 ms) shows how long the server's queue is. The projection to 1,000 and 10,000 ranks is
arithmetic from the measured ceiling, not a measurement.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import random
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

DEFAULT_RANKS = (64, 128, 256, 512)
PROJECTED_RANKS = (1_000, 10_000)
WARM_UP_S = 0.5
KEY = "ddptrain/heartbeat/{rank}"  # the keys ranks write (runtime/heartbeat.py)
_LATENCY_SAMPLES = 20_000  # per client process
_CONNECTING = 64  # connections a client process opens at once
# torch's TCPStore client looks up a name for its own address (for its messages); where DNS is out of reach (a
# sandbox) some lookups wait for the resolver's timeout, 5 s by default: 1 s in the client processes, unlogged
_CLIENT_ENV = {"RES_OPTIONS": "timeout:1 attempts:1", "TORCH_CPP_LOG_LEVEL": "ERROR"}


def _store(port: int):
    import torch.distributed as tdist

    return tdist.TCPStore("127.0.0.1", port, None, False, timeout=datetime.timedelta(seconds=60))


class _TimedStore:
    """A store connection whose `set` calls are timed (seconds, appended to `latencies`)."""

    def __init__(self, store, latencies: List[float]):
        self.store, self.latencies = store, latencies

    def set(self, key: str, value: str) -> None:
        start = time.perf_counter()
        self.store.set(key, value)
        self.latencies.append(time.perf_counter() - start)

    def __getattr__(self, name: str):
        return getattr(self.store, name)


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.time()
    if delay > 0:
        time.sleep(delay)


def _writer(store: _TimedStore, key: str, mode: str, step_rate: float, start_at: float, end_at: float) -> int:
    """One simulated rank: its key holds how many writes it made (the server's count is read back)."""
    count = 0
    _sleep_until(start_at)
    while True:
        if mode == "old":  # before and after each step's update, the step spread over 1 / step_rate
            _sleep_until(start_at + count / (2 * step_rate))
        if time.time() >= end_at:
            return count
        count += 1
        store.set(key, str(count))


def _heartbeats(stores: List[_TimedStore], ranks: List[int], world: int, step_rate: float, interval: float, window):
    """Real heartbeats driven at `step_rate` from one thread; their writes at the window's start and end."""
    import torch

    from ...runtime.dist import Runtime
    from ...runtime.env import DistEnv
    from ...runtime.heartbeat import Heartbeat

    start_at, measure_at, end_at = window
    beats = [
        Heartbeat(Runtime(DistEnv(rank=r, world_size=world), torch.device("cpu"), "gloo", store=s), interval)  # type: ignore[arg-type]
        for r, s in zip(ranks, stores)
    ]
    writes_at_start, half_steps = None, 0
    _sleep_until(start_at)
    while time.time() < end_at:
        step, done = divmod(half_steps, 2)
        for heartbeat in beats:
            heartbeat.beat(step + 1, bool(done))
        if writes_at_start is None and time.time() >= measure_at:
            writes_at_start = sum(h.writes for h in beats)
        half_steps += 1
        _sleep_until(start_at + half_steps / (2 * step_rate))
    writes = sum(h.writes for h in beats) - (writes_at_start or 0)
    for heartbeat in beats:
        heartbeat.close()
    return writes


def _client_process(conn) -> None:
    """A client process: opens its ranks' connections once (for the most ranks), then runs each pattern on
    them from the start it is given and reports."""
    ranks: List[int] = []
    stores: List[Any] = []
    while True:
        task = conn.recv()
        if task is None:
            return
        if task["op"] == "connect":
            ranks = task["ranks"]
            with ThreadPoolExecutor(_CONNECTING) as pool:  # a slow connection does not hold up the others
                stores = [future.result() for future in [pool.submit(_store, task["port"]) for _ in ranks]]
            conn.send("connected")
        elif task["op"] == "run":
            conn.send(_client_task(task, ranks, stores, conn))


def _client_task(task: Dict, held: List[int], connections: List[Any], conn) -> Dict:
    """One pattern with this process's ranks below task["world"] (its other connections stay idle)."""
    ranks = [rank for rank in held if rank < task["world"]]
    latencies: List[List[float]] = [[] for _ in ranks]
    stores = [_TimedStore(store, lat) for store, lat in zip(connections, latencies)]
    for rank, store in zip(ranks, stores):
        store.store.set(KEY.format(rank=rank), "0")
    conn.send("ready")
    start_at, measure_at, end_at = conn.recv()
    if task["mode"] == "new":
        window = (start_at, measure_at, end_at)
        sent = _heartbeats(stores, ranks, task["world"], task["step_rate"], task["interval"], window)
    else:
        counts = [0] * len(ranks)
        threads = [
            threading.Thread(
                target=_count_writes,
                args=(counts, i, stores[i], KEY.format(rank=rank), task["mode"], task["step_rate"], start_at, end_at),
            )
            for i, rank in enumerate(ranks)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        sent = sum(counts)
    for rank, store in zip(ranks, stores):  # a round trip: every write of this connection is applied
        store.store.get(KEY.format(rank=rank))
    flushed_at = time.time()
    merged = [x for lat in latencies for x in lat]
    sample = random.Random(0).sample(merged, min(len(merged), _LATENCY_SAMPLES))
    return {"sent": sent, "latencies": sample, "flushed_at": flushed_at}


def _count_writes(counts: List[int], i: int, *args) -> None:
    counts[i] = _writer(*args)


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _cpu_s() -> float:
    """CPU seconds of this process's threads other than the main one: the store server's (libuv) thread, not
    the probe's. Where /proc is missing, the whole process."""
    main = threading.main_thread().native_id
    tasks = "/proc/self/task"
    if not os.path.isdir(tasks):
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    ticks = 0
    for tid in os.listdir(tasks):
        if int(tid) == main:
            continue
        try:
            with open(f"{tasks}/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _server_count(probe, world: int) -> Tuple[float, int]:
    """(when, the sum of every rank's counter as the server holds it): one request for all keys."""
    before = time.time()
    values = probe.multi_get([KEY.format(rank=r) for r in range(world)])
    return (before + time.time()) / 2, sum(int(v) for v in values)


def _one_run(probe, pipes, world: int, mode: str, seconds: float, step_rate: float, interval: float) -> Dict:
    for pipe in pipes:
        pipe.send({"op": "run", "mode": mode, "world": world, "step_rate": step_rate, "interval": interval})
    for pipe in pipes:
        pipe.recv()  # every key written once
    start_at = time.time() + 0.2
    measure_at, end_at = start_at + WARM_UP_S, start_at + WARM_UP_S + seconds
    for pipe in pipes:
        pipe.send((start_at, measure_at, end_at))
    _sleep_until(measure_at)
    cpu_start = _cpu_s()
    counted = mode != "new"
    first_count = _server_count(probe, world) if counted else (time.time(), 0)
    round_trips = []
    while time.time() < end_at - 0.05:
        began = time.perf_counter()
        probe.get(KEY.format(rank=0))
        round_trips.append(time.perf_counter() - began)
        time.sleep(0.02)
    last_count = _server_count(probe, world) if counted else (time.time(), 0)
    cpu_s = _cpu_s() - cpu_start
    reports = [pipe.recv() for pipe in pipes]
    window_s = last_count[0] - first_count[0]
    sent = sum(r["sent"] for r in reports)
    achieved = (last_count[1] - first_count[1]) / window_s if counted else sent / seconds
    offered = {"old": 2 * step_rate * world, "new": world / interval, "flat-out": None}[mode]
    backlog_s = max(0.0, max(r["flushed_at"] for r in reports) - end_at)
    latencies = [x for r in reports for x in r["latencies"]]
    short = mode == "new" and seconds < 2 * interval  # too few intervals in the window to count them
    behind = offered is not None and not short and achieved < 0.9 * offered
    saturated = "ceiling" if offered is None else ("yes" if behind or backlog_s > 0.5 else "no")
    return {
        "ranks": world,
        "pattern": mode,
        "offered writes/s": offered,
        "achieved writes/s": achieved,
        "set p50 us": _percentile(latencies, 0.5) * 1e6,
        "set p99 us": _percentile(latencies, 0.99) * 1e6,
        "probe p50 ms": _percentile(round_trips, 0.5) * 1e3,
        "probe p99 ms": _percentile(round_trips, 0.99) * 1e3,
        "server CPU %": 100.0 * cpu_s / window_s if window_s > 0 else float("nan"),
        # blank where the server's CPU time is within a few clock ticks
        "server us/write": 1e6 * cpu_s / (achieved * window_s) if achieved > 0 and cpu_s >= 0.05 else None,
        "backlog s": backlog_s,
        "saturated": saturated,
    }


def projection(ceiling: float, us_per_write: Optional[float], step_rate: float, interval: float) -> List[Dict]:
    """Writes/s the old (2 x ranks x steps/s) and new (ranks / interval) designs put on one store, against
    the measured ceiling and the server's measured CPU time per write (one core is all its loop uses)."""
    rows = []
    for ranks in PROJECTED_RANKS:
        for design, load in (
            ("old: 2 writes per step", 2 * ranks * step_rate),
            ("new: 1 per interval", ranks / interval),
        ):
            core = load * us_per_write / 1e6 if us_per_write else 0.0
            fits = "yes" if load < 0.5 * ceiling and core < 0.5 else "at the limit"
            rows.append(
                {
                    "ranks": ranks,
                    "design": design,
                    "writes/s": load,
                    "share of measured ceiling": f"{load / ceiling:.1%}" if ceiling > 0 else "?",
                    "server core": f"{core:.1%}" if us_per_write else "?",
                    "fits": "no" if load > ceiling or core > 1 else fits,
                }
            )
    return rows


def store_bench(
    ranks: Sequence[int],
    seconds: float,
    step_rate: float,
    interval: float,
    clients: int,
    say: Optional[Callable[[str], None]] = None,
) -> Tuple[Dict[str, Any], List[Dict], List[Dict]]:
    import torch.distributed as tdist

    from ...runtime.heartbeat import MAX_INTERVAL_S

    load_before = os.getloadavg()
    server = tdist.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False)
    pipes, processes = _start_clients(max(1, min(clients, min(ranks))))
    try:
        rows = _measure(server.port, pipes, ranks, seconds, step_rate, interval, say)
    finally:
        for pipe in pipes:
            pipe.send(None)
        for process in processes:
            process.join(timeout=30)
    ceiling = max(r["achieved writes/s"] for r in rows if r["pattern"] == "flat-out")
    paced = [r for r in rows if r["pattern"] == "old" and r["ranks"] == max(ranks)][0]  # one write per wake-up
    result = {
        "ranks": list(ranks),
        "seconds": seconds,
        "step_rate": step_rate,
        "interval_s": interval,
        "client_processes": len(pipes),
        "cpus": os.cpu_count(),
        "store_backend": "libuv" if getattr(server, "libuvBackend", False) else "classic",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "ceiling_writes_per_s": ceiling,
        "server_us_per_write": paced["server us/write"],
        "projection_interval_s": MAX_INTERVAL_S,
        "projection_note": (
            "arithmetic from measured figures, not a measurement: old = 2 x ranks x steps/s, new = ranks / interval; "
            "server core = writes/s x the server's CPU time per write in the old pattern at the most ranks"
        ),
        "projection": projection(ceiling, paced["server us/write"], step_rate, MAX_INTERVAL_S),
    }
    return result, rows, result["projection"]


def _start_clients(count: int) -> Tuple[List[Any], List[Any]]:
    """`count` client processes (spawned, with the client environment), each with a pipe to drive it."""
    context = mp.get_context("spawn")
    pipes, processes = [], []
    saved = {name: os.environ.get(name) for name in _CLIENT_ENV}
    os.environ.update({name: saved[name] or value for name, value in _CLIENT_ENV.items()})  # the clients' only
    try:
        for _ in range(count):
            mine, theirs = context.Pipe()
            process = context.Process(target=_client_process, args=(theirs,), daemon=True)
            process.start()
            pipes.append(mine)
            processes.append(process)
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
    return pipes, processes


def _measure(port, pipes, ranks, seconds, step_rate, interval, say) -> List[Dict]:
    """Every pattern at every rank count: the clients open connections for the most ranks once, then each run."""
    rows: List[Dict] = []
    probe = _store(port)
    for i, pipe in enumerate(pipes):
        pipe.send({"op": "connect", "port": port, "ranks": list(range(i, max(ranks), len(pipes)))})
    for pipe in pipes:
        pipe.recv()
    for world in ranks:
        for mode in ("old", "flat-out", "new"):
            row = _one_run(probe, pipes, world, mode, seconds, step_rate, interval)
            rows.append(row)
            if say:
                say(f"{world} ranks, {mode}: {row['achieved writes/s']:.0f} writes/s")
    return rows
