"""deploy/ templates: the Kubernetes manifests parse and carry what ddptrain needs; the SLURM script,
run against stand-in `srun`/`scontrol`/`ddptrain` commands, builds a ddptrain command line that
ddptrain itself accepts, and requeues the job exactly when ddptrain exits 75 (preempted)."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from ddptrain.cli import build_parser, train_config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def _config_from(argv):
    return train_config(build_parser().parse_args(argv))


def _mounts(pod_spec):
    container = pod_spec["containers"][0]
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}, container


def test_pytorchjob_is_elastic_c10d_with_a_shared_run_dir_and_shm():
    job = yaml.safe_load((DEPLOY / "k8s" / "pytorchjob.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    policy = job["spec"]["elasticPolicy"]
    assert policy["rdzvBackend"] == "c10d" and 1 <= policy["minReplicas"] <= policy["maxReplicas"]
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] in ("OnFailure", "ExitCode")
    mounts, container = _mounts(worker["template"]["spec"])
    script = container["args"][0].replace("$PET_RDZV_ENDPOINT", "ddptrain-worker-0:29400")
    script = script.replace("${PET_NNODES:-2:4}", "2:4")
    argv = shlex.split(script)[1:]  # after `exec`
    cfg = _config_from(argv[1:])
    assert argv[0] == "ddptrain" and cfg.launch.rdzv_endpoint and cfg.run.resume == "auto"
    assert cfg.launch.node_range() == (2, 4)
    assert any(cfg.run.out.startswith(path) for path, volume in mounts.items() if "persistentVolumeClaim" in volume)
    assert mounts["/dev/shm"]["emptyDir"]["medium"] == "Memory"


def test_statefulset_rendezvous_points_at_pod_zero_of_its_headless_service():
    service, stateful = yaml.safe_load_all((DEPLOY / "k8s" / "statefulset.yaml").read_text())
    assert service["spec"]["clusterIP"] == "None"
    mounts, container = _mounts(stateful["spec"]["template"]["spec"])
    cfg = _config_from(container["command"][1:] + container["args"])
    host, port = cfg.launch.rdzv_endpoint.rsplit(":", 1)
    assert host == f"{stateful['metadata']['name']}-0.{service['metadata']['name']}"
    assert int(port) in [p["containerPort"] for p in container["ports"]]
    assert cfg.launch.node_range()[0] <= stateful["spec"]["replicas"] <= cfg.launch.node_range()[1]
    assert any(cfg.run.out.startswith(path) for path in mounts)


@pytest.mark.parametrize("ddptrain_rc, requeued", [(0, False), (75, True), (1, False)])
def test_sbatch_script_builds_a_valid_command_and_requeues_only_when_preempted(tmp_path, ddptrain_rc, requeued):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stubs = {
        "srun": 'while [[ "$1" == --* ]]; do shift; done; exec "$@"',
        "scontrol": f'if [ "$1" = show ]; then printf "gpu-a\\ngpu-b\\n"; else echo "$@" >> {tmp_path}/scontrol.log; fi',
        "ddptrain": f'printf "%s\\n" "$@" > {tmp_path}/argv.txt; exit {ddptrain_rc}',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "DATA": "/shared/data",
        "OUT": "/shared/runs/a",
        "SLURM_JOB_NODELIST": "gpu-[a-b]",
        "SLURM_JOB_ID": "4242",
        "SLURM_NNODES": "2",
        "SLURM_NODEID": "1",
        "SLURM_JOB_NAME": "ddptrain",
        "SLURM_GPUS_ON_NODE": "4",
    }
    proc = subprocess.run(
        ["bash", str(DEPLOY / "slurm" / "train.sbatch"), "--epochs", "3"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == ddptrain_rc, proc.stderr
    argv = (tmp_path / "argv.txt").read_text().split("\n")[:-1]
    assert argv[0] == "train"
    cfg = _config_from(argv)
    launch = cfg.launch
    assert (launch.master_addr, launch.node_rank, launch.nproc, launch.node_range()) == ("gpu-a", 1, 4, (2, 2))
    assert launch.master_port == 15000 + 4242 and cfg.run.resume == "auto" and cfg.optim.epochs == 3
    log = tmp_path / "scontrol.log"
    assert (log.is_file() and "requeue 4242" in log.read_text()) == requeued
    header = (DEPLOY / "slurm" / "train.sbatch").read_text()
    assert "#SBATCH --signal=USR1@" in header and "#SBATCH --requeue" in header
