"""Known failure classes map to one explanation with the fix; the launcher prints it once, with the rank."""

import pytest

from ddptrain.runtime.explain import explain

from ..conftest import fault_env, run_cli

SAMPLES = {
    "port in use": "DistNetworkError: The server socket has failed to listen on any local network address. "
    "port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
    "IPv6 only": "[c10d] The client socket has failed to connect to [localhost]:29500 (errno: 97 - Address "
    "family not supported by protocol)",
    "out of memory": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "device mismatch": "RuntimeError: Expected all tensors to be on the same device, but found at least two "
    "devices, cuda:1 and cuda:0!",
    "init timeout": "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 "
    "clients joined.",
    "NCCL error": "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
    "system error (run with NCCL_DEBUG=INFO for details)",
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_known_failure_gets_its_explanation(name):
    assert explain(SAMPLES[name]).startswith(f"{name}: ")


def test_a_killed_rank_and_an_unknown_error():
    assert explain("", exitcode=-9).startswith("killed: Rank exited: the process was killed by SIGKILL")
    assert explain("ValueError: something else entirely", exitcode=1) is None


@pytest.mark.slow
def test_the_launcher_explains_a_rank_failure_once_naming_the_rank(tiny_shapes, tmp_path):
    proc = run_cli(
        [
            "train",
            "--data",
            tiny_shapes,
            "--out",
            tmp_path / "run",
            "--model",
            "timm:test_resnet",
            "--img-size",
            32,
            "--batch-size",
            4,
            "--epochs",
            1,
            "--workers",
            0,
            "--nproc",
            2,
        ],
        check=False,
        env_extra=fault_env("raise:CUDA out of memory. Tried to allocate 20.00 GiB", 1, 2),
    )
    assert proc.returncode != 0
    summary = [
        line for line in proc.stderr.splitlines() if line.startswith("ddptrain train: error: worker processes failed")
    ]
    tail = proc.stderr[-4000:]
    assert len(summary) == 1 and "rank 1 (local 1" in summary[0] and "[out of memory]" in summary[0], tail
    assert proc.stderr.count("out of memory: A process ran out of GPU memory") == 1


def test_survivors_stopped_by_the_launcher_are_not_a_cause():
    assert explain("", exitcode=-15) is None
