"""ddptrain lint sample ddp025_a_plain_state_loaded_into_the_wrapper: the mistake (lines marked `# expect:` get exactly those findings)."""
import os
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(nn.Linear(2, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if os.path.exists("last.pt"):
    checkpoint = torch.load("last.pt", weights_only=True)
    model.load_state_dict(checkpoint["net"])  # expect: DDP025
for epoch in range(3):
    model(torch.randn(4, 2)).sum().backward()
    optimizer.step()
    if dist.get_rank() == 0:
        torch.save({"net": model.module.state_dict(), "epoch": epoch}, "last.pt")
