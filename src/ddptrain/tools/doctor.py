"""`ddptrain doctor`: what this machine has, and a real N-process collective test through the same
runtime `train` uses. Every failed check says how to fix it; the exit code is 0 only when all pass.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional

import torch

from ..config import LaunchConfig
from ..errors import DdptrainError
from ..runtime import dist
from ..runtime.env import DistEnv, available_cpus
from ..runtime.launch import launch
from ..util import counted

RESULT_ENV = "DDPTRAIN_DOCTOR_RESULT"
MIN_SHM_BYTES = 1 << 30  # DataLoader workers pass every batch through /dev/shm
MIN_OPEN_FILES = 4096  # workers x prefetched batches x shared-memory file descriptors
DEFAULT_PORT = 29500  # torchrun's default MASTER_PORT
CPU_SIZES = [4, 64 << 10, 1 << 20, 16 << 20]
CUDA_SIZES = CPU_SIZES + [256 << 20]


@dataclass
class Check:
    name: str
    status: str  # ok | fail | info
    detail: str
    fix: str = ""


@dataclass
class DoctorOptions:
    nproc: int
    device: str
    master_port: int
    timeout_s: float
    as_json: bool


# ---- environment ----------------------------------------------------------------------------------
def _versions() -> List[Check]:
    checks = [Check("python", "info", platform.python_version()), Check("torch", "info", torch.__version__)]
    for name in ("torchvision", "timm"):
        try:
            module = __import__(name)
            checks.append(Check(name, "ok", module.__version__))
        except ImportError as error:
            checks.append(Check(name, "fail", f"not importable ({error})", f"pip install {name}"))
    return checks


def _cuda(device: str) -> List[Check]:
    if not torch.cuda.is_available():
        status = "fail" if device == "cuda" else "info"
        return [
            Check(
                "cuda",
                status,
                f"not available (torch built for CUDA {torch.version.cuda})",
                "install an NVIDIA driver matching this torch build, or run with --device cpu"
                if status == "fail"
                else "",
            )
        ]
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else "n/a"
    checks = [Check("cuda", "ok", f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, NCCL {nccl}")]
    count = torch.cuda.device_count()
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        checks.append(
            Check(
                f"gpu {index}",
                "info",
                f"{props.name}, {props.total_memory / 2**30:.0f} GiB, compute capability {props.major}.{props.minor}",
            )
        )
    if count > 1:
        missing = [
            f"{a}->{b}"
            for a in range(count)
            for b in range(count)
            if a != b and not torch.cuda.can_device_access_peer(a, b)
        ]
        checks.append(
            Check(
                "gpu peer access",
                "info",
                "all pairs"
                if not missing
                else f"no direct access for {', '.join(missing)} (NCCL goes through host memory)",
            )
        )
    return checks


def _shm() -> Check:
    try:
        stats = os.statvfs("/dev/shm")
    except OSError:
        return Check("/dev/shm", "info", "not present (not Linux?)")
    size = stats.f_blocks * stats.f_frsize
    detail = f"{size / 2**30:.1f} GiB"
    if size < MIN_SHM_BYTES:
        return Check(
            "/dev/shm",
            "fail",
            detail + " (DataLoader workers fail with 'bus error' or hang)",
            "give the container more shared memory: docker run --shm-size=8g (or --ipc=host); "
            "Kubernetes: mount an emptyDir with medium: Memory at /dev/shm; or use --workers 0",
        )
    return Check("/dev/shm", "ok", detail)


def _open_files() -> Check:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    detail = f"soft {soft}, hard {hard}"
    if soft != resource.RLIM_INFINITY and soft < MIN_OPEN_FILES:
        return Check(
            "open files limit",
            "fail",
            detail + " ('Too many open files' with DataLoader workers)",
            f"raise it before starting: ulimit -n {max(MIN_OPEN_FILES, min(hard, 65536))}",
        )
    return Check("open files limit", "ok", detail)


def _loopback(family: int, address: str) -> bool:
    try:
        with socket.socket(family, socket.SOCK_STREAM) as server:
            server.bind((address, 0))
            server.listen(1)
            with socket.create_connection(server.getsockname()[:2], timeout=2):
                pass
        return True
    except OSError:
        return False


def _network(port: int) -> List[Check]:
    checks = []
    if _loopback(socket.AF_INET, "127.0.0.1"):
        checks.append(Check("loopback IPv4", "ok", "127.0.0.1 accepts connections"))
    else:
        checks.append(
            Check(
                "loopback IPv4",
                "fail",
                "127.0.0.1 refuses connections",
                "bring up the loopback interface (ip link set lo up); ddptrain's single-node rendezvous uses 127.0.0.1",
            )
        )
    ipv6 = _loopback(socket.AF_INET6, "::1")
    checks.append(
        Check(
            "loopback IPv6",
            "info",
            "::1 works"
            if ipv6
            else "::1 unavailable: fine for ddptrain (IPv4 only); for torchrun by hand set "
            "MASTER_ADDR=127.0.0.1 to avoid 'Address family not supported'",
        )
    )
    checks.append(_port(port))
    return checks


def _port(port: int) -> Check:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
        except OSError as error:
            return Check(
                f"port {port}",
                "fail",
                f"in use ({error.strerror})",
                f"another job or a leftover process holds it (see `ss -ltnp | grep {port}`); pass "
                f"--master-port with a free port, or omit it on one node: ddptrain picks a free one",
            )
    return Check(f"port {port}", "ok", "free")


def environment_checks(options: DoctorOptions) -> List[Check]:
    checks = _versions() + _cuda(options.device)
    checks.append(Check("cpus", "info", f"{available_cpus()} usable by this process"))
    checks += [_shm(), _open_files()] + _network(options.master_port)
    return checks


# ---- the collective smoke test --------------------------------------------------------------------
def _timed_all_reduce(tensor: torch.Tensor, iterations: int, device: torch.device) -> float:
    for _ in range(2):
        dist.all_reduce_sum(tensor)
    _sync(device)
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce_sum(tensor)
    _sync(device)
    return (time.perf_counter() - start) / iterations


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def smoke_test(rt: dist.Runtime) -> Dict:
    """All-reduce correctness, all-gather of ranks, a barrier, then latency and bandwidth per size."""
    world = rt.world_size
    total = dist.all_reduce_sum(torch.full((1024,), float(rt.rank + 1), device=rt.device))
    expected = world * (world + 1) / 2
    correct = bool(torch.all(total == expected).item())
    ranks = dist.gather_objects(rt.rank)
    dist.barrier()
    rows = []
    for size in CUDA_SIZES if rt.device.type == "cuda" else CPU_SIZES:
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=rt.device)
        iterations = 20 if size <= 1 << 20 else 5
        seconds = _timed_all_reduce(tensor, iterations, rt.device)
        algbw = size / seconds / 1e9
        rows.append(
            {
                "bytes": size,
                "latency_us": seconds * 1e6,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * 2 * (world - 1) / world if world > 1 else 0.0,
            }
        )
    return {
        "world_size": world,
        "backend": rt.backend,
        "device": str(rt.device),
        "all_reduce_correct": correct,
        "all_gather_ranks": ranks == list(range(world)),
        "barrier": True,
        "all_reduce": rows,
    }


def worker_main(options: DoctorOptions, env: DistEnv) -> int:
    rt = dist.setup(env, options.device, options.timeout_s)
    try:
        dist.set_collective_timeout(options.timeout_s)
        result = smoke_test(rt)
    finally:
        dist.cleanup()
    if rt.is_main and os.environ.get(RESULT_ENV):
        Path(os.environ[RESULT_ENV]).write_text(json.dumps(result))
    return 0


def _run_smoke(options: DoctorOptions, argv: List[str]) -> tuple:
    """(result or None, failure message)."""
    with tempfile.TemporaryDirectory(prefix="ddptrain-doctor-") as folder:
        result_file = Path(folder) / "result.json"
        os.environ[RESULT_ENV] = str(result_file)
        try:
            if options.nproc > 1:
                launch(LaunchConfig(nproc=options.nproc), argv)
            else:
                worker_main(options, DistEnv())
        except DdptrainError as error:
            return None, str(error)
        except RuntimeError as error:  # a collective or process-group failure in this process
            return None, f"{type(error).__name__}: {error}"
        finally:
            os.environ.pop(RESULT_ENV, None)
        if not result_file.is_file():
            return None, "the smoke test finished without a result"
        return json.loads(result_file.read_text()), ""


def smoke_checks(result: Optional[Dict], failure: str, options: DoctorOptions) -> List[Check]:
    name = f"{options.nproc}-process smoke test"
    if result is None:
        return [
            Check(
                name,
                "fail",
                failure,
                "read the worker error above; `ddptrain doctor --nproc 1` isolates this machine from "
                "the multi-process path, and --device cpu isolates NCCL from gloo",
            )
        ]
    checks = [Check(name, "ok", f"{result['backend']} on {result['device']}, world size {result['world_size']}")]
    for key, label in (
        ("all_reduce_correct", "all_reduce sum"),
        ("all_gather_ranks", "all_gather"),
        ("barrier", "barrier"),
    ):
        if result[key]:
            checks.append(Check(label, "ok", "correct"))
        else:
            checks.append(
                Check(
                    label,
                    "fail",
                    "wrong result",
                    "a broken interconnect or driver: set NCCL_DEBUG=INFO and rerun; try "
                    "NCCL_P2P_DISABLE=1 to rule out peer-to-peer transfers",
                )
            )
    return checks


# ---- the command ----------------------------------------------------------------------------------
def bandwidth_table(result: Dict) -> str:
    lines = ["| size | latency (us) | algbw (GB/s) | busbw (GB/s) |", "|---:|---:|---:|---:|"]
    for row in result["all_reduce"]:
        lines.append(
            f"| {_size(row['bytes'])} | {row['latency_us']:.1f} | {row['algbw_gbps']:.3f} | {row['busbw_gbps']:.3f} |"
        )
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def report(checks: List[Check], result: Optional[Dict], out=None) -> None:
    out = out or sys.stdout
    marks = {"ok": "ok  ", "fail": "FAIL", "info": "    "}
    width = max(len(c.name) for c in checks)
    for check in checks:
        print(f"{marks[check.status]} {check.name:<{width}}  {check.detail}", file=out)
        if check.fix:
            print(f"     {'':<{width}}  fix: {check.fix}", file=out)
    if result is not None:
        print(f"\nall_reduce on {counted(result['world_size'], 'process')}, {result['backend']}:", file=out)
        print(bandwidth_table(result), file=out)
    failed = [c.name for c in checks if c.status == "fail"]
    print(
        "\n" + ("all checks passed" if not failed else f"{counted(len(failed), 'check')} failed: {', '.join(failed)}"),
        file=out,
    )


def run_doctor(options: DoctorOptions, argv: List[str]) -> int:
    checks = environment_checks(options)
    result, failure = _run_smoke(options, argv)
    checks += smoke_checks(result, failure, options)
    ok = all(c.status != "fail" for c in checks)
    if options.as_json:
        print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks], "collectives": result}))
    else:
        report(checks, result)
    return 0 if ok else 1
