"""`ddptrain doctor`: a real 2-process collective test on this machine, and the fix printed for what is broken."""

import json
import os
import socket

import pytest

from ddptrain.tools import doctor

from ..conftest import run_cli


@pytest.mark.slow
def test_doctor_passes_here_with_report_and_bandwidth_table():
    proc = run_cli(["doctor", "--nproc", 2, "--device", "cpu"])
    out = proc.stdout
    for name in (
        "torch",
        "/dev/shm",
        "open files limit",
        "loopback IPv4",
        "2-process smoke test",
        "all_reduce sum",
        "all_gather",
        "barrier",
    ):
        assert name in out, name
    assert "| size | latency (us) | algbw (GB/s) | busbw (GB/s) |" in out
    assert "| 16 MiB |" in out and "all checks passed" in out and "FAIL" not in out


@pytest.mark.slow
def test_busy_port_fails_the_doctor_and_prints_the_fix():
    with socket.socket() as holder:
        holder.bind(("", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = run_cli(["doctor", "--nproc", 1, "--device", "cpu", "--master-port", port, "--json"], check=False)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == [f"port {port}"]
    assert "--master-port with a free port" in failed[0]["fix"]
    assert report["collectives"]["all_reduce_correct"] is True  # the rest still ran


def test_tiny_shm_and_low_open_files_limit_say_what_to_do(monkeypatch):
    class TinyShm:
        f_blocks, f_frsize = 16384, 4096  # 64 MiB, Docker's default

    monkeypatch.setattr(os, "statvfs", lambda path: TinyShm())
    shm = doctor._shm()
    assert shm.status == "fail" and "--shm-size" in shm.fix and "0.1 GiB" in shm.detail
    monkeypatch.setattr(doctor.resource, "getrlimit", lambda which: (1024, 4096))
    files = doctor._open_files()
    assert files.status == "fail" and "ulimit -n 4096" in files.fix
