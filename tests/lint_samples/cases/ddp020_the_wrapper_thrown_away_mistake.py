"""ddptrain lint sample ddp020_the_wrapper_thrown_away: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = nn.Linear(8, 2).cuda()
model = DDP(model, device_ids=[local_rank])
model = model.module  # expect: DDP020
optimizer = torch.optim.AdamW(model.parameters())
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if dist.get_rank() == 0:
    torch.save(model.state_dict(), "model.pt")
