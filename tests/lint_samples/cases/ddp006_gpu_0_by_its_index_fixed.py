"""ddptrain lint sample ddp006_gpu_0_by_its_index: the fixed; `ddptrain lint` finds nothing here."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

if __name__ == "__main__":
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend="nccl", init_method="env://")
    net = torch.nn.Linear(4, 2).cuda()
    model = DistributedDataParallel(net, device_ids=[torch.cuda.current_device()])
