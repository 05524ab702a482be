"""timm's train.py args.yaml given as --config: recognised, refused in one line that holds a ddptrain command for its
recipe — a command ddptrain's own parser takes, with the values meant the same way — and what does not carry over."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from ddptrain.cli import build_parser, main, train_config
from ddptrain.config.timmargs import is_timm_args

TIMM_ARGS = Path(__file__).parent / "timm_args.yaml"  # timm's README command, as its train.py wrote it


def _refusal(config: Path, capsys) -> str:
    assert main(["train", "--config", str(config)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def _command(said: str) -> list:
    """The ddptrain command the refusal holds."""
    start = said.index(": ddptrain train ") + 2
    end = said.index(" — not carried over") if " — not carried over" in said else said.index(". Put those")
    return shlex.split(said[start:end])


def _parsed(command: list, tmp_path: Path):
    assert command[:2] == ["ddptrain", "train"]
    flags = command[2:]
    flags[flags.index("--data") + 1] = str(tmp_path)  # timm's /data/imagenet is not here; the parse needs none
    return train_config(build_parser().parse_args(["train", *flags]))


def test_timms_args_yaml_is_refused_with_a_command_ddptrain_takes_for_its_recipe(tmp_path, capsys):
    said = _refusal(TIMM_ARGS, capsys)
    assert said.startswith(f"ddptrain train: error: {TIMM_ARGS} is the args.yaml timm's train.py wrote")
    cfg = _parsed(_command(said), tmp_path)
    assert cfg.model.name == "timm:resnet50"
    assert cfg.optim.optimizer == "nesterov"  # timm's "sgd" is Nesterov's momentum
    assert (cfg.optim.lr, cfg.optim.momentum, cfg.optim.weight_decay) == (0.05, 0.9, 2e-5)
    assert (cfg.optim.epochs, cfg.optim.warmup_epochs, cfg.optim.min_lr_ratio) == (200, 5, 0)
    assert (cfg.optim.batch_size, cfg.optim.label_smoothing, cfg.optim.amp) == (128, 0.1, "fp16")
    assert (cfg.data.auto_augment, cfg.data.augment_magnitude, cfg.data.random_erasing) == ("randaugment", 9, 0.6)
    not_carried = said.split(" — not carried over (no equivalent here): ")[1]
    for left in ("jsd_loss true", "aug_splits 3", "split_bn true", "resplit true", "remode pixel", "-mstd0.5-inc1"):
        assert left in not_carried, left
    assert "color_jitter" not in not_carried  # timm applies no colour jitter with an --aa policy


def test_a_sqrt_scaled_base_rate_is_named_not_turned_into_a_rate(tmp_path, capsys):
    """timm scales lr_base by the square root of the global batch for AdamW: no --lr-base (linear here) stands for it."""
    args = yaml.safe_load(TIMM_ARGS.read_text())
    args.update(opt="adamw", lr=None, lr_base=5e-4, model_ema=True, model_ema_decay=0.99996, mixup=0.8, cutmix=1.0)
    deit = tmp_path / "args.yaml"
    deit.write_text(yaml.safe_dump(args))
    said = _refusal(deit, capsys)
    cfg = _parsed(_command(said), tmp_path)
    assert (cfg.optim.optimizer, cfg.optim.lr, cfg.optim.lr_base) == ("adamw", 1e-3, None)  # ddptrain's default lr
    assert (cfg.optim.ema_decay, cfg.optim.ema_warmup, cfg.data.mixup, cfg.data.cutmix) == (0.99996, False, 0.8, 1.0)
    assert "lr_base 0.0005 with sqrt scaling" in said and "give --lr" in said


def test_a_ddptrain_config_with_timms_option_names_is_not_taken_for_timms(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    mine.write_text("data: /x\nmodel: timm:resnet18\naa: randaugment\nreprob: 0.2\n")
    assert not is_timm_args(yaml.safe_load(mine.read_text()))
    assert main(["train", "--config", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "timm's train.py" not in err and "aa -> auto_augment" in err  # the usual did-you-mean for each name


def test_values_with_spaces_and_shell_characters_are_quoted_in_the_command(tmp_path, capsys):
    args = yaml.safe_load(TIMM_ARGS.read_text())
    folder = tmp_path / "my photos; rm -rf ~"
    folder.mkdir()
    args.update(data=str(folder), output="runs/$(whoami)")
    odd = tmp_path / "args.yaml"
    odd.write_text(yaml.safe_dump(args))
    command = _command(_refusal(odd, capsys))
    assert command[command.index("--data") + 1] == str(folder)
    assert command[command.index("--out") + 1] == "runs/$(whoami)"
