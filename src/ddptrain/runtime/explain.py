"""Known failure classes of distributed training: what the raw error means and how to fix it.

The launcher matches a failed rank's error text (or exit signal) against these and prints the
explanation once, with the rank; a single process does the same for its own crash.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class FailureClass:
    name: str
    pattern: re.Pattern[str]
    explanation: str


def _known(name: str, pattern: str, explanation: str) -> FailureClass:
    return FailureClass(name, re.compile(pattern, re.IGNORECASE), explanation)


KNOWN = [
    _known(
        "port in use",
        r"address already in use|EADDRINUSE|errno:? ?98\b",
        "The rendezvous port is taken, usually by another job on the same node or a previous run that has "
        "not exited. Fix: omit --master-port on one node (ddptrain picks a free port), or pass a free one; "
        "find the holder with `ss -ltnp | grep PORT`.",
    ),
    _known(
        "IPv6 only",
        r"address family not supported|EAFNOSUPPORT|errno:? ?97\b",
        "The master address resolved to an IPv6 address this host cannot use (or the reverse). Fix: give "
        "--master-addr as an IPv4 address (127.0.0.1 on one node; the node's IPv4 address across nodes), "
        "and --iface / GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME for the interface that carries it.",
    ),
    _known(
        "out of CPU memory",
        r"DefaultCPUAllocator: can't allocate memory|Cannot allocate memory",
        "A process could not get more CPU memory: the machine's is used up, or a limit holds it (ulimit -d/-v, "
        "a cgroup, the scheduler's memory request). Under --strategy ddp every process keeps the whole model, its "
        "gradients and optimizer state. Fix: --strategy fsdp (each process keeps 1/N of them), "
        "--grad-checkpointing (activations recomputed, not kept), a lower --batch-size with a higher --grad-accum, "
        "fewer --workers; `ddptrain bench memory` shows what each option saves.",
    ),
    _known(
        "out of memory",
        r"out of memory|OutOfMemoryError|CUDNN_STATUS_ALLOC_FAILED|CUBLAS_STATUS_ALLOC_FAILED",
        "A process ran out of GPU memory. The per-process batch is --batch-size (it does not shrink when "
        "you add GPUs). Fix: lower --batch-size and raise --grad-accum to keep the global batch, use --amp "
        "bf16, --grad-checkpointing, a smaller --img-size, or --strategy fsdp when the weights, gradients and "
        "optimizer state alone fill the GPU; check `nvidia-smi` for other processes on the same GPU.",
    ),
    _known(
        "device mismatch",
        r"expected all tensors to be on the same device|device_ids|"
        r"on different devices|invalid device ordinal",
        "Tensors or the model are on different devices, typically every process on cuda:0 because "
        "torch.cuda.set_device(local_rank) was not called first, or device_ids not matching LOCAL_RANK. "
        "ddptrain pins each process to its GPU; in your own script call "
        "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group "
        "(`ddptrain lint` finds this).",
    ),
    _known(
        "init timeout",
        r"timed out.*(rendezvous|initiali[sz]|client|store|connect)|DistStoreError|"
        r"socket timeout|wait timeout|connect\(\) timed out|Timed out after \d+ seconds",
        "The processes did not all meet: a node did not start, started with other --nnodes/--master-addr/"
        "--master-port, or cannot reach the master (firewall, wrong interface). Fix: start every node with "
        "the same --nnodes, --master-addr and --master-port; check `nc -zv MASTER_ADDR PORT` from each "
        "node; set --iface to the interface that reaches the master; run `ddptrain doctor` on each node.",
    ),
    _known(
        "NCCL error",
        r"NCCL (error|WARN)|nccl(Unhandled|System|Internal|InvalidUsage|Remote)Error",
        "NCCL failed between GPUs or nodes. Fix: rerun with NCCL_DEBUG=INFO to see the transport; "
        "NCCL_IB_DISABLE=1 rules out InfiniBand, NCCL_P2P_DISABLE=1 peer-to-peer; check that every node has "
        "the same NCCL/driver versions (`ddptrain doctor`).",
    ),
]

KILLED = (
    "Rank exited: the process was killed by {signal} without an error of its own, most often by "
    "the kernel's out-of-memory killer (check `dmesg | grep -i kill`, lower --workers or --batch-size) or "
    "a scheduler enforcing a limit; --max-restarts R restarts the workers and resumes from the last "
    "checkpoint."
)


def explain(message: str, exitcode: Optional[int] = None) -> Optional[str]:
    """The explanation for an error text (or a death by signal), or None when unknown."""
    for known in KNOWN:
        if message and known.pattern.search(message):
            return f"{known.name}: {known.explanation}"
    if exitcode == -signal.SIGKILL:  # SIGTERM is the launcher stopping the survivors: not a cause
        return "killed: " + KILLED.format(signal="SIGKILL")
    return None
