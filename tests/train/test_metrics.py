import torch

from ddptrain.runtime import dist
from ddptrain.train.metrics import EvalTotals


def test_exact_counts_and_per_class(monkeypatch):
    monkeypatch.setattr(dist, "all_reduce_sum", lambda t: t)  # one process: the sum is itself
    totals = EvalTotals(num_classes=3, device=torch.device("cpu"))
    logits = torch.tensor([[3.0, 2.0, 1.0], [0.0, 1.0, 2.0], [1.0, 3.0, 2.0]])
    labels = torch.tensor([0, 1, 2])
    totals.update(logits, labels, torch.tensor(6.0))
    totals.add_skipped(2)
    result = totals.reduce()
    assert result.samples == 3 and result.skipped == 2
    assert result.top1 == 1 / 3 and result.top5 == 1.0 and result.loss == 2.0
    assert result.per_class(["a", "b", "c"])["a"] == {"correct": 1, "count": 1, "acc": 1.0}
    assert result.per_class_count == [1, 1, 1]
    # true class 1 was predicted as 2, true class 2 as 1
    assert result.confusion == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]


def test_many_classes_keep_per_class_counts_without_a_confusion_matrix(monkeypatch):
    monkeypatch.setattr(dist, "all_reduce_sum", lambda t: t)
    n = 1500  # a 1500 x 1500 matrix per evaluation would be wasteful; 21k classes would need gigabytes
    totals = EvalTotals(num_classes=n, device=torch.device("cpu"))
    assert totals.sums.numel() == 5 + 2 * n
    logits = torch.zeros(3, n)
    logits[0, 7] = logits[1, 9] = logits[2, 3] = 1.0
    totals.update(logits, torch.tensor([7, 8, 3]), torch.tensor(0.0))
    result = totals.reduce()
    assert result.confusion is None and result.top1 == 2 / 3
    assert (result.per_class_correct[7], result.per_class_correct[8], result.per_class_correct[3]) == (1, 0, 1)
    assert sum(result.per_class_count) == 3
