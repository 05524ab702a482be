"""ddptrain lint sample ddp015_a_dist_switch_set_to_on_or_off: the fixed; `ddptrain lint` finds nothing here."""

import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


args = parse_args()
if args.dist == "ON":
    dist.init_process_group("gloo")
    model = DDP(build())
for epoch in range(10):
    train(model)
    if args.dist == "OFF":
        torch.save(model.state_dict(), "last.pt")  # one process: one writer
    elif dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "last.pt")
