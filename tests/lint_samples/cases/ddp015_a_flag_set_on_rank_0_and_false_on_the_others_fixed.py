"""ddptrain lint sample ddp015_a_flag_set_on_rank_0_and_false_on_the_others: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class Runner:
    def __init__(self, model, num_gpus, print_log=True):
        self.model = model
        if num_gpus == 1:
            self.print_log = print_log
        if num_gpus > 1:
            if dist.get_rank() == 0:
                self.print_log = print_log
            else:
                self.print_log = False

    def run(self, iterations, log_interval=10):
        for it in range(iterations):
            self.step()
            if self.print_log and it % log_interval == 0:
                torch.save(self.model.module.state_dict(), f"model_{it}.pt")


dist.init_process_group("gloo")
Runner(DDP(build()), dist.get_world_size()).run(1000)
