"""ddptrain lint sample ddp013_the_model_moved_by_the_global_rank: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class Trainer:
    def __init__(self, model):
        dist.init_process_group("nccl")
        self.local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(self.local_rank)
        self.rank = dist.get_rank()
        self.model = model

    def wrap(self):
        self.model.to(self.local_rank)
        self.model = DDP(self.model, device_ids=[self.local_rank])


Trainer(nn.Linear(2, 2)).wrap()
