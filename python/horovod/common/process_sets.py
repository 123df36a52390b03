"""Process sets: subsets of ranks that run collectives among themselves."""

import operator
from typing import List, Optional, Sequence


def integer_ranks(ranks, what):
    """`ranks` as Python ints; a ValueError naming `what` and the list
    when one is not an integer (int() would take 1.5 as rank 1)."""
    try:
        return [operator.index(r) for r in ranks]
    except TypeError:
        raise ValueError("%s must be integers, got %r" % (what, ranks)) \
            from None


class ProcessSet:
    """A subset of ranks. Register it with ``hvd.init(process_sets=[...])``
    or ``hvd.add_process_set``; every rank must register the same sets in
    the same order."""

    def __init__(self, ranks_or_comm: Sequence[int]):
        if hasattr(ranks_or_comm, "Get_group"):  # an mpi4py communicator
            raise ValueError(
                "process sets from MPI communicators need the MPI backend, "
                "which this build does not use; pass a list of ranks")
        self.ranks: Optional[List[int]] = sorted(
            integer_ranks(ranks_or_comm, "process set ranks"))
        self.process_set_id: Optional[int] = None
        self._basics = None

    def _check(self):
        if self.process_set_id is None or self._basics is None:
            raise ValueError("process set is not registered: pass it to "
                             "hvd.init(process_sets=...) or hvd.add_process_set")

    def size(self) -> int:
        self._check()
        return len(self.ranks)

    def rank(self) -> int:
        """This process's rank within the set (-1 if not a member)."""
        self._check()
        r = self._basics.rank()
        return self.ranks.index(r) if r in self.ranks else -1

    def included(self) -> bool:
        self._check()
        return self._basics.rank() in self.ranks

    def __repr__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (
            self.process_set_id, self.ranks)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0
