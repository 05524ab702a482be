"""Models of the user's own: a file or a module and a factory, its arguments, the rates it takes, what it declares
of its input, and a clear error for each way it can go wrong."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from ddptrain.config import Config
from ddptrain.config.files import build_config
from ddptrain.errors import ConfigError
from ddptrain.models import build_configured, build_model, declared_preprocessing, head_name
from ddptrain.models.custom import ModelSourceError

FACTORIES = """
from torch import nn


def build(num_classes, width=4, drop_path_rate=0.0):
    net = nn.Sequential(nn.Conv2d(3, width, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, num_classes))
    net.drop_path_rate = drop_path_rate
    return net


build.pretrained_cfg = {"input_size": (3, 48, 48), "mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25),
                       "interpolation": "bicubic", "crop_pct": 0.95}


def sized(num_classes, img_size):
    net = nn.Linear(3 * img_size * img_size, num_classes)
    net.img_size = img_size
    return net


def anything(**kwargs):
    net = nn.Linear(2, kwargs["num_classes"])
    net.given = kwargs
    return net


def not_a_model(num_classes):
    return {"num_classes": num_classes}


def broken(num_classes):
    raise RuntimeError("width must be even")


class Net(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4, 8), nn.Linear(8, num_classes))


def fixed_ten():
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 10))


def no_linear():
    return nn.Conv2d(3, 10, 1)


def forwards(**kwargs):
    return Net(**kwargs)


NOT_CALLABLE = 3
"""


@pytest.fixture
def model_file(tmp_path) -> Path:
    path = tmp_path / "their_models.py"
    path.write_text(textwrap.dedent(FACTORIES))
    return path


def spec(path: Path, factory: str) -> str:
    return f"{path}:{factory}"


def test_a_factory_in_a_file_gets_num_classes_and_the_model_kwargs(model_file):
    model = build_model(spec(model_file, "build"), 5, kwargs={"width": 6})
    assert model[-1].out_features == 5 and model[0].out_channels == 6
    assert isinstance(build_model(spec(model_file, "Net"), 3), torch.nn.Module)  # a class is a factory too


def test_img_size_reaches_a_factory_that_takes_it_and_the_users_value_wins(model_file):
    assert build_model(spec(model_file, "sized"), 2, img_size=8).img_size == 8
    assert build_model(spec(model_file, "sized"), 2, img_size=8, kwargs={"img_size": 4}).img_size == 4


def test_rates_go_by_the_name_the_factory_gives_them_and_are_refused_when_it_has_none(model_file):
    assert build_model(spec(model_file, "build"), 2, rates={"drop_path": 0.2, "dropout": 0.0}).drop_path_rate == 0.2
    assert build_model(spec(model_file, "anything"), 2, rates={"dropout": 0.3}).given["drop_rate"] == 0.3
    with pytest.raises(ModelSourceError, match=r"--dropout: .* takes no drop_rate or dropout argument"):
        build_model(spec(model_file, "build"), 2, rates={"dropout": 0.1})
    assert build_model(spec(model_file, "build"), 2, rates={"dropout": 0.0})  # zero: nothing passed


@pytest.mark.parametrize(
    "factory, kwargs, message",
    [
        (
            "nosuch",
            None,
            r"has no 'nosuch'; it defines Net, anything, broken, build, fixed_ten, forwards, no_linear",
        ),
        ("no_linear", None, r"takes no num_classes argument and has no Linear layer to give 2 outputs"),
        ("NOT_CALLABLE", None, r"'NOT_CALLABLE' is a int, not a function or class"),
        ("not_a_model", None, r"returned a dict, not a torch.nn.Module"),
        ("broken", None, r"raised RuntimeError: width must be even"),
        ("build", {"depth": 3}, r"calling it with depth=3, num_classes=2 failed: .*unexpected keyword argument"),
    ],
)
def test_each_way_a_factory_goes_wrong_is_named(model_file, factory, kwargs, message):
    with pytest.raises(ModelSourceError, match=message):
        build_model(spec(model_file, factory), 2, kwargs=kwargs)


def test_a_file_that_fails_to_import_or_is_missing_says_so(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import no_such_package_here\n")
    with pytest.raises(ModelSourceError, match=r"importing model file .*bad.py failed: ModuleNotFoundError"):
        build_model(f"{bad}:build", 2)
    with pytest.raises(ModelSourceError, match=r"model file .*gone.py does not exist on this machine"):
        build_model(f"{tmp_path / 'gone.py'}:build", 2)
    with pytest.raises(ModelSourceError, match=r"cannot import model module 'no_such_pkg.models'"):
        build_model("no_such_pkg.models:build", 2)


def test_two_files_of_the_same_name_stay_apart(tmp_path):
    for name, classes in (("a", 2), ("b", 3)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.py").write_text(
            f"from torch import nn\n\ndef build(num_classes):\n    return nn.Linear(1, {classes})\n"
        )
    assert build_model(f"{tmp_path / 'a' / 'model.py'}:build", 9).out_features == 2
    assert build_model(f"{tmp_path / 'b' / 'model.py'}:build", 9).out_features == 3


def test_a_module_on_the_path_is_a_factory_source(model_file, monkeypatch):
    monkeypatch.syspath_prepend(str(model_file.parent))
    monkeypatch.delitem(sys.modules, "their_models", raising=False)
    assert build_model("their_models:build", 4)[-1].out_features == 4


def test_the_factorys_declared_input_is_the_runs_default_preprocessing(model_file):
    assert declared_preprocessing(spec(model_file, "build")) == {
        "img_size": 48,
        "mean": (0.5, 0.5, 0.5),
        "std": (0.25, 0.25, 0.25),
        "interpolation": "bicubic",
        "crop_fraction": 0.95,
    }
    assert declared_preprocessing(spec(model_file, "sized")) == {}


def test_head_name_names_the_head_when_the_last_layer_is_not_found_alone(model_file):
    model = build_model(spec(model_file, "Net"), 3)
    assert head_name(model, 3) == "head.2"
    assert head_name(model, 3, "head") == "head"
    with pytest.raises(ConfigError, match=r"--head-name haed: .* no module of that name with weights; did you mean"):
        head_name(model, 3, "haed")


def test_the_config_records_the_file_by_its_absolute_path_and_the_kwargs_as_a_mapping(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = build_config({"data": "d", "model": "models/net.py:build", "model_kwargs": "width=32,sizes=[1,2],act=relu"})
    assert cfg.model.name == f"{tmp_path}/models/net.py:build"
    assert cfg.model.kwargs == {"width": 32, "sizes": [1, 2], "act": "relu"}
    again = Config.from_flat(cfg.to_flat()).validate()
    assert again.model == cfg.model
    with pytest.raises(ConfigError, match=r"model_kwargs must be keyword arguments such as width=32"):
        Config.from_flat({"model_kwargs": "width"})
    with pytest.raises(ConfigError, match=r"--pretrained takes torchvision and timm models; for .* pass --weights"):
        build_config({"data": "d", "model": "net.py:build", "pretrained": True})


def test_drop_path_and_dropout_reach_timm_and_torchvision_models():
    cfg = Config().model
    cfg.name, cfg.drop_path, cfg.dropout = "timm:test_vit", 0.2, 0.1
    vit = build_configured(cfg, 3, 32)
    # timm's schedule: the rate grows with depth up to --drop-path in the last block
    assert max(m.drop_prob for m in vit.modules() if type(m).__name__ == "DropPath") == pytest.approx(0.2)
    assert vit.head_drop.p == 0.1
    cfg.name = "convnext_tiny"
    cfg.dropout = 0.0
    convnext = build_configured(cfg, 3)
    assert max(m.p for m in convnext.modules() if type(m).__name__ == "StochasticDepth") == pytest.approx(0.2)
    cfg.name = "resnet18"
    with pytest.raises(ConfigError, match=r"torchvision's resnet18 does not take stochastic_depth_prob"):
        build_configured(cfg, 3)


def test_a_factory_without_num_classes_gets_its_last_linear_layer_replaced_for_the_classes(model_file, caplog):
    caplog.set_level("INFO", logger="ddptrain")
    model = build_model(spec(model_file, "fixed_ten"), 3)
    assert model[-1].out_features == 3 and model[-1].in_features == 8 and model[1].out_features == 8
    assert "its last Linear layer '3' (8 -> 10) is replaced by one with 3 outputs" in caplog.text
    assert build_model(spec(model_file, "fixed_ten"), 10)[-1].out_features == 10  # already fits: kept


def test_a_rate_a_kwargs_factory_passes_on_to_a_class_without_it_says_to_use_model_kwargs(model_file):
    with pytest.raises(
        ModelSourceError,
        match=r"takes \*\*kwargs and passes them on to something that does not take "
        r"dropout as drop_rate .* give the model's own argument with --model-kwargs",
    ):
        build_model(spec(model_file, "forwards"), 2, rates={"dropout": 0.1})
