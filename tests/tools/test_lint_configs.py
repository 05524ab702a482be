"""What lint reads of a repository beside its Python code: DDP011 through its YAML and JSON files (a rendezvous
port the code reads from a configuration that fixes it: `init_method=hp.dist_config.dist_url`,
`**opt["dist_params"]`), and its shell scripts' launch commands (a program only ever launched on one node)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ddptrain.tools.lint import run_lint
from ddptrain.tools.lint.configs import fixed_settings, launched_on_one_node

TRAINER = """\
import argparse
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import yaml
from torch.nn.parallel import DistributedDataParallel as DDP

def train(rank, hp, num_gpus):
    torch.cuda.set_device(rank)
    dist.init_process_group(backend="nccl", init_method=hp["dist_config"]["dist_url"], world_size=num_gpus, rank=rank)
    model = DDP(torch.nn.Linear(2, 2).cuda(), device_ids=[rank])

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-c", "--config", required=True)
    args = parser.parse_args()
    with open(args.config) as f:
        hp = yaml.safe_load(f)
    mp.spawn(train, args=(hp, torch.cuda.device_count()), nprocs=torch.cuda.device_count())
"""

LAUNCHER = """\
import os
import torch
import torch.distributed as dist

def init_dist(launcher, backend="nccl", **kwargs):
    if launcher == "slurm":
        _init_dist_slurm(backend, **kwargs)

def _init_dist_slurm(backend, port=None):
    torch.cuda.set_device(int(os.environ["SLURM_LOCALID"]))
    if port is not None:
        os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group(backend=backend)
"""

MAIN = """\
import argparse
import yaml
from dist_util import init_dist

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-opt", required=True)
    args = parser.parse_args()
    opt = yaml.safe_load(open(args.opt))
    init_dist("slurm", **opt["dist_params"])
"""


def _repository(root: Path, files: dict) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    (root / ".git").mkdir(exist_ok=True)
    return root


def _ports(path: Path, capsys) -> list:
    run_lint([str(path)], as_json=True)
    findings = json.loads(capsys.readouterr().out)["findings"]
    return [(Path(f["file"]).name, f["line"]) for f in findings if f["rule"] == "DDP011"]


def test_an_init_method_read_from_a_config_that_fixes_its_port_is_found(tmp_path, capsys):
    config = (
        'model:\n  width: 64\n#####\ndist_config:\n  dist_backend: nccl\n  dist_url: "tcp://localhost:54321"  # x\n'
    )
    repo = _repository(tmp_path / "repo", {"trainer.py": TRAINER, "config/default.yaml": config})
    assert _ports(repo / "trainer.py", capsys) == [("trainer.py", 10)]
    (repo / "config" / "default.yaml").write_text(config.replace("tcp://localhost:54321", "env://"))
    assert _ports(repo / "trainer.py", capsys) == []  # the launcher's environment: nothing fixed


def test_a_port_parameter_filled_from_a_config_section_through_kwargs_is_found(tmp_path, capsys):
    options = "name: x\ndist_params:\n  backend: nccl\n  port: 29500\ntrain:\n  lr: 0.1\n"
    repo = _repository(tmp_path / "repo", {"main.py": MAIN, "dist_util.py": LAUNCHER, "options/train.yml": options})
    assert _ports(repo / "main.py", capsys) == [("dist_util.py", 12)]
    (repo / "options" / "train.yml").write_text(options.replace("  port: 29500\n", ""))
    assert _ports(repo / "main.py", capsys) == []


def test_a_same_named_key_elsewhere_in_the_config_is_not_the_rendezvous_port(tmp_path, capsys):
    """`args.port` reaching MASTER_PORT is not a visdom server's `port: 8097`, nor a port under another section."""
    script = TRAINER.replace('init_method=hp["dist_config"]["dist_url"]', 'init_method="env://"')
    script = script.replace(
        "    torch.cuda.set_device(rank)\n",
        "    torch.cuda.set_device(rank)\n    os.environ['MASTER_PORT'] = str(args.port)\n",
    )
    script = "import os\n" + script
    config = "visdom:\n  port: 8097\nserver:\n  dist_url: tcp://localhost:54321\n"
    repo = _repository(tmp_path / "repo", {"trainer.py": script, "config/default.yaml": config})
    assert _ports(repo / "trainer.py", capsys) == []


def test_settings_keep_the_keys_above_them_and_skip_lists_comments_and_other_values(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "# port: 1111\nouter:\n  inner:\n    port: '2222'   # quoted\n  hosts:\n    - name: x\n      port: 3333\n"
        "  url: 'tcp://h:4444'\nport: not-a-port\nother: {port: 5555}\n"
    )
    assert [s.value for s in fixed_settings(["inner", "port"], tmp_path, address=False)] == ["2222"]
    assert [s.value for s in fixed_settings(["hosts", "port"], tmp_path, address=False)] == ["3333"]
    assert [s.line for s in fixed_settings(["outer", "url"], tmp_path, address=True)] == [8]
    assert fixed_settings(["port"], tmp_path, address=False) == []  # no top-level port: the one there is words


def test_a_json_config_fixes_the_port_too(tmp_path, capsys):
    """hifi-gan's shape: `h.dist_config["dist_url"]` from a `config_v1.json`; a JSON file without that section, or
    annotations that only mention ports in passing, change nothing."""
    script = TRAINER.replace('hp["dist_config"]["dist_url"]', 'hp.dist_config["dist_url"]')
    config = {"resblock": "1", "dist_config": {"dist_backend": "nccl", "dist_url": "tcp://localhost:54321"}}
    repo = _repository(tmp_path / "repo", {"train.py": script, "config_v1.json": json.dumps(config, indent=4)})
    (repo / "annotations.json").write_text(json.dumps([{"port": 8080, "dist_url": "tcp://x:1234"}]))
    assert _ports(repo / "train.py", capsys) == [("train.py", 10)]
    (repo / "config_v1.json").write_text(json.dumps({"dist_config": {"dist_url": "env://"}}))
    assert _ports(repo / "train.py", capsys) == []
    assert [s.keys for s in fixed_settings(["dist_url"], repo, address=True)] == []  # the list's items: no top level


# Rank 0 of each node saves (`LOCAL_RANK == 0`) in a program that reads its global rank: on several nodes, every
# node writes the same path (DDP019) — unless the program only ever runs on one node.
PER_NODE_SAVE = """\
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    model = DDP(torch.nn.Linear(2, 2).cuda(), device_ids=[local_rank])
    for epoch in range(3):
        if local_rank == 0:
            torch.save(model.module.state_dict(), "checkpoint.pt")

if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    "launchers, found",
    [
        ({}, True),  # no launch script: it may be launched on several nodes
        ({"train.sh": "torchrun --standalone --nproc_per_node=4 tools/train.py --epochs 3\n"}, False),
        (
            {
                "scripts/run.sh": "cd tools\npython -m torch.distributed.launch \\\n  --nnodes=1 --nproc_per_node 8 \\\n  train.py\n"
            },
            False,
        ),
        (
            {
                "a.sh": "torchrun --standalone tools/train.py\n",
                "b.sh": "torchrun --nnodes=2 --node_rank=$NODE tools/train.py\n",
            },
            True,
        ),
        ({"train.sh": "torchrun --nnodes=$NNODES --nproc_per_node=8 tools/train.py\n"}, True),
        ({"train.sh": "# torchrun --nnodes=2 tools/train.py\ntorchrun --standalone tools/train.py\n"}, False),
        ({"other.sh": "torchrun --standalone tools/evaluate.py\n"}, True),  # launches another program
    ],
)
def test_a_save_on_each_nodes_rank_0_is_no_finding_where_every_launch_command_runs_one_node(
    tmp_path, capsys, launchers, found
):
    repo = _repository(tmp_path / "repo", {"tools/train.py": PER_NODE_SAVE, **launchers})
    run_lint([str(repo / "tools" / "train.py")], as_json=True)
    rules = {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert ("DDP019" in rules) is found


def test_a_program_that_reads_the_nodes_rank_is_for_several_nodes_whatever_its_scripts_say(tmp_path, capsys):
    multi = PER_NODE_SAVE.replace(
        'int(os.environ["LOCAL_RANK"])', 'int(os.environ["LOCAL_RANK"]); node = os.environ.get("SLURM_NODEID")'
    )
    repo = _repository(tmp_path / "repo", {"train.py": multi, "train.sh": "torchrun --standalone train.py\n"})
    run_lint([str(repo / "train.py")], as_json=True)
    assert "DDP019" in {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}


def test_launch_commands_name_the_entry_relative_to_the_folder_they_run_in(tmp_path):
    repo = _repository(tmp_path / "repo", {"tools/train.py": "", "run.sh": "torchrun --standalone ../tools/train.py\n"})
    assert launched_on_one_node(repo, repo / "tools" / "train.py")
    assert not launched_on_one_node(repo, repo / "tools" / "test.py")


WRAPPER_SAVE = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(2, 2))
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), "model.pt")

if __name__ == "__main__":
    main()
"""
RENAME = """\
import sys
import torch

state = torch.load(sys.argv[1], weights_only=True)
torch.save({k.removeprefix("module."): v for k, v in state.items()}, sys.argv[2])
"""


def test_a_script_beside_the_trainer_that_strips_the_wrappers_prefix_makes_the_save_its_format(tmp_path, capsys):
    """The wrapper's state_dict saved with its 'module.' keys is the repository's own format where a script beside
    the trainer converts it (AlphaZeroFromScratch's rename.py); without one, it is a finding."""
    repo = _repository(tmp_path / "repo", {"train.py": WRAPPER_SAVE})
    run_lint([str(repo / "train.py")], as_json=True)
    assert [f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["DDP007"]
    (repo / "rename.py").write_text(RENAME)
    run_lint([str(repo / "train.py")], as_json=True)
    assert json.loads(capsys.readouterr().out)["findings"] == []


SECTIONED = """\
import argparse
import torch
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel
from utils import get_config_from_file

def train(rank, args, hp):
    torch.cuda.set_device(rank)
    init_process_group(backend="nccl", init_method=hp.dist_url, world_size=args.num_gpus, rank=rank)
    model = DistributedDataParallel(torch.nn.Linear(2, 2).cuda(), device_ids=[rank])

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--num_gpus", type=int, default=1)
    args = parser.parse_args()
    hp = get_config_from_file(args.config).hparams
    train(rank=args.rank, args=args, hp=hp)
"""


def _rules_at(path: Path, capsys) -> list:
    run_lint([str(path)], as_json=True)
    return sorted((f["rule"], f["line"]) for f in json.loads(capsys.readouterr().out)["findings"])


def test_a_config_object_handed_down_from_its_section_keeps_the_sections_key(tmp_path, capsys):
    """text2semantic_t5: `hp = get_config_from_file(args.config).hparams`, then `train(..., hp=hp)` reads
    `hp.dist_url`, which the YAML fixes under `hparams:` as `tcp://localhost:12345` — a fixed port (DDP011), and a
    rendezvous on this host: one node, where the rank is the GPU's (no DDP013). Another host's address may be
    one of several nodes."""
    config = 'hparams:\n    batch_size: 4\n    # distributed\n    dist_url: "tcp://localhost:12345"\n'
    files = {"train.py": SECTIONED, "utils.py": "def get_config_from_file(path):\n    pass\n"}
    repo = _repository(tmp_path / "repo", {**files, "configs/train.yaml": config})
    assert _rules_at(repo / "train.py", capsys) == [("DDP011", 9)]
    (repo / "configs" / "train.yaml").write_text(config.replace("localhost", "10.0.0.1"))
    assert _rules_at(repo / "train.py", capsys) == [("DDP011", 9), ("DDP013", 8), ("DDP013", 10)]
    (repo / "configs" / "train.yaml").write_text(config.replace("hparams:", "other:"))
    assert _rules_at(repo / "train.py", capsys) == [("DDP013", 8), ("DDP013", 10)]
