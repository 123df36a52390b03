"""join with uneven step counts, and static + dynamic process sets (run by
checks.py, one pytest case per check)."""

import torch

import horovod.torch as hvd
from common import close

ps01 = hvd.ProcessSet([0, 1])
hvd.init(process_sets=[ps01])
r, n = hvd.rank(), hvd.size()


def check_join_with_uneven_steps_contributes_zeros():
    # Rank k runs k+2 steps; joined ranks contribute zeros.
    for step in range(r + 2):
        y = hvd.allreduce(torch.ones(4), op=hvd.Sum, name="step.%d" % step)
        active = sum(1 for k in range(n) if step < k + 2)
        close(y, torch.full((4,), float(active)))
    last = hvd.join()
    assert last == n - 1, last
    # The job goes on after join.
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))


def check_static_process_set_from_init():
    assert ps01.ranks == [0, 1]
    if r in (0, 1):
        assert ps01.included() and ps01.size() == 2 and ps01.rank() == r
        y = hvd.allreduce(torch.full((3,), float(r + 1)), op=hvd.Sum,
                          process_set=ps01, name="ps01.ar")
        close(y, torch.full((3,), 3.0))
        g = hvd.allgather(torch.full((1,), float(r)), name="ps01.ag",
                          process_set=ps01)
        close(g, torch.tensor([0.0, 1.0]))
        b = hvd.broadcast(torch.full((2,), float(r)), 1, name="ps01.bc",
                          process_set=ps01)
        close(b, torch.ones(2))
        hvd.barrier(process_set=ps01)
    else:
        assert not ps01.included() and ps01.rank() == -1


def check_non_member_is_refused():
    if r not in ps01.ranks:
        try:
            hvd.allreduce(torch.ones(1), process_set=ps01)
            raise AssertionError("non-member allreduce should fail")
        except ValueError as e:
            assert "not a member" in str(e) and "rank %d" % r in str(e), e


def check_dynamic_process_set_add_use_remove():
    members = sorted({n - 1, 1})
    ps = hvd.add_process_set(members)
    assert ps.process_set_id not in (None, 0)
    if r in members:
        y = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="dyn.ar",
                          process_set=ps)
        close(y, torch.full((2,), float(len(members))))
        x = hvd.reducescatter(torch.ones(len(members) * 2, 1), op=hvd.Sum,
                              name="dyn.rs", process_set=ps)
        close(x, torch.full((2, 1), float(len(members))))
    hvd.remove_process_set(ps)
    assert ps.process_set_id is None
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))
