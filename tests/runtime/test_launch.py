import pytest
import torch

from ddptrain.config import Config, LaunchConfig
from ddptrain.errors import ConfigError, LaunchError
from ddptrain.runtime.launch import check_nproc, network_environment, parse_torchrun_argv, torchrun_argv


def test_single_node_gets_loopback_and_a_free_port():
    argv = torchrun_argv(LaunchConfig(nproc=2), ["train", "--nproc", "2", "--data", "d"])
    args = parse_torchrun_argv(argv)
    assert args.master_addr == "127.0.0.1" and 1024 < args.master_port < 65536
    assert args.nproc_per_node == "2" and args.rdzv_backend == "static"
    # worker flags such as --nproc are passed through, not read by torchrun's parser
    assert args.training_script_args[:4] == ["-m", "ddptrain", "train", "--nproc"]


def test_multi_node_passes_through_and_needs_a_master():
    args = parse_torchrun_argv(
        torchrun_argv(
            LaunchConfig(nproc=4, nnodes="2", node_rank=1, master_addr="node0", master_port=29400, max_restarts=3),
            ["train"],
        )
    )
    assert (args.nnodes, args.node_rank, args.master_addr, args.master_port, args.max_restarts) == (
        "2",
        1,
        "node0",
        29400,
        3,
    )
    with pytest.raises(ConfigError, match="--master-addr"):
        torchrun_argv(LaunchConfig(nproc=1, nnodes="2"), ["train"])


def test_more_processes_than_gpus_is_refused_before_start():
    visible = torch.cuda.device_count()
    with pytest.raises(ConfigError, match=f"{visible} are visible"):
        check_nproc(visible + 1, "cuda")
    check_nproc(4, "cpu")  # CPU processes are not limited by devices


def test_elastic_job_uses_the_c10d_rendezvous():
    args = parse_torchrun_argv(
        torchrun_argv(
            LaunchConfig(nproc=2, nnodes="1:3", rdzv_endpoint="head:29400", rdzv_id="exp7", rdzv_timeout=90), ["train"]
        )
    )
    assert (args.nnodes, args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == ("1:3", "c10d", "head:29400", "exp7")
    assert args.rdzv_conf == "join_timeout=90"
    sooner = LaunchConfig(nproc=2, nnodes="1:3", rdzv_endpoint="head:29400", rdzv_conf="last_call_timeout=10")
    assert parse_torchrun_argv(torchrun_argv(sooner, ["train"])).rdzv_conf == "join_timeout=300,last_call_timeout=10"


def test_node_counts_and_endpoints_are_checked_before_anything_starts():
    for values, message in [
        ({"nnodes": "2:1"}, "1 <= MIN <= MAX"),
        ({"nnodes": "x"}, "number of nodes"),
        ({"nnodes": "1:4"}, "needs --rdzv-endpoint"),
        ({"nnodes": "2", "node_rank": 2}, "--node-rank must be in"),
        ({"nnodes": "1:2", "rdzv_endpoint": "nohost"}, "HOST:PORT"),
        ({"rdzv_conf": "last_call_timeout=10"}, "applies to an elastic job"),
        ({"nnodes": "1:2", "rdzv_endpoint": "h:1", "rdzv_conf": "last_call_timeout"}, "KEY=VALUE"),
    ]:
        with pytest.raises(ConfigError, match=message):
            Config.from_flat({"data": "d", **values}).validate()
    assert (
        Config.from_flat({"data": "d", "nnodes": "1:4", "rdzv_endpoint": "head:29400"}).validate().launch.uses_launcher
    )


def test_iface_must_exist_and_sets_both_backends():
    assert network_environment(LaunchConfig(nproc=2, nnodes="2", iface="lo")) == {
        "GLOO_SOCKET_IFNAME": "lo",
        "NCCL_SOCKET_IFNAME": "lo",
    }
    with pytest.raises(ConfigError, match="--iface nosuch0: no such network interface"):
        network_environment(LaunchConfig(nproc=2, nnodes="2", iface="nosuch0"))


def test_a_single_node_job_keeps_gloo_and_nccl_on_loopback(monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    assert network_environment(LaunchConfig(nproc=2)) == {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")  # the user's own choice stays
    assert network_environment(LaunchConfig(nproc=2)) == {"GLOO_SOCKET_IFNAME": "lo"}
    assert network_environment(LaunchConfig(nproc=2, nnodes="2", master_addr="n0")) == {}  # nodes talk over the network


def test_a_rendezvous_store_that_cannot_stay_on_loopback_is_said(monkeypatch, caplog):
    import torch.distributed

    from ddptrain.runtime.launch import LoopbackRendezvous

    def old_tcpstore(*args, **kwargs):
        raise TypeError("TCPStore() got an unexpected keyword argument 'master_listen_fd'")

    monkeypatch.setattr(torch.distributed, "TCPStore", old_tcpstore)
    with caplog.at_level("WARNING", logger="ddptrain"):
        rendezvous = LoopbackRendezvous(None)
    rendezvous.close()
    assert rendezvous.store is None and "listens on every interface" in caplog.text


def test_a_workers_claim_to_report_lies_in_the_launchers_scratch_folder(tmp_path, monkeypatch):
    """An error every rank meets is printed by the first worker of the node to claim it. The claim is a file in the
    launcher's scratch folder, which the launcher removes, not one more file in the temporary folder per failed job."""
    from ddptrain.cli import _first_to_report
    from ddptrain.runtime.env import LAUNCH_DIR_ENV

    monkeypatch.setenv(LAUNCH_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-1")
    assert _first_to_report("loader-DataError") is True
    assert _first_to_report("loader-DataError") is False  # another rank of the node
    assert [p.name.startswith("ddptrain-reported-") for p in tmp_path.iterdir()] == [True]


def test_a_temporary_folder_that_cannot_hold_the_launchers_folder_is_one_line(tmp_path, monkeypatch):
    """A temporary folder that is not a folder (or is full) stops the launch before any worker, naming it and the fix."""
    import tempfile

    from ddptrain.runtime.launch import launch

    not_a_folder = tmp_path / "tmp"
    not_a_folder.write_text("a file")
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_folder))
    with pytest.raises(LaunchError, match=r"scratch folder in the temporary folder .*/tmp: .*set TMPDIR"):
        launch(LaunchConfig(nproc=1), ["train"])


def _fails() -> None:
    raise SystemExit(3)  # a worker that fails at once


def test_a_launch_leaves_the_callers_environment_as_it_was(tmp_path, monkeypatch):
    """A launch put OMP_NUM_THREADS, the socket interfaces and the worker marker into the caller's environment and
    left the first two (and, when the temporary folder could not hold its scratch folder, all of them) there: a
    script or notebook calling ddptrain.fit again believed itself a worker, and the processes it started later ran
    on another thread count. A real worker that fails, then a temporary folder that is a file."""
    import os
    import tempfile

    from ddptrain.runtime.launch import Entrypoint, launch

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    before = dict(os.environ)
    with pytest.raises(LaunchError, match="worker processes failed"):
        launch(LaunchConfig(nproc=1), [], entrypoint=Entrypoint(_fails, (), "fork"))
    assert dict(os.environ) == before
    not_a_folder = tmp_path / "tmp"
    not_a_folder.write_text("a file")
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_folder))
    with pytest.raises(LaunchError, match="scratch folder"):
        launch(LaunchConfig(nproc=1), ["train"])
    assert dict(os.environ) == before
