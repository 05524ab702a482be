import pytest
import torch

from ddptrain.errors import ConfigError
from ddptrain.launch import check_nproc, parse_torchrun_argv, torchrun_argv


def test_single_node_gets_loopback_and_a_free_port():
    argv = torchrun_argv(2, 1, 0, None, None, 0, ["train", "--nproc", "2", "--data", "d"])
    args = parse_torchrun_argv(argv)
    assert args.master_addr == "127.0.0.1" and 1024 < args.master_port < 65536
    assert args.nproc_per_node == "2" and args.rdzv_backend == "static"
    # worker flags such as --nproc are passed through, not read by torchrun's parser
    assert args.training_script_args[:4] == ["-m", "ddptrain", "train", "--nproc"]


def test_multi_node_passes_through_and_needs_a_master():
    args = parse_torchrun_argv(torchrun_argv(4, 2, 1, "node0", 29400, 3, ["train"]))
    assert (args.nnodes, args.node_rank, args.master_addr, args.master_port, args.max_restarts) == \
        ("2", 1, "node0", 29400, 3)
    with pytest.raises(ConfigError, match="--master-addr"):
        torchrun_argv(1, 2, 0, None, None, 0, ["train"])


def test_more_processes_than_gpus_is_refused_before_start():
    visible = torch.cuda.device_count()
    with pytest.raises(ConfigError, match=f"{visible} are visible"):
        check_nproc(visible + 1, "cuda")
    check_nproc(4, "cpu")  # CPU processes are not limited by devices
