"""ddptrain lint sample ddp015_a_save_after_a_return_the_call_takes: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def convert(model, output, return_model=True):
    converted = rebuild(model)
    if return_model:
        return converted
    torch.save(converted, output)  # expect: DDP015
    return None


dist.init_process_group("gloo")
model = DDP(build())
train(model)
convert(model.module, "converted.model", return_model=False)  # every rank writes the file
