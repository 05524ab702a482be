"""ddptrain lint sample ddp029_clipping_over_fsdp_shards: the fixed; `ddptrain lint` finds nothing here."""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl")
model = FSDP(nn.Linear(8, 8).cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(10):
    loss = model(torch.randn(4, 8, device="cuda")).pow(2).mean()
    loss.backward()
    model.clip_grad_norm_(1.0)  # FSDP reduces the norm over every rank's shard
    optimizer.step()
    optimizer.zero_grad()
dist.destroy_process_group()
