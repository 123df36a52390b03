"""Rank 0 submits a tensor rank 1 never submits: a warning names the missing
rank, then the tensor fails on rank 0 and the job goes on."""

import time

import torch

import horovod.torch as hvd

hvd.init()
r = hvd.rank()
if r == 0:
    try:
        hvd.allreduce(torch.ones(2), name="only_on_rank0")
        raise AssertionError("stalled tensor should fail")
    except hvd.HorovodInternalError as e:
        assert "not submitted by ranks [1]" in str(e), e
else:
    time.sleep(5)  # past the stall shutdown time, so only rank 0's tensor stalls
hvd.barrier()
y = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after")
assert y.tolist() == [2.0, 2.0]
print("stall OK on rank %d" % r)
hvd.shutdown()
