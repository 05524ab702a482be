from ddptrain.train.sinks import MetricsLog


def test_truncate_after_keeps_each_epoch_once(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for epoch in range(3):
        log.append({"epoch": epoch})
    log.truncate_after(0)  # the checkpoint says epoch 0 is the last one done
    log.append({"epoch": 1})
    assert (tmp_path / "metrics.jsonl").read_text().splitlines() == ['{"epoch": 0}', '{"epoch": 1}']
