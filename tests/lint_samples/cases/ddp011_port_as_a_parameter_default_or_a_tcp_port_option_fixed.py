"""ddptrain lint sample ddp011_port_as_a_parameter_default_or_a_tcp_port_option: the fixed; `ddptrain lint` finds nothing here."""
import argparse
import os

import torch.distributed as dist


def init_distributed(port=40111, rank=None, world_size=None):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)  # every caller passes the port it was given
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tcp_port", type=int, default=None, help="default: the launcher's MASTER_PORT")
    parser.add_argument("--main_port", type=int, default=None)
    args = parser.parse_args()
    port = args.tcp_port or int(os.environ["MASTER_PORT"])
    init_distributed(port, rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
