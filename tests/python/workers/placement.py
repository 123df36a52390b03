"""Prints where this rank runs, as the engine sees it, then checks an
allreduce and an allgather across every rank (tests/python/test_multihost.py)."""

import json
import os
import socket
import sys

import torch

import horovod.torch as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
total = hvd.allreduce(torch.tensor([float(r)]), op=hvd.Sum).item()
hosts = hvd.allgather_object(socket.gethostname())
print("PLACE " + json.dumps({
    "rank": r, "size": n, "local_rank": hvd.local_rank(),
    "local_size": hvd.local_size(), "cross_rank": hvd.cross_rank(),
    "cross_size": hvd.cross_size(), "homogeneous": hvd.is_homogeneous(),
    "hostname": socket.gethostname(), "hosts": hosts, "sum": total,
    "cwd": os.getcwd(), "argv": sys.argv[1:]}), flush=True)
hvd.shutdown()
