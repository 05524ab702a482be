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
    assert (cfg.data.path, cfg.optim.epochs, cfg.optim.lr, cfg.model.sync_bn, cfg.optim.batch_size) == (
        "/d",
        3,
        0.1,
        True,
        32,
    )


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
    assert not Config.from_flat({"data": "x"}).launch.uses_launcher
    assert Config.from_flat({"data": "x", "nproc": 2}).launch.uses_launcher
    assert Config.from_flat({"data": "x", "max_restarts": 1}).launch.uses_launcher


def test_example_configs_are_valid():
    from pathlib import Path

    from ddptrain.config import build_config

    folder = Path(__file__).resolve().parents[1] / "configs"
    configs = sorted(folder.glob("*.yaml"))
    assert len(configs) >= 2
    for path in configs:
        cfg = build_config({"data": "some/folder"}, str(path))  # flags override the file
        assert cfg.data.path == "some/folder" and cfg.optim.epochs >= 1, path.name


def test_nested_yaml_is_the_same_config_as_flat(tmp_path):
    (tmp_path / "flat.yaml").write_text("data: /d\nlr: 0.2\nepochs: 4\nnproc: 2\nout: runs/x\n")
    (tmp_path / "nested.yaml").write_text(
        "data:\n  path: /d\noptim:\n  lr: 0.2\n  epochs: 4\nlaunch:\n  nproc: 2\nrun:\n  out: runs/x\n"
    )
    flat, nested = (build_config({}, str(tmp_path / name)) for name in ("flat.yaml", "nested.yaml"))
    assert flat == nested and nested.optim.lr == 0.2 and nested.launch.nproc == 2


def test_an_option_given_flat_and_nested_is_refused(tmp_path):
    (tmp_path / "c.yaml").write_text("lr: 0.2\noptim:\n  lr: 0.3\n")
    with pytest.raises(ConfigError, match="'lr' is given twice"):
        build_config({"data": "d"}, str(tmp_path / "c.yaml"))


def test_saved_config_yaml_stays_flat_with_the_same_keys(tmp_path):
    import yaml

    save_yaml(build_config({"data": "/d"}), tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert {"data", "lr", "nproc", "out", "model", "sync_bn", "dist_timeout"} <= set(saved)
    assert all(not isinstance(v, dict) for v in saved.values())


def test_node_local_options_are_left_out_of_what_nodes_must_share():
    cfg = build_config({"data": "/d", "out": "runs/a", "node_rank": 0, "iface": "lo", "lr": 0.3})
    shared = cfg.shared_values()
    assert shared["lr"] == 0.3 and not {"data", "out", "node_rank", "iface", "weights", "resume"} & set(shared)


def test_report_roles_live_in_the_report():
    from ddptrain.tools.report import HIDDEN, LEGEND, TABLE, report_role

    assert report_role("sync_bn") == LEGEND and report_role("lr") == LEGEND
    assert report_role("workers") == TABLE and report_role("data") == TABLE
    assert report_role("out") == HIDDEN and report_role("master_port") == HIDDEN
    assert report_role("from_a_newer_version") == LEGEND


def test_per_channel_values_are_typed_and_config_yaml_says_its_version(tmp_path):
    from ddptrain.config import CONFIG_VERSION, load_yaml, save_yaml

    cfg = build_config({"data": "d", "mean": "0.4, 0.4,0.4", "std": [0.2, 0.2, 0.2]})
    assert cfg.data.mean == (0.4, 0.4, 0.4) and cfg.data.std == (0.2, 0.2, 0.2)
    with pytest.raises(ConfigError, match="mean must be three numbers, one per RGB channel"):
        build_config({"data": "d", "mean": "0.4,0.4"})
    with pytest.raises(ConfigError, match="--std must be three numbers above 0"):
        build_config({"data": "d", "std": "0.2,0,0.2"})
    save_yaml(cfg, tmp_path / "config.yaml")
    text = (tmp_path / "config.yaml").read_text()
    assert text.startswith(f"config_version: {CONFIG_VERSION}\n") and "mean:\n- 0.4\n" in text
    assert load_yaml(tmp_path / "config.yaml")["mean"] == (0.4, 0.4, 0.4)
    # format 1 (no version key): per-channel texts, --log-to naming tensorboard
    (tmp_path / "old.yaml").write_text("data: d\nmean: 0.5,0.5,0.5\nlog_to: tensorboard,csv\n")
    old = load_yaml(tmp_path / "old.yaml")
    assert (old["mean"], old["log_to"]) == ((0.5, 0.5, 0.5), "csv")
    (tmp_path / "new.yaml").write_text(f"config_version: {CONFIG_VERSION + 1}\ndata: d\n")
    with pytest.raises(ConfigError, match=rf"new\.yaml is a config of format {CONFIG_VERSION + 1}; this ddptrain"):
        load_yaml(tmp_path / "new.yaml")


def test_a_checkpoint_config_from_another_version_loads_leniently():
    cfg = Config.from_flat({"data": "/d", "lr": "0.1", "option_of_the_future": 1}, "old.pt", strict=False)
    assert cfg.optim.lr == 0.1
    with pytest.raises(ConfigError, match="unknown option 'option_of_the_future'"):
        Config.from_flat({"option_of_the_future": 1})


def test_a_config_written_for_another_tool_gets_every_unknown_option_at_once(tmp_path):
    """A timm train.py args.yaml has ~130 options: all unknown ones are named in one error, with the ddptrain option
    another tool's name stands for, and no misleading look-alikes (bn_momentum is not momentum)."""
    (tmp_path / "timm.yaml").write_text(
        "aa: rand-m9\nsmoothing: 0.1\nopt: sgd\ngrad_accum_steps: 2\nbn_momentum: null\ndata_dir: /images\nepochs: 30\n"
    )
    with pytest.raises(ConfigError) as caught:
        build_config({}, str(tmp_path / "timm.yaml"))
    message = str(caught.value)
    assert message.startswith(f"6 options in {tmp_path / 'timm.yaml'} are not ddptrain options: aa, smoothing, opt")
    for hint in (
        "smoothing -> label_smoothing",
        "opt -> optimizer",
        "grad_accum_steps -> grad_accum",
        "data_dir -> data",
        "aa -> auto_augment",  # timm's name for the augmentation policy (its values are written differently)
    ):
        assert hint in message
    assert "bn_momentum ->" not in message


def test_every_unusable_value_is_named_at_once(tmp_path):
    (tmp_path / "c.yaml").write_text("amp: false\nlr: null\nval_split: val\nepochs: 3\n")
    with pytest.raises(
        ConfigError,
        match="3 values cannot be used: amp must be one of auto, bf16, fp16, off, not "
        "False; lr must have a value .default: 0.001.; val_split must be a number",
    ):
        build_config({"data": "d"}, str(tmp_path / "c.yaml"))


def test_a_relative_path_a_config_file_meant_from_its_own_folder_is_refused_naming_both(tmp_path, monkeypatch):
    """configs/ants.yaml saying `data: ../data`, run from the project folder: "data folder ../data does not exist",
    with nothing said of the file's folder, where it is."""
    from ddptrain.config.files import build_config

    (tmp_path / "data").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "ants.yaml").write_text("data: ../data\nepochs: 1\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        build_config({}, "configs/ants.yaml")
    assert str(refused.value) == (
        f"config file configs/ants.yaml: data ../data is read from the current folder ({tmp_path}), where it does not "
        f"exist; from the file's folder it is {tmp_path / 'data'}: write that path, or run from configs"
    )
    assert build_config({"data": "data"}, "configs/ants.yaml").data.path == "data"  # a flag given instead: read
    monkeypatch.chdir(tmp_path / "configs")
    assert build_config({}, "ants.yaml").data.path == "../data"  # there from here: read as written


def test_paths_in_a_config_file_starting_with_a_tilde_are_in_the_home_folder(tmp_path, monkeypatch):
    """`data: ~/datasets/flowers` in a YAML file was read as a folder named '~' ("does not exist"), and `out: ~/runs`
    would have made one in the current folder: the shell expands `~` on the command line, YAML does not."""
    from ddptrain.config.files import load_yaml

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = tmp_path / "c.yaml"
    config.write_text("data: ~/datasets/flowers\nout: ~/runs/a\nweights: ~/w.pth\nlabel_key: ~cls\nepochs: 2\n")
    loaded = load_yaml(config)
    home = tmp_path / "home"
    assert (loaded["data"], loaded["out"], loaded["weights"]) == tuple(
        str(home / p) for p in ("datasets/flowers", "runs/a", "w.pth")
    )
    assert loaded["label_key"] == "~cls" and loaded["epochs"] == 2  # other options as written
