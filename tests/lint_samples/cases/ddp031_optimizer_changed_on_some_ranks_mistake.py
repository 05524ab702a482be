"""ddptrain lint sample ddp031_optimizer_changed_on_some_ranks: the mistake (lines marked `# expect:` get exactly those findings)."""
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
if dist.get_rank() == 0 and os.path.exists("last.pt"):
    state = torch.load("last.pt", map_location="cuda", weights_only=True)
    optimizer.load_state_dict(state["optimizer"])  # expect: DDP031
for step in range(10):
    loss = model(torch.randn(4, 8, device="cuda")).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
dist.destroy_process_group()
