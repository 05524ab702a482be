"""On resume, --grad-accum keeps the run's global batch when the number of processes changed."""

import pytest

from ddptrain.config import OptimConfig
from ddptrain.train.optim import resumed_grad_accum

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
