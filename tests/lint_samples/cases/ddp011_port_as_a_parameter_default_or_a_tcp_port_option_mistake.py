"""ddptrain lint sample ddp011_port_as_a_parameter_default_or_a_tcp_port_option: the mistake (lines marked `# expect:` get exactly those findings)."""
import argparse
import os

import torch.distributed as dist


def init_distributed(port=40111, rank=None, world_size=None):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)  # expect: DDP011
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tcp_port", type=int, default=18888, help="tcp port for distributed training")  # expect: DDP011
    parser.add_argument("--main_port", type=int, default=10001)  # expect: DDP011
    args = parser.parse_args()
    init_distributed(rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
