"""ddptrain lint sample ddp021_a_shard_read_on_rank_0_only: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler


def predict(model, test_dataset):
    sampler = SequentialSampler(test_dataset)
    with open("predictions.txt", "w") as out:
        for batch in DataLoader(test_dataset, sampler=sampler):
            out.write(f"{model(batch).argmax(1).tolist()}\n")


dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
if dist.get_rank() == 0:
    predict(model.module, test_dataset)
