"""--batch-size auto: the search, and where it is refused (no GPU here: the tries themselves run in
benchmarks/gpu_check.sh)."""

from __future__ import annotations

import pytest
import torch

from ddptrain.config import Config
from ddptrain.errors import ConfigError
from ddptrain.train.autobatch import AUTO, batch_for_the_data, find_batch_size, largest_fitting
from ddptrain.train.precision import resolve_precision

from ..conftest import run_cli
from ..dist_harness import run_single


@pytest.mark.parametrize("limit", [1, 2, 3, 37, 64, 100, 4095, 4096])
def test_the_search_finds_the_largest_batch_that_fits_in_few_tries(limit):
    tried = []

    def fits(batch: int) -> bool:
        tried.append(batch)
        return batch <= limit

    assert largest_fitting(fits) == limit
    assert len(tried) <= 2 * 13 + 1  # doubling to 4096, then bisecting the last gap
    assert len(set(tried)) == len(tried)  # no batch is tried twice


def test_nothing_fits_is_zero_and_the_cap_holds():
    assert largest_fitting(lambda batch: False) == 0
    assert largest_fitting(lambda batch: True, cap=48) == 48


@pytest.mark.parametrize(
    "images, world, accum, batch",
    [(3072, 1, 1, 3072), (3072, 2, 1, 1536), (3073, 2, 2, 768), (100, 8, 1, 12), (5, 8, 1, 1)],
)
def test_the_search_stops_where_a_batch_would_leave_an_epoch_without_a_step(images, world, accum, batch):
    # 3072 images on one H200 fitted 3,322 ResNet-50 images per process, and the run then refused its own batch
    assert batch_for_the_data(images, world, accum) == batch
    assert (images // world) // (batch * accum) >= 1 or batch == 1


def test_auto_is_a_word_for_the_batch_size_and_other_words_are_refused():
    assert Config.from_flat({"batch_size": "auto", "data": "x"}).optim.batch_size == AUTO
    with pytest.raises(ConfigError, match="batch_size must be a whole number, not 'lots'"):
        Config.from_flat({"batch_size": "lots", "data": "x"})


def _on_cpu(rt):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        find_batch_size(model, optimizer, resolve_precision("off", rt.device), rt, 32, 2, "ddp")
    except ConfigError as error:
        return str(error)
    return "no error"


def test_on_cpu_it_says_it_needs_a_gpu():
    assert "on cpu there is no device memory to fill: give a number" in run_single(_on_cpu)


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--device", "cpu"], "with --device cpu there is no device memory to fill"),
        (["--strategy", "fsdp"], "under --strategy fsdp every forward gathers from every process"),
        ([], "this run is on the CPU: give a number"),
    ],
)
def test_auto_is_refused_before_launch_where_it_cannot_work(tiny_shapes, tmp_path, flags, says):
    if not flags and torch.cuda.is_available():
        pytest.skip("this machine has a GPU: auto would search")
    proc = run_cli(
        ["train", "--data", tiny_shapes, "--out", tmp_path / "run", "--batch-size", "auto", *flags], check=False
    )
    assert proc.returncode != 0 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "run").exists()
