import logging

import pytest
import torch
import torchvision

from ddptrain.errors import ConfigError, WeightsError
from ddptrain.models import build_model, freeze_backbone, head_name, load_weights, strip_prefixes
from ddptrain.models.weights import read_model_weights


def _load_file(model, path, head="fc"):
    """--weights PATH: the file read as the trainer reads it, then fitted into the model."""
    return load_weights(model, read_model_weights(path), head, str(path))


def test_torchvision_and_timm_models_by_name():
    tv = build_model("resnet18", 3)
    assert head_name(tv, 3) == "fc" and tv.fc.out_features == 3
    timm_model = build_model("timm:resnet10t", 4)
    assert timm_model.eval()(torch.randn(1, 3, 32, 32)).shape == (1, 4)


def test_a_model_built_for_one_input_size_is_built_for_the_size_trained():
    """A ViT's position embedding has one entry per patch: at --img-size 32 it is built for 32 px."""
    images = torch.zeros(2, 3, 32, 32)
    assert build_model("timm:vit_small_patch16_224", 3, img_size=32)(images).shape == (2, 3)
    with pytest.raises(AssertionError, match="doesn't match model"):  # what the size argument prevents
        build_model("timm:vit_small_patch16_224", 3)(images)
    assert build_model("timm:test_resnet", 3, img_size=32)(images).shape == (2, 3)  # any size: built as it is
    assert build_model("resnet18", 3, img_size=32)(images).shape == (2, 3)


def test_a_timm_model_named_with_its_pretrained_tag_builds_and_a_wrong_tag_is_refused():
    model = build_model("timm:test_resnet.r160_in1k", 3)
    assert model.pretrained_cfg["tag"] == "r160_in1k"
    with pytest.raises(
        ConfigError, match="unknown timm model 'test_resnet.r999'. Did you mean: timm:test_resnet.r160_in1k"
    ):
        build_model("timm:test_resnet.r999", 3)


def test_unknown_names_suggest_the_closest():
    with pytest.raises(ConfigError, match="resnet18"):
        build_model("resnet19", 3)
    with pytest.raises(ConfigError, match="unknown timm model"):
        build_model("timm:no_such_net_at_all", 3)


def test_prefixes_from_ddp_and_compile_are_stripped():
    state = {"module._orig_mod.fc.weight": torch.zeros(1), "_orig_mod.module.conv.bias": torch.zeros(1)}
    assert set(strip_prefixes(state)) == {"fc.weight", "conv.bias"}


def test_head_of_another_size_is_reinitialised_and_named(tmp_path, caplog):
    source = torchvision.models.resnet18(num_classes=10)
    torch.save({f"module.{k}": v for k, v in source.state_dict().items()}, tmp_path / "w.pth")
    model = build_model("resnet18", 3)
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        reinit = _load_file(model, tmp_path / "w.pth")
    assert reinit == ["fc.bias", "fc.weight"]
    assert "re-initialised" in caplog.text
    assert torch.equal(model.conv1.weight, source.conv1.weight)


def test_a_lightning_checkpoint_of_a_module_holding_the_model_loads(tmp_path, caplog):
    """A LightningModule keeps the network as `self.model`: its .ckpt's keys all read `model.conv1.weight`, ...
    and --weights refused them as 'unexpected' and every key of the model 'missing'."""
    source = torchvision.models.resnet18(num_classes=10)
    state = {f"model.{k}": v for k, v in source.state_dict().items()}
    ckpt = {"epoch": 3, "pytorch-lightning_version": "2.4.0", "state_dict": state, "hyper_parameters": {"lr": 0.1}}
    torch.save(ckpt, tmp_path / "epoch=3.ckpt")
    model = build_model("resnet18", 3)
    with caplog.at_level(logging.INFO, logger="ddptrain"):
        assert _load_file(model, tmp_path / "epoch=3.ckpt") == ["fc.bias", "fc.weight"]
    assert torch.equal(model.layer4[1].conv2.weight, source.layer4[1].conv2.weight)
    assert "keys read without their prefix 'model.'" in caplog.text
    other = {**state, "criterion.weight": torch.ones(3)}  # keys under two holders: which is the model is not said
    torch.save({"state_dict": other}, tmp_path / "two.ckpt")
    with pytest.raises(WeightsError, match="unexpected: criterion.weight, model.bn1.bias"):
        _load_file(build_model("resnet18", 3), tmp_path / "two.ckpt")


def test_backbone_mismatch_lists_the_keys(tmp_path):
    torch.save(torchvision.models.resnet34(num_classes=3).state_dict(), tmp_path / "r34.pth")
    with pytest.raises(WeightsError, match="unexpected: layer1.2"):
        _load_file(build_model("resnet18", 3), tmp_path / "r34.pth")


def test_missing_weights_file_is_an_error_not_a_fresh_start(tmp_path):
    with pytest.raises(WeightsError, match="does not exist"):
        _load_file(build_model("resnet18", 3), tmp_path / "missing.pth")


def test_pickled_module_is_refused(tmp_path):
    torch.save(torchvision.models.resnet18(num_classes=3), tmp_path / "whole_model.pth")
    with pytest.raises(WeightsError, match="weights_only"):
        _load_file(build_model("resnet18", 3), tmp_path / "whole_model.pth")


def test_freeze_backbone_leaves_only_the_head_trainable():
    model = build_model("resnet18", 3)
    freeze_backbone(model, "fc")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"fc.weight", "fc.bias"}


@pytest.mark.parametrize(
    "name, said",
    [
        ("timm/resnet18.a1_in1k", "write --model timm:resnet18.a1_in1k"),
        ("hf-hub:timm/resnet18.a1_in1k", "write --model timm:resnet18.a1_in1k"),
        ("hf_hub:someone/net", r"not built by name here \(that would read the Hub\)"),
    ],
)
def test_a_model_named_as_the_hub_names_it_gets_the_name_to_write(name, said):
    """Model cards name timm's models `timm/NAME.TAG`: that was an 'unknown torchvision model' with the advice
    `--model timm:timm/...` (which timm does not build either), and `hf-hub:...` a module to install."""
    from ddptrain.checks import check_model_source

    for refuse in (lambda: check_model_source(name), lambda: build_model(name, 3)):
        with pytest.raises(ConfigError, match=said):
            refuse()
