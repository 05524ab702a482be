"""ddptrain lint sample ddp001_dataparallel_in_the_else_of_a_config_switch: the fixed; `ddptrain lint` finds nothing here."""
import os
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

cfg = SimpleNamespace(
    DISTRIBUTED="LOCAL_RANK" in os.environ, LOCAL_RANK=int(os.environ.get("LOCAL_RANK", 0)), SYNC_BN=False
)
if cfg.DISTRIBUTED:
    torch.cuda.set_device(cfg.LOCAL_RANK)
    dist.init_process_group("nccl")

model = torch.nn.Linear(4, 2)
if cfg.DISTRIBUTED:
    model = DistributedDataParallel(model.cuda(), device_ids=[cfg.LOCAL_RANK])
else:
    model = torch.nn.DataParallel(model).cuda()  # one process: DataParallel is its multi-GPU path
