"""ddptrain lint sample ddp006_gpu_0_by_its_index: the mistake (lines marked `# expect:` get exactly those findings)."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

if __name__ == "__main__":
    # torch.cuda.set_device(opt.local_rank)
    torch.cuda.set_device(0)  # expect: DDP006
    dist.init_process_group(backend="nccl", init_method="env://")
    net = torch.nn.Linear(4, 2).cuda(0)  # expect: DDP006
    model = DistributedDataParallel(net, device_ids=[torch.cuda.current_device()])
