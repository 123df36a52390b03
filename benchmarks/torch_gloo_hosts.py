"""torch.distributed/gloo allreduce across hosts with the anchors' own
method: runs ../shared/bench/torch_gloo.py's per-rank measurement under
torchrun (env:// rendezvous) instead of its single-host process spawning.

    torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d \\
      --rdzv-endpoint HOST:PORT benchmarks/torch_gloo_hosts.py \\
      --anchors DIR -s 4,64M -b 1.0 -l torch-gloo-2hosts
"""

import argparse
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anchors", required=True,
                    help="folder holding torch_gloo.py")
    ap.add_argument("-s", type=str, default=None)
    ap.add_argument("-b", type=float, default=1.0)
    ap.add_argument("-l", type=str, default="torch-gloo-hosts")
    args = ap.parse_args()
    sys.path.insert(0, args.anchors)
    import torch_gloo

    args.n = int(os.environ["WORLD_SIZE"])
    args.sizes = ([torch_gloo.parse_size(s) for s in args.s.split(",")]
                  if args.s else torch_gloo.DEFAULT_SIZES)
    torch_gloo.worker(int(os.environ["RANK"]), args, "env://")


if __name__ == "__main__":
    main()
