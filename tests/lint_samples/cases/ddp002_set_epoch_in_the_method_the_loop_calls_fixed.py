"""ddptrain lint sample ddp002_set_epoch_in_the_method_the_loop_calls: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
class Trainer:
    def _run_epoch(self, epoch):
        self.loader.sampler.set_epoch(epoch)
        for batch in self.loader:
            self.step(batch)
    def train(self):
        self.loader = DataLoader(ds, sampler=DistributedSampler(ds))
        for epoch in range(3):
            self._run_epoch(epoch)
