"""ddptrain lint sample ddp007_state_dict_of_an_attribute_saved_through_a_name: the mistake (lines marked `# expect:` get exactly those findings)."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class Trainer:
    def __init__(self, model, gpu_id):
        self.model = DDP(model, device_ids=[gpu_id])

    def save(self, epoch):
        if dist.get_rank() == 0:
            ckp = self.model.state_dict()  # expect: DDP007
            torch.save(ckp, "checkpoint.pt")
