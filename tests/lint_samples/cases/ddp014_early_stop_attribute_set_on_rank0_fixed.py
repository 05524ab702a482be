"""ddptrain lint sample ddp014_early_stop_attribute_set_on_rank0: the fixed; `ddptrain lint` finds nothing here."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.stop = False
        self.best, self.bad_epochs = 0.0, 0

    def validate(self, epoch):
        accuracy = evaluate(self.model)
        if dist.get_rank() == 0:
            if accuracy > self.best:
                self.best, self.bad_epochs = accuracy, 0
            else:
                self.bad_epochs += 1
            self.stop = self.bad_epochs >= 5
        decision = [self.stop]
        dist.broadcast_object_list(decision, src=0)  # every rank leaves the loop at the same epoch
        self.stop = decision[0]

    def fit(self, epochs):
        for epoch in range(epochs):
            self.loader.sampler.set_epoch(epoch)
            train_one_epoch(self.model, self.loader)
            self.validate(epoch)
            if self.stop:
                break
