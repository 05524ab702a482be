import torch

from ddptrain.train.timing import AdviceOnce, RankTiming, StepTimer, advice, summarize


def _rank(rank, forward_s=1.0, wait_s=0.0, load_s=0.0, workers=2, mem=100.0, total=None, util=None, batches=11):
    return RankTiming(
        rank=rank,
        steps=max(1, batches - 1),
        elapsed_s=10.0,
        data_wait_s=wait_s,
        forward_s=forward_s,
        load_s=load_s,
        workers=workers,
        max_mem_mb=mem,
        mem_total_mb=total,
        gpu_util=util,
        batches=batches,
    )


def test_summary_fields():
    summary = summarize([_rank(0, wait_s=1.0, util=50.0), _rank(1, forward_s=2.0, wait_s=3.0, util=70.0)])
    assert summary["data_wait_frac"] == 0.2 and summary["data_wait_frac_max"] == 0.3
    assert summary["rank_work_s"] == [0.1, 0.2] and summary["step_time_spread"] == 1.0
    assert summary["step_time_s"] == 1.0 and summary["gpu_util"] == 60.0 and summary["max_mem_mb"] == 100.0
    assert "gpu_util" not in summarize([_rank(0)])  # absent without NVML, never an error


def test_balanced_ranks_get_no_advice():
    assert advice([_rank(0), _rank(1, forward_s=1.1)], workers=4) == {}


def test_each_problem_is_named_with_what_to_do():
    found = advice([_rank(0, wait_s=4.0, mem=75_000, total=80_000), _rank(1, forward_s=1.0, load_s=20.0)], 2)
    assert found["input_bound"].startswith("input-bound: rank 0 waited for data 40%")
    assert "raise --workers (now 2" in found["input_bound"]
    assert found["straggler"].startswith("straggler: rank 1 spends 1100 ms per step")  # (1 + 20/2) s / 10 steps
    assert "rank 0 peaked at 75000 of 80000 MiB" in found["memory"] and "--batch-size" in found["memory"]


def test_an_epoch_of_no_more_batches_than_workers_is_not_sent_to_raise_the_workers():
    # --batch-size auto on 3,072 photos (one H200, 14 workers): one batch an epoch, 88 % of it waiting for the one
    # worker that built it; more workers would have sat idle too
    found = advice([_rank(0, wait_s=8.8, batches=1, workers=14)], 14)["input_bound"]
    assert found.startswith("input-bound: rank 0 waited for data 88%")
    assert "with 1 batch an epoch and 14 loader workers" in found and "a smaller --batch-size" in found
    assert "raise --workers" not in found
    # one worker building two batches one after the other: a second worker would have built them side by side
    assert "raise --workers (now 1" in advice([_rank(0, wait_s=8.8, batches=2, workers=1)], 1)["input_bound"]


def test_the_timer_counts_every_batch_of_the_epoch_including_the_first():
    timer = StepTimer(torch.device("cpu"), 0)
    for step in range(3):
        with timer.data_wait():
            pass
        if step == 0:
            timer.restart()  # as the monitor does after the first step
    assert timer.finish(2).batches == 3


def test_a_straggler_is_sent_to_the_tool_that_can_see_its_device():
    on_cpu = advice([_rank(0), _rank(1, forward_s=1.0, load_s=20.0)], 2)["straggler"]
    assert "nvidia-smi" not in on_cpu and "CPU load" in on_cpu
    on_gpu = advice([_rank(0, total=80_000), _rank(1, forward_s=1.0, load_s=20.0, total=80_000)], 2)["straggler"]
    assert "nvidia-smi" in on_gpu


def test_tiny_differences_are_not_stragglers():
    assert "straggler" not in advice([_rank(0, forward_s=0.01), _rank(1, forward_s=0.05)], 2)  # 4 ms/step


def test_advice_is_shown_once_per_kind():
    once = AdviceOnce()
    assert once.new({"straggler": "a"}) == ["a"]
    assert once.new({"straggler": "b", "memory": "m"}) == ["m"]


def test_a_straggler_is_named_only_when_it_is_the_same_rank_two_epochs_running():
    slow_one, slow_zero = [_rank(0), _rank(1, forward_s=3.0)], [_rank(0, forward_s=3.0), _rank(1)]
    history: list = []
    assert "straggler" not in advice(slow_one, 2, history)  # first sighting
    assert "straggler" not in advice(slow_zero, 2, history)  # another rank: noise
    assert "straggler" in advice(slow_zero, 2, history)  # rank 0 again: consistent
