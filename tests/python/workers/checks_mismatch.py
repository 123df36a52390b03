"""Ranks that disagree fail fast, on every rank: rank 0 and rank 1 each
block in a different operation, at least one of them a control operation
(barrier, join, add/remove_process_set), or both in operations the other
never submits. Each check asserts the error on both ranks within
LIMIT_S, naming what each rank waits in, and that the job still works
afterwards (run by checks.py with np=2)."""

import time

import torch

import horovod.torch as hvd
from common import close

LIMIT_S = 2.5

hvd.init()
r, n = hvd.rank(), hvd.size()
ps01 = hvd.add_process_set([0, 1])
spare = hvd.add_process_set([0])


def disagree(mine_on_0, mine_on_1, fragments):
    fn = mine_on_0 if r == 0 else mine_on_1
    start = time.monotonic()
    try:
        fn()
    except hvd.HorovodInternalError as e:
        took = time.monotonic() - start
        msg = str(e)
        assert took < LIMIT_S, "failed only after %.1f s: %s" % (took, msg)
        assert "can never match" in msg, msg
        for fragment in fragments:
            assert fragment in msg, "%r lacks %r" % (msg, fragment)
    else:
        raise AssertionError("rank %d's operation completed" % r)
    # The job goes on.
    hvd.barrier()
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))


def add_set():
    hvd.add_process_set([1])


def remove_set():
    hvd.remove_process_set(spare)


def allgather():
    hvd.allgather(torch.ones(1), name="x")


def allreduce():
    hvd.allreduce(torch.ones(1), name="y")


def check_barrier_against_add_process_set():
    disagree(hvd.barrier, add_set, ["rank 0 waits in barrier",
                                    "rank 1 waits in add_process_set of ranks [1]"])


def check_barrier_against_remove_process_set():
    disagree(hvd.barrier, remove_set,
             ["rank 0 waits in barrier",
              "rank 1 waits in remove_process_set of process set %d"
              % spare.process_set_id])


def check_barriers_of_different_process_sets():
    disagree(hvd.barrier, lambda: hvd.barrier(process_set=ps01),
             ["rank 0 waits in barrier",
              "rank 1 waits in barrier on process set %d" % ps01.process_set_id])


def check_join_against_add_process_set():
    disagree(hvd.join, add_set, ["rank 0 waits in join",
                                 "rank 1 waits in add_process_set"])


def check_join_against_remove_process_set():
    disagree(hvd.join, remove_set, ["rank 0 waits in join",
                                    "rank 1 waits in remove_process_set"])


def check_add_process_set_against_remove_process_set():
    disagree(add_set, remove_set, ["rank 0 waits in add_process_set",
                                   "rank 1 waits in remove_process_set"])


def check_barrier_against_allgather():
    # One rank left its loop early and waits in a barrier; the other waits
    # in the loop's allgather.
    disagree(allgather, hvd.barrier, ["rank 0 waits in allgather 'allgather.x'",
                                      "rank 1 waits in barrier"])


def check_barrier_against_allreduce():
    disagree(hvd.barrier, allreduce, ["rank 0 waits in barrier",
                                      "rank 1 waits in allreduce 'allreduce.y'"])


def check_add_process_set_against_allreduce():
    disagree(allreduce, add_set, ["rank 0 waits in allreduce 'allreduce.y'",
                                  "rank 1 waits in add_process_set"])


def check_two_different_tensors():
    disagree(allgather, allreduce, ["rank 0 waits in allgather",
                                    "rank 1 waits in allreduce"])


def check_add_process_set_of_different_ranks():
    # The same control operation with different arguments: a mismatch of
    # its arguments, failed as any other.
    fn = lambda: hvd.add_process_set([r])  # noqa: E731
    start = time.monotonic()
    try:
        fn()
        raise AssertionError("add_process_set of different ranks completed")
    except hvd.HorovodInternalError as e:
        assert time.monotonic() - start < LIMIT_S
        assert ("Mismatched add_process_set: rank 0 adds ranks [0], "
                "rank 1 adds ranks [1]") in str(e), e
    hvd.barrier()


def check_remove_process_set_of_different_sets():
    other = hvd.add_process_set([1])
    start = time.monotonic()
    try:
        hvd.remove_process_set(spare if r == 0 else other)
        raise AssertionError("remove_process_set of different sets completed")
    except hvd.HorovodInternalError as e:
        assert time.monotonic() - start < LIMIT_S
        assert "Mismatched remove_process_set" in str(e), e
    # Both sets are still there and usable.
    for ps in (spare, other):
        if r in ps.ranks:
            close(hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=ps),
                  torch.ones(1))
    hvd.remove_process_set(other)


def check_async_submission_before_a_barrier_still_works():
    # Not a mismatch: rank 1 submits without waiting, reaches the barrier,
    # and only then waits; rank 0 waits in the barrier first.
    if r == 1:
        h = hvd.allreduce_async(torch.ones(2), name="later", op=hvd.Sum)
        time.sleep(LIMIT_S)
        hvd.barrier()
        close(hvd.synchronize(h), torch.full((2,), float(n)))
    else:
        hvd.barrier()
        close(hvd.allreduce(torch.ones(2), name="later", op=hvd.Sum),
              torch.full((2,), float(n)))


def check_slow_rank_is_not_a_mismatch():
    if r == 1:
        time.sleep(LIMIT_S)
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))
    hvd.barrier()


def check_shutdown_against_barrier_ends_the_job_then_init_again():
    # One rank shutting down ends the job for all (as upstream); the other,
    # blocked in a barrier, hears of it at once. Both can init again.
    start = time.monotonic()
    if r == 0:
        hvd.shutdown()
    else:
        try:
            hvd.barrier()
            raise AssertionError("barrier completed after rank 0 shut down")
        except hvd.HorovodInternalError as e:
            assert time.monotonic() - start < LIMIT_S, e
        hvd.shutdown()
    hvd.init()
    close(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(n)))
