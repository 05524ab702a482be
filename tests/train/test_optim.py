"""On resume, --grad-accum keeps the run's global batch when the number of processes changed."""

import pytest

from ddptrain.config import OptimConfig
from ddptrain.train.optim import LrSchedule, peak_lr, resumed_grad_accum

RUN = OptimConfig(batch_size=4, grad_accum=1)  # the recipe the run was started with


@pytest.fixture
def said(caplog):
    caplog.set_level("INFO", logger="ddptrain")
    return caplog


def test_a_run_that_lost_half_its_processes_accumulates_twice(said):
    assert resumed_grad_accum(RUN, RUN, saved_world=2, saved_global=8, world=1) == 2
    assert "resume on 1 process(es) (the checkpoint's: 2): --grad-accum 1 -> 2 keeps the global batch at 8" in said.text


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
