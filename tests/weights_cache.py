"""Pretrained-weight caches for tests, with the network unreachable: torchvision's (`TORCH_HOME`) and the Hugging
Face cache timm reads, each filled with a file in the layout the library itself would have written."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"


def offline_env(root: Path) -> dict:
    """Empty caches of their own under `root`, and every HTTP(S) request sent to a port where nothing listens."""
    return {
        "TORCH_HOME": str(root / "torch"),
        "HF_HOME": str(root / "hf"),
        "HF_HUB_OFFLINE": "1",
        "http_proxy": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "no_proxy": "",
    }


def marked(state: dict) -> dict:
    """A state dict whose values no training could produce by chance: what is loaded is recognisable."""
    return {key: torch.full_like(value, 0.0123) if value.is_floating_point() else value for key, value in state.items()}


def torchvision_file(env: dict, url: str) -> Path:
    """Where torchvision's cache keeps the weights downloaded from `url`."""
    return Path(env["TORCH_HOME"]) / "hub" / "checkpoints" / Path(url).name


def put_torchvision(env: dict, url: str, state: dict) -> Path:
    path = torchvision_file(env, url)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    return path


def put_timm(env: dict, hf_hub_id: str, state: dict) -> Path:
    """`state` as the `model.safetensors` of Hugging Face repository `hf_hub_id` (e.g. timm/test_resnet.r160_in1k)."""
    repo = Path(env["HF_HOME"]) / "hub" / ("models--" + hf_hub_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(SNAPSHOT)
    (repo / "snapshots" / SNAPSHOT).mkdir(parents=True, exist_ok=True)
    path = repo / "snapshots" / SNAPSHOT / "model.safetensors"
    save_file({key: value.contiguous() for key, value in state.items()}, path)
    return path
