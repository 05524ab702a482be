"""ddptrain lint sample ddp011_a_port_option_joined_into_the_address: the fixed; `ddptrain lint` finds nothing here."""
import argparse

import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--ip", default="127.0.0.1", type=str)
parser.add_argument("--port", default=None, type=str)  # given by each job: a free port
parser.add_argument("--rank", default=0, type=int)
parser.add_argument("--world-size", default=2, type=int)
args = parser.parse_args()

init_method = "tcp://" + args.ip + ":" + args.port
dist.init_process_group("gloo", init_method=init_method, rank=args.rank, world_size=args.world_size)
