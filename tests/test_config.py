import argparse

import pytest

from ddptrain.config import Config, add_config_flags, build_config, save_yaml
from ddptrain.errors import ConfigError


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_config_flags(parser)
    return vars(parser.parse_args(argv))


def test_flags_override_yaml_which_overrides_defaults(tmp_path):
    (tmp_path / "c.yaml").write_text("data: /d\nepochs: 3\nlr: 0.5\n")
    cfg = build_config(_parse(["--lr", "0.1", "--sync-bn"]), str(tmp_path / "c.yaml"))
    assert (cfg.data, cfg.epochs, cfg.lr, cfg.sync_bn, cfg.batch_size) == ("/d", 3, 0.1, True, 32)


def test_boolean_flags_are_real_booleans():
    assert _parse(["--no-sync-bn"])["sync_bn"] is False  # unlike type=bool, which reads 'False' as true


def test_unknown_yaml_key_names_the_key_and_suggests(tmp_path):
    (tmp_path / "c.yaml").write_text("data: /d\nepoch: 3\n")
    with pytest.raises(ConfigError, match="'epoch'.*did you mean 'epochs'"):
        build_config({}, str(tmp_path / "c.yaml"))


def test_saved_config_reproduces_the_run(tmp_path):
    cfg = build_config({"data": "/d", "lr": 0.3, "clip_grad": 1.0})
    save_yaml(cfg, tmp_path / "config.yaml")
    assert build_config({}, str(tmp_path / "config.yaml")) == cfg


@pytest.mark.parametrize("bad", [{"val_split": 1.0}, {"batch_size": 0}, {"node_rank": 2, "nnodes": 2}, {}])
def test_invalid_values_are_rejected(bad):
    values = {"data": "/d", **bad} if bad else {}
    with pytest.raises(ConfigError):
        build_config(values)


def test_launcher_needed_only_for_several_processes():
    assert not Config(data="x").uses_launcher
    assert Config(data="x", nproc=2).uses_launcher and Config(data="x", max_restarts=1).uses_launcher


def test_example_configs_are_valid():
    from pathlib import Path

    from ddptrain.config import build_config

    folder = Path(__file__).resolve().parents[1] / "configs"
    configs = sorted(folder.glob("*.yaml"))
    assert len(configs) >= 2
    for path in configs:
        cfg = build_config({"data": "some/folder"}, str(path))  # flags override the file
        assert cfg.data == "some/folder" and cfg.epochs >= 1, path.name
