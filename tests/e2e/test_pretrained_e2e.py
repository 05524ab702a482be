"""`--pretrained` on 2 processes with the network unreachable: weights already in torchvision's cache and in the
Hugging Face cache load; a file in neither is a clear error, never a download that hangs or a silent fresh start."""

from __future__ import annotations

from pathlib import Path

import pytest
import timm
import torch
import torchvision
from safetensors.torch import save_file

from ..conftest import TINY, load_checkpoint, run_cli

SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def offline(tmp_path) -> dict:
    """Empty caches of their own, and every HTTP(S) request sent to a port where nothing listens."""
    return {
        "TORCH_HOME": str(tmp_path / "torch"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "http_proxy": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "no_proxy": "",
    }


def _marked(state: dict) -> dict:
    """A state dict whose values no training could produce by chance: what is loaded is recognisable."""
    return {key: torch.full_like(value, 0.0123) if value.is_floating_point() else value for key, value in state.items()}


def _conv_weights(state: dict) -> dict:
    return {key: value for key, value in state.items() if key.endswith("weight") and value.ndim == 4}


def _train(data, run_dir, model: str, env: dict, check: bool = True):
    flags = ["--model", model, "--pretrained", "--freeze-backbone", "--epochs", 1, "--nproc", 2]
    flags += TINY[2:]  # TINY's size, batch, workers and split; its model replaced
    return run_cli(["train", "--data", data, "--out", run_dir, *flags], check=check, env_extra=env)


def test_a_cached_torchvision_file_loads_and_a_missing_one_is_an_error(tiny_shapes, tmp_path, offline):
    url = torchvision.models.MobileNet_V3_Small_Weights.DEFAULT.url
    missing = _train(tiny_shapes, tmp_path / "none", "mobilenet_v3_small", offline, check=False)
    cache_file = Path(offline["TORCH_HOME"]) / "hub" / "checkpoints" / Path(url).name
    assert missing.returncode != 0
    said = [line for line in missing.stderr.splitlines() if "are not in the cache and could not be downloaded" in line]
    assert len(said) == 1 and str(cache_file) in said[0] and "ddptrain fetch-weights mobilenet_v3_small" in said[0]
    assert not list((tmp_path / "none").rglob("*.pt"))  # no fresh start from random weights

    cached = _marked(torchvision.models.mobilenet_v3_small().state_dict())
    cache_file.parent.mkdir(parents=True, exist_ok=True)  # the failed fetch made it (and its lock file)
    torch.save(cached, cache_file)
    proc = _train(tiny_shapes, tmp_path / "run", "mobilenet_v3_small", offline)
    assert f"pretrained weights of mobilenet_v3_small: {cache_file}" in proc.stderr
    trained = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["model"]
    for key, value in _conv_weights(cached).items():  # the frozen backbone is the cached file's
        assert torch.equal(trained[key], value), key
    fetched = run_cli(["fetch-weights", "mobilenet_v3_small"], env_extra=offline)
    assert fetched.stdout.strip() == f"mobilenet_v3_small: already in the cache: {cache_file}"


def test_a_timm_file_in_the_hugging_face_cache_loads_with_timms_own_mechanism(tiny_shapes, tmp_path, offline):
    repo = Path(offline["HF_HOME"]) / "hub" / "models--timm--test_resnet.r160_in1k"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(SNAPSHOT)
    (repo / "snapshots" / SNAPSHOT).mkdir(parents=True)
    cached = _marked(timm.create_model("test_resnet").state_dict())
    save_file(
        {key: value.contiguous() for key, value in cached.items()}, repo / "snapshots" / SNAPSHOT / "model.safetensors"
    )
    proc = _train(tiny_shapes, tmp_path / "run", "timm:test_resnet", offline)
    assert "pretrained weights of timm:test_resnet:" in proc.stderr and "model.safetensors" in proc.stderr
    trained = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["model"]
    for key, value in _conv_weights(cached).items():
        assert torch.equal(trained[key], value), key
    assert trained["fc.weight"].shape[0] == 3  # timm left out the 1000-class head: a fresh one for 3 classes
