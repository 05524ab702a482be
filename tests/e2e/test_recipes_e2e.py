"""Every recipe in configs/ parses, validates and trains: one tiny epoch with the recipe's own model
and settings — only the data, the image size, the batch size and the epoch count changed — pretrained weights
coming from caches filled here, with the network unreachable."""

from __future__ import annotations

from pathlib import Path

import pytest
import timm
import torchvision
import yaml

from ddptrain.config import build_config, load_yaml

from ..conftest import json_lines, read_metrics, run_cli, write_synthetic
from ..weights_cache import marked, offline_env, put_timm, put_torchvision

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RECIPES = sorted(path.name for path in CONFIGS.glob("*.yaml"))
# trained for a tiny epoch below; the others (cpu-fast: the demo's own recipe; flowers-resnet34: the fine-tune's
# model and optimizer from scratch) are parsed and validated
TRAINED = [
    "flowers-resnet34-finetune.yaml",
    "resnet50-scratch.yaml",
    "small-data-scratch.yaml",
    "vit-small-finetune.yaml",
]
SHRUNK = {"img_size": 32, "batch_size": 4, "epochs": 1, "workers": 0, "nproc": 1, "device": "cpu"}


def test_the_recipes_the_docs_name_are_there():
    assert set(TRAINED) <= set(RECIPES)


@pytest.mark.parametrize("recipe", RECIPES)
def test_each_recipe_validates_as_written(recipe):
    config = build_config({"data": "/data/anything"}, str(CONFIGS / recipe))
    assert config.optim.epochs >= 1


def _cache_pretrained(env: dict, model: str) -> None:
    """The recipe's pretrained file, as the library's own download would have left it (values made up)."""
    if model.startswith("timm:"):
        name = model[len("timm:") :]
        put_timm(env, timm.get_pretrained_cfg(name).hf_hub_id, marked(timm.create_model(name).state_dict()))
    else:
        weights = torchvision.models.get_model_weights(model).DEFAULT
        put_torchvision(env, weights.url, marked(torchvision.models.get_model(model).state_dict()))


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("recipe-data"), classes=2, per_class=10)


@pytest.mark.parametrize("recipe", TRAINED)
def test_each_recipe_trains_one_tiny_epoch(recipe, small_data, tmp_path):
    written = load_yaml(CONFIGS / recipe)
    env = offline_env(tmp_path)
    if written.get("pretrained"):
        _cache_pretrained(env, written["model"])
    flags = [item for key, value in SHRUNK.items() for item in (f"--{key.replace('_', '-')}", value)]
    out = tmp_path / "run"
    proc = run_cli(["train", "--config", CONFIGS / recipe, "--data", small_data, "--out", out, *flags], env_extra=env)
    if written.get("pretrained"):
        assert f"pretrained weights of {written['model']}:" in proc.stderr
    recorded = yaml.safe_load((out / "config.yaml").read_text())
    for key, value in written.items():  # the run used the recipe's settings, apart from what was shrunk
        if key not in SHRUNK and key != "out":
            assert recorded[key] == value, key
    metrics = read_metrics(out)
    assert len(metrics) == 1 and metrics[0]["val_samples"] > 0
    if written.get("ema_decay"):
        assert "val_top1_ema" in metrics[0]
    if not written.get("pretrained"):
        return
    # eval rebuilds the model (a ViT for the 32 px it was trained at) with the preprocessing the run recorded
    evaluated = json_lines(
        run_cli(["eval", "--checkpoint", out / "checkpoints" / "last.pt", "--data", small_data]).stdout
    )
    assert evaluated[0]["top1"] == metrics[0]["val_top1"]
