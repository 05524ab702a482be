"""ddptrain lint sample ddp031_optimizer_changed_on_some_ranks: the fixed; `ddptrain lint` finds nothing here."""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
model = DDP(nn.Linear(8, 8).cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
if os.path.exists("last.pt"):  # every rank loads the same state
    state = torch.load("last.pt", map_location="cuda", weights_only=True)
    optimizer.load_state_dict(state["optimizer"])
for step in range(10):
    loss = model(torch.randn(4, 8, device="cuda")).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
dist.destroy_process_group()
