"""Progress of a counted pass (validation, eval, shard) where stderr is not a terminal: timed lines, never a bar."""

from __future__ import annotations

import logging
import re
import threading

import pytest

from ddptrain.logs import LOGGER
from ddptrain.train.progress import CountProgress


@pytest.fixture
def lines(caplog):
    logger = logging.getLogger(LOGGER)
    caplog.set_level(logging.INFO, logger=LOGGER)
    propagate, logger.propagate = logger.propagate, False  # as setup_logging leaves it: records reach caplog once
    logger.addHandler(caplog.handler)
    yield lambda: [r.getMessage() for r in caplog.records if r.name == LOGGER]
    logger.removeHandler(caplog.handler)
    logger.propagate = propagate


def test_a_known_count_gives_done_total_share_rate_and_time_left(lines):
    before = {t.ident for t in threading.enumerate()}
    with CountProgress(4, "shard", "images", every_s=1e-9) as progress:
        for _ in range(4):
            progress.update()
        assert {t.ident for t in threading.enumerate()} == before  # no monitor thread while loaders may fork
    got = lines()
    assert len(got) == 4
    assert re.fullmatch(r"shard: 1/4 images \(25%\), [\d.]+ images/s, ends in ~\d+s", got[0]), got
    assert re.fullmatch(r"shard: 4/4 images \(100%\), [\d.]+ images/s, ends in ~0s", got[-1]), got


def test_a_stream_of_unknown_length_gives_its_count_and_rate(lines):
    with CountProgress(None, "eval", "batches", every_s=1e-9) as progress:
        progress.update(3)
    assert len(lines()) == 1 and re.fullmatch(r"eval: 3 batches, [\d.]+ batches/s", lines()[0]), lines()


def test_lines_come_no_more_often_than_asked(lines):
    with CountProgress(1000, "eval", "batches", every_s=3600) as progress:
        for _ in range(1000):
            progress.update()
    assert lines() == []


@pytest.mark.parametrize("every_s, enabled", [(0.0, True), (1e-9, False)])
def test_no_lines_when_switched_off_or_on_another_rank(lines, every_s, enabled):
    with CountProgress(3, "validation", "batches", every_s=every_s, enabled=enabled) as progress:
        for _ in range(3):
            progress.update()
    assert lines() == []
