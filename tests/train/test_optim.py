"""The optimizer factory, layer decay and the schedules; on resume, --grad-accum keeps the run's global batch when the
number of processes changed and the command line's optimizer settings win."""

import dataclasses

import pytest
import timm
import torch
from torch import nn

from ddptrain.config import OptimConfig
from ddptrain.errors import ConfigError
from ddptrain.train.optim import (
    LrSchedule,
    apply_settings,
    build_optimizer,
    group_settings,
    param_groups,
    peak_lr,
    resumed_grad_accum,
    same_groups,
)

CPU = torch.device("cpu")

RUN = OptimConfig(batch_size=4, grad_accum=1)  # the recipe the run was started with


@pytest.fixture
def said(caplog):
    caplog.set_level("INFO", logger="ddptrain")
    return caplog


def test_a_run_that_lost_half_its_processes_accumulates_twice(said):
    assert resumed_grad_accum(RUN, RUN, saved_world=2, saved_global=8, world=1) == 2
    assert "resume on 1 process (the checkpoint's: 2): --grad-accum 1 -> 2 keeps the global batch at 8" in said.text


def test_a_later_resume_keeps_the_global_batch_the_checkpoint_records(said):
    # the checkpoint written on 1 process after the step above records the recipe as given (grad_accum 1) and 8
    assert resumed_grad_accum(RUN, RUN, saved_world=1, saved_global=8, world=1) == 2
    assert resumed_grad_accum(RUN, RUN, saved_world=1, saved_global=8, world=2) == 1  # the node came back
    assert "keeps the global batch at 8" in said.text


def test_another_grad_accum_on_the_command_line_is_the_users_choice(said):
    chosen = OptimConfig(batch_size=4, grad_accum=3)
    assert resumed_grad_accum(chosen, RUN, saved_world=1, saved_global=8, world=1) == 3
    assert "the global batch changes from 8 to 12 with --batch-size/--grad-accum" in said.text


def test_a_change_no_grad_accum_can_take_up_is_said(said):
    assert resumed_grad_accum(RUN, RUN, saved_world=4, saved_global=16, world=3) == 1
    assert "the global batch changes from 16 to 12 (--batch-size 4 x 3 processes does not divide 16)" in said.text


def test_an_older_checkpoint_without_a_recorded_global_batch_uses_its_recipe_and_world_size(said):
    assert resumed_grad_accum(RUN, RUN, saved_world=4, saved_global=0, world=2) == 2


def test_the_same_number_of_processes_changes_nothing(said):
    assert resumed_grad_accum(RUN, RUN, saved_world=2, saved_global=8, world=2) == 1
    assert said.text == ""


def test_lr_base_scales_with_the_global_batch():
    recipe = OptimConfig(lr=0.05, lr_base=0.1)
    assert peak_lr(recipe, 64) == pytest.approx(0.025) and peak_lr(recipe, 512) == pytest.approx(0.2)
    assert peak_lr(OptimConfig(lr=0.05), 512) == 0.05  # without --lr-base, --lr as given


def test_the_schedules_after_the_warmup():
    cosine = LrSchedule(1.0, epochs=11, warmup_epochs=1, min_ratio=0.0)
    linear = LrSchedule(1.0, epochs=11, warmup_epochs=1, min_ratio=0.0, kind="linear")
    step = LrSchedule(1.0, epochs=11, warmup_epochs=1, min_ratio=0.0, kind="step", decay_epochs=3, decay_rate=0.5)
    assert [round(s.factor(0.5), 3) for s in (cosine, linear, step)] == [0.5, 0.5, 0.5]  # the same warmup
    assert [round(s.factor(6.0), 3) for s in (cosine, linear, step)] == [0.5, 0.5, 0.5]  # 5 of 10 epochs; 1 decay
    assert linear.factor(3.5) == pytest.approx(0.75) and linear.factor(11) == pytest.approx(0.0)
    assert [step.factor(e) for e in (3.99, 4.0, 6.99, 7.0)] == [1.0, 0.5, 0.5, 0.25]  # at exact epoch marks


def test_a_resume_on_other_process_counts_stays_on_the_curve():
    """The LR is a function of the fraction of the epoch done over all ranks, not of a step count."""
    schedule, groups = LrSchedule(1.0, epochs=4, warmup_epochs=0, min_ratio=0.0, kind="linear"), [{"lr": 0.0}]
    optimizer = type("Optimizer", (), {"param_groups": groups})()
    one_process = schedule.apply(optimizer, epoch=1, samples_done=64, samples_per_epoch=128)
    two_processes = schedule.apply(optimizer, epoch=1, samples_done=2 * 32, samples_per_epoch=128)
    assert one_process == two_processes == pytest.approx(0.625) == groups[0]["lr"]


def _choices(name):
    return next(f for f in dataclasses.fields(OptimConfig) if f.name == name).metadata["choices"]


def test_every_offered_optimizer_builds_and_steps_without_decaying_norms():
    for name in _choices("optimizer"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
        optimizer = build_optimizer(model, name, 0.01, 0.9, 0.05, CPU)
        before = [p.detach().clone() for p in model.parameters()]
        model(torch.randn(2, 3, 6, 6)).sum().backward()
        optimizer.step()
        assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters())), name
        assert [g["weight_decay"] for g in optimizer.param_groups] == [0.05, 0.0], name


def test_sgd_is_torch_momentum_sgd_without_nesterov_and_nesterov_has_it():
    model = nn.Linear(2, 2)
    sgd, nesterov = (build_optimizer(model, name, 0.1, 0.8, 0.0, CPU) for name in ("sgd", "nesterov"))
    assert type(sgd) is torch.optim.SGD and not sgd.param_groups[0]["nesterov"]
    assert sgd.param_groups[0]["momentum"] == 0.8 and nesterov.param_groups[0]["nesterov"]


def test_a_vits_position_embedding_and_class_token_get_no_weight_decay():
    model = timm.create_model("test_vit", num_classes=3)
    decay, no_decay = param_groups(model, 0.05)
    exempt = {id(model.pos_embed), id(model.cls_token)}
    assert exempt <= {id(p) for p in no_decay["params"]} and not exempt & {id(p) for p in decay["params"]}


def test_layer_decay_scales_the_rate_from_the_head_down_and_the_schedule_applies_it():
    model = timm.create_model("test_vit", num_classes=3)
    optimizer = build_optimizer(model, "adamw", 1e-3, 0.9, 0.05, CPU, layer_decay=0.5)
    scale_of = {id(p): g["lr_scale"] for g in optimizer.param_groups for p in g["params"]}
    head, stem = scale_of[id(model.head.weight)], scale_of[id(model.patch_embed.proj.weight)]
    first_block, last_block = (scale_of[id(model.blocks[i].attn.qkv.weight)] for i in (0, -1))
    assert head == 1.0 and stem < first_block < last_block < head
    assert last_block == pytest.approx(0.5)  # one layer below the head
    LrSchedule(1e-3, epochs=2, warmup_epochs=0, min_ratio=0.0).apply(optimizer, 0, 0, 10)
    assert all(g["lr"] == pytest.approx(1e-3 * g["lr_scale"]) for g in optimizer.param_groups)
    assert {g["weight_decay"] for g in optimizer.param_groups if id(model.pos_embed) in map(id, g["params"])} == {0}


def test_layer_decay_on_a_model_without_layer_names_is_refused():
    with pytest.raises(ConfigError, match="--layer-decay needs a model that names its layers"):
        build_optimizer(nn.Linear(2, 2), "adamw", 1e-3, 0.9, 0.05, CPU, layer_decay=0.7)


def test_on_resume_the_command_lines_layer_decay_and_weight_decay_replace_the_saved_ones():
    model = timm.create_model("test_vit", num_classes=3)
    saved = build_optimizer(model, "adamw", 1e-3, 0.9, 0.05, CPU, layer_decay=0.5).state_dict()
    now = build_optimizer(model, "adamw", 1e-3, 0.9, 0.1, CPU, layer_decay=0.7)
    wanted = group_settings(now)
    assert same_groups(now, saved)
    now.load_state_dict(saved)
    changes = apply_settings(now, wanted)
    assert "weight_decay 0.05 -> 0.1" in changes and any(c.startswith("lr_scale 0.5 -> 0.7") for c in changes)
    assert group_settings(now) == wanted
    plain = build_optimizer(model, "adamw", 1e-3, 0.9, 0.1, CPU)
    assert not same_groups(plain, saved)  # --layer-decay dropped: other groups, the state starts fresh
