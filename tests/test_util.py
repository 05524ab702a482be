"""util: counts in words, as every log line and error writes them."""

from ddptrain.util import counted


def test_a_count_takes_its_noun_in_the_number_it_needs():
    """'5 epoches in metrics.jsonl' was the refusal of an existing --out: a hard 'ch' takes an 's'."""
    words = [counted(n, noun) for n, noun in ((5, "epoch"), (1, "epoch"), (2, "batch"), (2, "process"), (3, "class"))]
    assert words == ["5 epochs", "1 epoch", "2 batches", "2 processes", "3 classes"]
    assert counted(2, "loader worker") == "2 loader workers" and counted(0, "unreadable image") == "0 unreadable images"
    assert counted(2, "person", "people") == "2 people"
