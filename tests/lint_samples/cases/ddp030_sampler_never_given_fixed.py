"""ddptrain lint sample ddp030_sampler_never_given: the fixed; `ddptrain lint` finds nothing here."""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
dataset = TensorDataset(torch.randn(64, 8), torch.randn(64, 8))
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=8, sampler=sampler)  # each rank its own part
model = DDP(nn.Linear(8, 8).cuda(), device_ids=[local_rank])
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
dist.destroy_process_group()
