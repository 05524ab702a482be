"""ddptrain lint sample ddp015_a_cache_written_while_the_main_process_goes_first: the fixed; `ddptrain lint` finds nothing here."""
import os
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.utils.data import Dataset


@contextmanager
def main_first(local_rank):
    """Rank 0 runs the block first; the others wait, then run it and find what it wrote."""
    if local_rank not in (-1, 0):
        dist.barrier()
    yield
    if local_rank == 0:
        dist.barrier()


class Labels(Dataset):
    def __init__(self, path):
        cache = path + ".cache"
        if os.path.exists(cache):
            self.labels = torch.load(cache, weights_only=True)
        else:
            self.labels = self.cache_labels(path, cache)

    def cache_labels(self, path, cache):
        labels = torch.arange(10)
        torch.save(labels, cache)
        return labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.labels[index]


if __name__ == "__main__":
    dist.init_process_group("gloo")
    local_rank = int(os.environ["LOCAL_RANK"])
    with main_first(local_rank):
        dataset = Labels("train.txt")
