"""The library API for users' own scripts: the converted example, run for real on 2 gloo ranks."""

import ast
import difflib
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import TensorDataset

import ddptrain
from ddptrain.errors import DdptrainError

from .conftest import CLI_TIMEOUT_S, cli_env, write_synthetic

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def code_lines(path: Path) -> list:
    """The script without its module docstring (the prose may differ freely)."""
    text = path.read_text()
    docstring_end = ast.parse(text).body[0].end_lineno
    return text.splitlines()[docstring_end:]


def test_the_converted_example_changes_at_most_ten_lines():
    single, converted = code_lines(EXAMPLES / "train_single.py"), code_lines(EXAMPLES / "train_ddp.py")
    added = [
        line
        for line in difflib.unified_diff(single, converted, lineterm="", n=0)
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert 0 < len(added) <= 10, added
    assert all("ddptrain" in line or line[1:].strip().startswith("print(") for line in added), added


@pytest.mark.slow
def test_the_converted_example_trains_on_two_ranks(tmp_path):
    data = tmp_path / "data"
    write_synthetic(data / "train", classes=3, per_class=8)
    write_synthetic(data / "val", classes=3, per_class=2, start=100)
    write_synthetic(data / "val", classes=1, per_class=1, start=200)  # 7 images: the ranks get 4 and 3
    out = tmp_path / "model.pt"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(EXAMPLES / "train_ddp.py"),
        "--data",
        str(data),
        "--epochs",
        "2",
        "--img-size",
        "32",
        "--batch-size",
        "4",
        "--workers",
        "1",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, env=cli_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    epochs = [line for line in proc.stdout.splitlines() if line.startswith("epoch")]
    assert len(epochs) == 2, proc.stdout  # printed by rank 0 only
    assert all(line.endswith("/7)") for line in epochs), epochs  # every validation image once, over both ranks
    import torchvision

    model = torchvision.models.resnet18(num_classes=3)  # the saved weights load into a plain model
    model.load_state_dict(torch.load(out, map_location="cpu", weights_only=True)["model"])


def test_one_process_api_without_a_launcher():
    with pytest.raises(DdptrainError, match="setup"):
        ddptrain.prepare_model(torch.nn.Linear(2, 2))
    assert ddptrain.setup(device="cpu") == torch.device("cpu")
    try:
        data = TensorDataset(torch.arange(10))
        loader = ddptrain.train_loader(data, batch_size=3, seed=1, num_workers=0)
        assert len(loader) == 3  # 10 // 3 full batches, the tail dropped
        first, second = ([int(x) for (batch,) in loader for x in batch] for _ in range(2))
        assert len(first) == 9 and len(set(first)) == 9
        assert first != second  # every pass is the next epoch: a new shuffle
        loader.set_epoch(0)
        assert [int(x) for (batch,) in loader for x in batch] == first
        assert ddptrain.reduce_sum(3, 0.5, torch.tensor([1.0, 2.0])) == (3, 0.5, 3.0)
        assert ddptrain.is_main() and ddptrain.world_size() == 1
    finally:
        ddptrain.cleanup()
