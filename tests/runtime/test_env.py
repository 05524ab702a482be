import pytest

from ddptrain.errors import ConfigError
from ddptrain.runtime.env import DistEnv, detect, first_slurm_host


def test_single_process_when_nothing_is_set():
    assert detect({}) == DistEnv()


def test_torchrun_environment():
    env = detect(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29400",
            "TORCHELASTIC_RUN_ID": "x",
        }
    )
    assert (env.rank, env.local_rank, env.world_size, env.local_world_size, env.launcher) == (3, 1, 4, 2, "torchrun")
    assert (env.master_addr, env.master_port) == ("10.0.0.1", 29400)


def test_legacy_launch_passes_local_rank_as_argument():
    env = detect({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, local_rank_arg=1)
    assert env.local_rank == 1 and env.launcher == "launch"


def test_slurm_one_task_per_device():
    env = detect(
        {
            "SLURM_PROCID": "5",
            "SLURM_NTASKS": "8",
            "SLURM_LOCALID": "1",
            "SLURM_JOB_NODELIST": "gpu[07-08]",
            "SLURM_NTASKS_PER_NODE": "4(x2)",
            "SLURM_JOB_ID": "1234",
        }
    )
    assert (env.rank, env.local_rank, env.world_size, env.local_world_size) == (5, 1, 8, 4)
    assert env.master_addr == "gpu07" and env.master_port == 15000 + 1234 and env.launcher == "slurm"


def test_torchrun_inside_slurm_wins():
    env = detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    assert env.launcher == "torchrun" and env.rank == 1


@pytest.mark.parametrize(
    "nodelist,first", [("node1", "node1"), ("a[3-5,9],b2", "a3"), ("x-[010-011]", "x-010"), ("h1,h2", "h1")]
)
def test_first_slurm_host(nodelist, first):
    assert first_slurm_host(nodelist) == first


def test_slurm_without_nodelist_is_a_clear_error():
    with pytest.raises(ConfigError, match="MASTER_ADDR"):
        detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})
