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
    from ddptrain.train.sinks import RunSinks, progress_bar

    handlers = list(logging.getLogger(LOGGER).handlers)
    sinks = RunSinks(tmp_path / "run", epochs=2)
    try:
        sinks.start(last_complete_epoch=-1, resumed_step=0)
        before = {t.ident for t in threading.enumerate()}
        progress = sinks.epoch_progress(steps=4, epoch=0, global_step=0)
        for step in (1, 2, 3, 4):
            progress(step, loss=1.0, lr=0.1, images_per_sec=10.0)
        progress.close()
        progress_bar(4, 0, 2, enabled=True).close()
        assert {t.ident for t in threading.enumerate()} == before
    finally:
        sinks.close()
    assert list((tmp_path / "run" / "tb").glob("events.out.tfevents.*"))  # the points were written
    assert logging.getLogger(LOGGER).handlers == handlers  # train.log's handler leaves with the sinks
