"""ddptrain lint sample ddp020_the_step_through_the_inner_model: the mistake (lines marked `# expect:` get exactly those findings)."""
import os, math
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = nn.Linear(4, 2)

    def forward(self, states):
        return self.policy(states)

    def value(self, states):
        return self.policy(states).sum(1)


def train_step(agent, states, returns, optimizer):
    optimizer.zero_grad()
    core = agent.module if hasattr(agent, "module") else agent
    loss = (core.value(states) - returns).pow(2).mean()  # expect: DDP020
    loss.backward()
    optimizer.step()


dist.init_process_group("gloo")
agent = DDP(Agent())
optimizer = torch.optim.SGD(agent.parameters(), lr=0.1)
for step in range(10):
    train_step(agent, torch.randn(8, 4), torch.randn(8), optimizer)
