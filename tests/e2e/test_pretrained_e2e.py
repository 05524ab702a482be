"""`--pretrained` on 2 processes with the network unreachable: weights already in torchvision's cache and in the
Hugging Face cache load; a file in neither is a clear error, never a download that hangs or a silent fresh start."""

from __future__ import annotations

import pytest
import timm
import torch
import torchvision

from ..conftest import TINY, load_checkpoint, run_cli
from ..weights_cache import marked, offline_env, put_timm, put_torchvision, torchvision_file


@pytest.fixture
def offline(tmp_path) -> dict:
    return offline_env(tmp_path)


def _conv_weights(state: dict) -> dict:
    return {key: value for key, value in state.items() if key.endswith("weight") and value.ndim == 4}


def _train(data, run_dir, model: str, env: dict, check: bool = True):
    flags = ["--model", model, "--pretrained", "--freeze-backbone", "--epochs", 1, "--nproc", 2]
    flags += TINY[2:]  # TINY's size, batch, workers and split; its model replaced
    return run_cli(["train", "--data", data, "--out", run_dir, *flags], check=check, env_extra=env)


def test_a_cached_torchvision_file_loads_and_a_missing_one_is_an_error(tiny_shapes, tmp_path, offline):
    url = torchvision.models.MobileNet_V3_Small_Weights.DEFAULT.url
    missing = _train(tiny_shapes, tmp_path / "none", "mobilenet_v3_small", offline, check=False)
    cache_file = torchvision_file(offline, url)
    assert missing.returncode != 0
    said = [line for line in missing.stderr.splitlines() if "are not in the cache and could not be downloaded" in line]
    assert len(said) == 1 and str(cache_file) in said[0] and "ddptrain fetch-weights mobilenet_v3_small" in said[0]
    assert not list((tmp_path / "none").rglob("*.pt"))  # no fresh start from random weights
    # rank 1, waiting for rank 0's download, says so (unless the launcher stops it first); its line may come first
    waiting = "rank 1: rank 0, which fetches the pretrained weights of mobilenet_v3_small for this node, stopped"
    assert "its error is printed above" not in missing.stderr
    assert waiting in missing.stderr or "error: rank 1:" not in missing.stderr

    cached = marked(torchvision.models.mobilenet_v3_small().state_dict())
    put_torchvision(offline, url, cached)
    proc = _train(tiny_shapes, tmp_path / "run", "mobilenet_v3_small", offline)
    assert f"pretrained weights of mobilenet_v3_small: {cache_file}" in proc.stderr
    trained = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["model"]
    for key, value in _conv_weights(cached).items():  # the frozen backbone is the cached file's
        assert torch.equal(trained[key], value), key
    fetched = run_cli(["fetch-weights", "mobilenet_v3_small"], env_extra=offline)
    assert fetched.stdout.strip() == f"mobilenet_v3_small: already in the cache: {cache_file}"


def test_a_timm_file_in_the_hugging_face_cache_loads_with_timms_own_mechanism(tiny_shapes, tmp_path, offline):
    cached = marked(timm.create_model("test_resnet").state_dict())
    put_timm(offline, "timm/test_resnet.r160_in1k", cached)
    proc = _train(tiny_shapes, tmp_path / "run", "timm:test_resnet", offline)
    assert "pretrained weights of timm:test_resnet:" in proc.stderr and "model.safetensors" in proc.stderr
    trained = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")["model"]
    for key, value in _conv_weights(cached).items():
        assert torch.equal(trained[key], value), key
    assert trained["fc.weight"].shape[0] == 3  # timm left out the 1000-class head: a fresh one for 3 classes
