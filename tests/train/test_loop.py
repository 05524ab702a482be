import math

import torch
from torch import nn

from ddptrain.train.optim import LrSchedule, param_groups
from ddptrain.train.precision import resolve_precision


def test_schedule_warms_up_then_decays_to_the_floor():
    schedule = LrSchedule(base_lr=1.0, epochs=10, warmup_epochs=2, min_ratio=0.1)
    assert schedule.factor(1.0) == 0.5
    assert schedule.factor(2.0) == 1.0
    assert math.isclose(schedule.factor(10.0), 0.1)
    values = [schedule.factor(e / 4) for e in range(8, 41)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_schedule_is_the_same_curve_for_any_steps_per_epoch():
    schedule = LrSchedule(1.0, 4, 1, 0.0)
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    assert schedule.apply(opt, 1, 640, 640) == schedule.apply(opt, 1, 320, 320)  # end of epoch 2 either way
    assert schedule.apply(opt, 1, 160, 640) == schedule.apply(opt, 1, 80, 320)  # a quarter into it


def test_no_weight_decay_on_norm_and_bias():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4, 2))
    decay, no_decay = param_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert {p.ndim for p in decay["params"]} == {2, 4}
    assert len(no_decay["params"]) == 4  # conv bias, bn weight + bias, linear bias


def test_amp_auto_is_off_on_cpu():
    precision = resolve_precision("auto", torch.device("cpu"))
    assert precision.dtype is None and precision.scaler is None and precision.name == "off"
    assert resolve_precision("bf16", torch.device("cpu")).dtype is torch.bfloat16


def test_non_finite_loss_is_an_error_naming_the_step():
    import pytest

    from ddptrain.errors import NonFiniteLossError
    from ddptrain.runtime import dist
    from ddptrain.runtime.env import DistEnv
    from ddptrain.train.monitor import LossWindow, advance
    from ddptrain.train.state import EpochPosition

    rt = dist.setup(DistEnv(), "cpu", 60)  # a real one-member gloo group
    try:
        position = EpochPosition()
        window = LossWindow(rt.device)
        window.add(torch.tensor(2.0), samples=3, skipped=1)
        totals = window.reduce(stop_wish=False, epoch=0, step=1, rank=0)
        assert (totals.loss, totals.stop) == (2.0, False)
        advance(position, totals, samples_done=3)
        assert (position.samples_done, position.loss_sum, position.loss_count, position.skipped) == (3, 6.0, 3.0, 1)
        assert window.sums.tolist() == [0.0] * 4  # the next window starts empty
        window.add(torch.tensor(2.0), samples=1, skipped=0)
        assert window.reduce(stop_wish=True, epoch=0, step=2, rank=0).stop
        window.add(torch.tensor(float("nan")), samples=3, skipped=0)
        with pytest.raises(NonFiniteLossError, match="epoch 2, step 7"):
            window.reduce(stop_wish=False, epoch=1, step=7, rank=0)
    finally:
        dist.cleanup()


def test_one_image_per_process_with_batch_norm_is_a_clear_error():
    import pytest

    from ddptrain.errors import ConfigError
    from ddptrain.train.loop import forward as _forward

    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 4), nn.BatchNorm1d(4)).train()
    with pytest.raises(ConfigError, match="cannot train on 1 image.*Raise --batch-size"):
        _forward(model, torch.zeros(1, 3, 2, 2))
    assert _forward(model, torch.zeros(2, 3, 2, 2)).shape == (2, 4)


def _two_steps(rt, compiled: bool) -> dict:
    from ddptrain.data.datasets import Batch
    from ddptrain.models import unwrap, wrap_ddp
    from ddptrain.train.loop import EpochPlan, StepSettings, train_one_epoch
    from ddptrain.train.optim import LrSchedule, build_optimizer

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    ddp = wrap_ddp(torch.compile(net, backend="eager") if compiled else net, rt.device)  # compiled, then wrapped
    batches = [
        Batch(torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8), torch.tensor([0, 1, 0, 1]), ()) for _ in range(2)
    ]
    train_one_epoch(
        ddp,
        batches,
        build_optimizer(ddp, "sgd", 0.1, 0.9, 0.0, rt.device),
        LrSchedule(0.1, 1, 0, 1),
        resolve_precision("off", rt.device),
        StepSettings(1, None, 1, False, 0.0),
        rt,
        EpochPlan(epoch=0, global_step=0),
    )
    return {k: v.detach().clone() for k, v in unwrap(ddp).state_dict().items()}


def test_a_compiled_model_trains_like_the_eager_one_and_saves_plain_keys():
    from ..dist_harness import run_single

    eager, compiled = run_single(_two_steps, False), run_single(_two_steps, True)
    assert list(compiled) == list(eager) and not any(k.startswith(("_orig_mod.", "module.")) for k in compiled)
    for name, value in eager.items():
        torch.testing.assert_close(compiled[name], value)
