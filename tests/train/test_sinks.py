from ddptrain.train.sinks import MetricsLog


def test_truncate_after_keeps_each_epoch_once(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for epoch in range(3):
        log.append({"epoch": epoch})
    log.truncate_after(0)  # the checkpoint says epoch 0 is the last one done
    log.append({"epoch": 1})
    assert (tmp_path / "metrics.jsonl").read_text().splitlines() == ['{"epoch": 0}', '{"epoch": 1}']


def test_no_thread_starts_once_training_runs(tmp_path):
    """DataLoader workers fork at each loader's first pass; a thread starting then can deadlock the new worker
    inside the fork (python/cpython#112275 on Python <= 3.11.7). So the TensorBoard writer's thread starts with
    the sinks, and progress bars and training points start none."""
    import logging
    import threading

    from ddptrain.logs import LOGGER
    from ddptrain.train.progress import EpochPlace, progress_bar
    from ddptrain.train.sinks import RunSinks

    handlers = list(logging.getLogger(LOGGER).handlers)
    level = logging.getLogger(LOGGER).level
    logging.getLogger(LOGGER).setLevel(logging.INFO)  # as setup_logging leaves it on rank 0
    sinks = RunSinks(tmp_path / "run", epochs=2, progress_every=1e-6)  # a timed line after every step
    try:
        sinks.start(last_complete_epoch=-1, resumed_step=0)
        before = {t.ident for t in threading.enumerate()}
        progress = sinks.epoch_progress(EpochPlace(0, 2, 4, 0, 0, 8))
        for step in (1, 2, 3, 4):
            progress.step(step, data_wait_frac=0.1)
            progress(step, loss=1.0, lr=0.1, images_per_sec=10.0)
        progress.close()
        progress_bar(4, 0, 2, enabled=True).close()
        assert {t.ident for t in threading.enumerate()} == before
    finally:
        sinks.close()
        logging.getLogger(LOGGER).setLevel(level)
    assert list((tmp_path / "run" / "tb").glob("events.out.tfevents.*"))  # the points were written
    assert logging.getLogger(LOGGER).handlers == handlers  # train.log's handler leaves with the sinks
    lines = [line for line in (tmp_path / "run" / "train.log").read_text().splitlines() if ": step " in line]
    assert len(lines) == 4 and "epoch 1/2 100%: step 4/4 (global 4)  loss 1.0000  lr 0.1" in lines[-1]


def _epoch_line(tmp_path, classes: int) -> str:
    """The console line RunSinks writes at the end of an epoch evaluated on `classes` classes."""
    import logging

    from ddptrain.logs import LOGGER
    from ddptrain.train.loop import EpochStats
    from ddptrain.train.metrics import EvalResult
    from ddptrain.train.sinks import RunSinks
    from ddptrain.train.timing import RankTiming

    level = logging.getLogger(LOGGER).level
    logging.getLogger(LOGGER).setLevel(logging.INFO)
    sinks = RunSinks(tmp_path / f"run{classes}", epochs=1)
    try:
        sinks.start(last_complete_epoch=-1, resumed_step=0)
        result = EvalResult(10, 0, 0.5, 0.9, 1.2, [1] * classes, [2] * classes)
        rank = RankTiming(0, 2, 1.0, 0.1, 0.8, 0.1, 1, 100.0, None, None, 2)
        stats = EpochStats(1.0, 2, 10.0, 1.0, 0.1, 0, 0.1, ranks=[rank])
        sinks.epoch_end({"epoch": 0, "step": 2}, result, stats, workers=1)
    finally:
        sinks.close()
        logging.getLogger(LOGGER).setLevel(level)
    return (tmp_path / f"run{classes}" / "train.log").read_text()


def test_the_epoch_line_leaves_out_top5_where_five_guesses_cover_every_class(tmp_path):
    assert "val_top1 0.5000  (10 images)" in _epoch_line(tmp_path, classes=5)  # top-5 of 5 classes is always 1
    assert "val_top1 0.5000  val_top5 0.9000  (10 images)" in _epoch_line(tmp_path, classes=6)
