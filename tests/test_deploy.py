"""deploy/ templates: the Kubernetes manifests parse, carry what ddptrain needs, run it unprivileged from an
image pinned by digest and admit network traffic to its pods only from the same job's pods; the SLURM scripts,
run against stand-in `srun`/`scontrol`/`ddptrain` commands, build a ddptrain command line that ddptrain itself
accepts, pass the user's flags through one argument each and unchanged, default to one run dir per job, and
requeue the job exactly when ddptrain exits 75 (preempted)."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from ddptrain.cli import build_parser, train_config

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
MANIFESTS = sorted(p.name for p in (DEPLOY / "k8s").glob("*.yaml"))


def _manifest(name):
    """The documents of deploy/k8s/NAME, by kind (each kind at most once per file)."""
    docs = [doc for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()) if doc]
    by_kind = {doc["kind"]: doc for doc in docs}
    assert len(by_kind) == len(docs), f"{name}: two documents of one kind"
    return by_kind


def _pod_templates(name):
    """The pod templates that run ddptrain in deploy/k8s/NAME."""
    docs = _manifest(name)
    templates = [
        spec["template"] for spec in docs.get("PyTorchJob", {}).get("spec", {}).get("pytorchReplicaSpecs", {}).values()
    ]
    templates += [doc["spec"]["template"] for kind, doc in docs.items() if kind in ("StatefulSet", "Deployment", "Job")]
    return templates


def _selects(selector, labels):
    """Whether a label selector of the form {matchLabels: {...}} (the only form the templates use) picks a pod
    with these labels. An empty selector would pick every pod, so it does not count."""
    assert set(selector) == {"matchLabels"}, selector
    return bool(selector["matchLabels"]) and selector["matchLabels"].items() <= labels.items()


def _config_from(argv):
    return train_config(build_parser().parse_args(argv))


def _mounts(pod_spec):
    container = pod_spec["containers"][0]
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}, container


def test_pytorchjob_is_elastic_c10d_with_a_shared_run_dir_and_shm():
    job = _manifest("pytorchjob.yaml")["PyTorchJob"]
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
    docs = _manifest("statefulset.yaml")
    service, stateful = docs["Service"], docs["StatefulSet"]
    assert service["spec"]["clusterIP"] == "None"
    mounts, container = _mounts(stateful["spec"]["template"]["spec"])
    cfg = _config_from(container["command"][1:] + container["args"])
    host, port = cfg.launch.rdzv_endpoint.rsplit(":", 1)
    assert host == f"{stateful['metadata']['name']}-0.{service['metadata']['name']}"
    assert int(port) in [p["containerPort"] for p in container["ports"]]
    assert cfg.launch.node_range()[0] <= stateful["spec"]["replicas"] <= cfg.launch.node_range()[1]
    assert any(cfg.run.out.startswith(path) for path in mounts)


# manifests whose pods run ddptrain: the rest of deploy/k8s (a separate NetworkPolicy file, say) is support
TRAINING_MANIFESTS = [name for name in MANIFESTS if _pod_templates(name)]


def test_every_template_is_checked():
    assert {"pytorchjob.yaml", "statefulset.yaml"} <= set(TRAINING_MANIFESTS)


@pytest.mark.parametrize("name", TRAINING_MANIFESTS)
def test_training_containers_run_unprivileged_from_an_image_pinned_by_digest(name):
    for template in _pod_templates(name):
        pod = template["spec"]
        assert pod["containers"]
        for container in pod.get("initContainers", []) + pod["containers"]:
            ctx = container.get("securityContext", {})
            # the pod-level securityContext is the default for runAsNonRoot/runAsUser/seccompProfile
            effective = {**pod.get("securityContext", {}), **ctx}
            assert effective.get("runAsNonRoot") is True, container["name"]
            assert isinstance(effective.get("runAsUser"), int) and effective["runAsUser"] > 0, container["name"]
            assert effective.get("seccompProfile") == {"type": "RuntimeDefault"}, container["name"]
            assert ctx.get("allowPrivilegeEscalation") is False and not ctx.get("privileged"), container["name"]
            assert ctx.get("capabilities", {}).get("drop") == ["ALL"], container["name"]
            assert not ctx["capabilities"].get("add"), container["name"]
            assert re.fullmatch(r"[^\s@]+@sha256:[0-9a-f]{64}", container["image"]), container["image"]


@pytest.mark.parametrize("name", TRAINING_MANIFESTS)
def test_a_network_policy_admits_ingress_to_the_training_pods_only_from_the_same_pods(name):
    policies = [doc for other in MANIFESTS for kind, doc in _manifest(other).items() if kind == "NetworkPolicy"]
    others = [
        t.get("metadata", {}).get("labels", {})
        for other in TRAINING_MANIFESTS
        if other != name
        for t in _pod_templates(other)
    ]
    for template in _pod_templates(name):
        labels = template.get("metadata", {}).get("labels", {})
        mine = [p["spec"] for p in policies if _selects(p["spec"]["podSelector"], labels)]
        assert mine, f"{name}: no NetworkPolicy selects pods labelled {labels}"
        for policy in mine:
            assert "Ingress" in policy["policyTypes"] and policy["ingress"]
            for rule in policy["ingress"]:
                # a rule without `from` (or with an empty one) admits everyone
                assert rule.get("from"), rule
                for peer in rule["from"]:
                    # no namespaceSelector (other namespaces) and no ipBlock: the same pods, nothing else
                    assert set(peer) == {"podSelector"} and peer["podSelector"] == policy["podSelector"], peer
        # and the label is this job's own: it picks none of the other templates' pods
        assert not any(_selects(policy["podSelector"], other) for policy in mine for other in others)


SLURM_ENV = {
    "DATA": "/shared/data",
    "SLURM_JOB_NODELIST": "gpu-[a-b]",
    "SLURM_JOB_ID": "4242",
    "SLURM_NNODES": "2",
    "SLURM_NODEID": "1",
    "SLURM_JOB_NAME": "ddptrain",
    "SLURM_GPUS_ON_NODE": "4",
}


def _run_sbatch(tmp_path, script, flags, ddptrain_rc=0, **env_vars):
    """Runs deploy/slurm/SCRIPT in tmp_path with stand-in srun/scontrol/ddptrain on PATH. Returns the process
    and the argv the stand-in ddptrain received (one entry per argument: it writes them NUL-separated)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stubs = {
        "srun": 'while [[ "$1" == --* ]]; do shift; done; exec "$@"',
        "scontrol": f'if [ "$1" = show ]; then printf "gpu-a\\ngpu-b\\n"; else echo "$@" >> {tmp_path}/scontrol.log; fi',
        "ddptrain": f'printf "%s\\0" "$@" > {tmp_path}/argv.bin; exit {ddptrain_rc}',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    # nothing from a SLURM job these tests may run inside: only what the test sets
    inherited = {k: v for k, v in os.environ.items() if k != "OUT" and not k.startswith(("SLURM_", "MASTER_"))}
    env = {**inherited, "PATH": f"{bin_dir}:{os.environ['PATH']}", **SLURM_ENV, **env_vars}
    proc = subprocess.run(
        ["bash", str(DEPLOY / "slurm" / script), *flags], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    received = tmp_path / "argv.bin"
    argv = received.read_bytes().decode().split("\0")[:-1] if received.is_file() else None
    return proc, argv


@pytest.mark.parametrize("ddptrain_rc, requeued", [(0, False), (75, True), (1, False)])
def test_sbatch_script_builds_a_valid_command_and_requeues_only_when_preempted(tmp_path, ddptrain_rc, requeued):
    proc, argv = _run_sbatch(tmp_path, "train.sbatch", ["--epochs", "3"], ddptrain_rc, OUT="/shared/runs/a")
    assert proc.returncode == ddptrain_rc, proc.stderr
    assert argv[0] == "train"
    cfg = _config_from(argv)
    launch = cfg.launch
    assert (launch.master_addr, launch.node_rank, launch.nproc, launch.node_range()) == ("gpu-a", 1, 4, (2, 2))
    assert launch.master_port == 15000 + 4242 and cfg.run.resume == "auto" and cfg.optim.epochs == 3
    assert cfg.run.out == "/shared/runs/a"  # the user's OUT wins over the per-job default
    log = tmp_path / "scontrol.log"
    assert (log.is_file() and "requeue 4242" in log.read_text()) == requeued
    header = (DEPLOY / "slurm" / "train.sbatch").read_text()
    assert "#SBATCH --signal=USR1@" in header and "#SBATCH --requeue" in header


# Flags a user may pass to `sbatch SCRIPT ...`: each must reach ddptrain as one argument, byte for byte, and
# nothing in them may run as shell code.
AWKWARD_FLAGS = [
    "--epochs",
    "3",
    "--rdzv-id",
    "exp 7  two spaces *",
    "--weights",
    """/w/the 'best' "one".pt""",
    "--iface",
    "eth0$(touch INJECTED2)`touch INJECTED3`; touch INJECTED",
]


# What the scripts put before the user's flags, with SLURM_ENV and no OUT: the run dir defaults to one per job
# (runs/NAME-JOBID), so a second job of the same name does not resume this one's checkpoint, and a requeued job,
# which keeps its id, finds its own.
SCRIPT_ARGV = {
    "train.sbatch": shlex.split(
        "train --data /shared/data --out runs/ddptrain-4242 --nnodes 2 --node-rank 1 --nproc 4"
        " --master-addr gpu-a --master-port 19242 --resume auto"
    ),
    "train-per-gpu.sbatch": shlex.split("train --data /shared/data --out runs/ddptrain-4242 --resume auto"),
}


@pytest.mark.parametrize("script", sorted(SCRIPT_ARGV))
def test_sbatch_passes_each_user_flag_to_ddptrain_as_one_unchanged_argument(tmp_path, script):
    proc, argv = _run_sbatch(tmp_path, script, AWKWARD_FLAGS)
    assert proc.returncode == 0, proc.stderr
    assert not sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("INJECTED"))
    assert argv == SCRIPT_ARGV[script] + AWKWARD_FLAGS
    cfg = _config_from(argv)  # and ddptrain takes them
    assert (cfg.launch.rdzv_id, cfg.model.weights, cfg.launch.iface) == tuple(AWKWARD_FLAGS[3::2])
