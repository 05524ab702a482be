"""Two network hosts for real: two network namespaces joined by a veth pair with private addresses, one
ddptrain agent in each, rendezvous and gloo traffic over the veth (`--iface`). Then one host dies
mid-epoch and the other fails with an error naming the lost rank. Needs root and `ip netns`
(iproute2); skipped with the reason otherwise. Everything stays inside the namespaces, which are
removed (with every process in them) even when a test fails."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Iterator, List, Optional

import pytest

from ..conftest import CLI_TIMEOUT_S, read_metrics, started

TRAIN = [
    "--model",
    "timm:test_resnet",
    "--img-size",
    32,
    "--batch-size",
    2,
    "--workers",
    0,
    "--val-split",
    0.25,
    "--seed",
    5,
    "--nproc",
    1,
    "--nnodes",
    2,
]


def _unavailable() -> Optional[str]:
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"ddptprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` is not allowed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


REASON = _unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no two-host test: {REASON}")


@dataclass
class Host:
    netns: str
    iface: str
    address: str

    def command(self, *args) -> List[str]:
        return ["ip", "netns", "exec", self.netns, *map(str, args)]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _kill_all_in(netns: str) -> None:
    pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


@contextlib.contextmanager
def two_hosts() -> Iterator[List[Host]]:
    tag = f"{os.getpid() % 100000}"
    subnet = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"
    hosts = [Host(f"ddpt{tag}a", f"dv{tag}a", f"{subnet}.1"), Host(f"ddpt{tag}b", f"dv{tag}b", f"{subnet}.2")]
    try:
        for host in hosts:
            _ip("netns", "add", host.netns)
        _ip("link", "add", hosts[0].iface, "type", "veth", "peer", "name", hosts[1].iface)
        for host in hosts:
            _ip("link", "set", host.iface, "netns", host.netns)
            _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", host.iface)
            _ip("-n", host.netns, "link", "set", host.iface, "up")
            _ip("-n", host.netns, "link", "set", "lo", "up")
        yield hosts
    finally:
        for host in hosts:
            _kill_all_in(host.netns)
            subprocess.run(["ip", "netns", "del", host.netns], capture_output=True)


def _agent(host: Host, node_rank: int, master: Host, port: int, data, run_dir, *extra) -> List:
    return host.command(
        sys.executable,
        "-m",
        "ddptrain",
        "train",
        "--data",
        data,
        "--out",
        run_dir,
        *TRAIN,
        "--node-rank",
        node_rank,
        "--master-addr",
        master.address,
        "--master-port",
        port,
        "--iface",
        host.iface,
        *extra,
    )


def test_two_hosts_train_as_one_job_over_the_veth(tiny_shapes, tmp_path):
    run_dir = tmp_path / "run"
    with two_hosts() as (a, b):
        with (
            started(_agent(a, 0, a, 29511, tiny_shapes, run_dir, "--epochs", 2)) as node0,
            started(_agent(b, 1, a, 29511, tiny_shapes, run_dir, "--epochs", 2)) as node1,
        ):
            outputs = [agent.communicate(timeout=CLI_TIMEOUT_S)[0] for agent in (node0, node1)]
        assert [node0.returncode, node1.returncode] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    metrics = read_metrics(run_dir)
    assert [m["epoch"] for m in metrics] == [0, 1] and {m["world_size"] for m in metrics} == {2}
    assert len(list(run_dir.glob("checkpoints/*.pt"))) >= 1


def test_a_host_lost_mid_run_fails_the_other_with_the_rank_named(tiny_shapes, tmp_path):
    """Static rendezvous cannot replace a lost node: the survivor stops at once, naming the rank it lost
    (documented in docs/multinode.md; elastic --nnodes MIN:MAX is the way to carry on)."""
    run_dir = tmp_path / "run"
    with two_hosts() as (a, b):
        with (
            started(_agent(a, 0, a, 29512, tiny_shapes, run_dir, "--epochs", 6)) as node0,
            started(_agent(b, 1, a, 29512, tiny_shapes, run_dir, "--epochs", 6)) as node1,
        ):
            deadline = time.monotonic() + CLI_TIMEOUT_S
            metrics = run_dir / "metrics.jsonl"
            while not (metrics.is_file() and metrics.read_text().strip()):
                assert time.monotonic() < deadline and node0.poll() is None, "the job never finished an epoch"
                time.sleep(0.2)
            _kill_all_in(b.netns)  # host b is gone: its agent and its worker
            lost_at = time.monotonic()
            output, _ = node0.communicate(timeout=120)
            node1.communicate(timeout=30)
        failed_after_s = time.monotonic() - lost_at
    assert node0.returncode != 0
    assert "rank 1 stopped at" in output or "did not join the collective" in output, output[-3000:]
    assert failed_after_s < 60
    print(f"survivor failed {failed_after_s:.1f} s after the other host was killed")
