"""HorovodBasics: init/shutdown and the job's topology, shared by every
framework adapter. Holds the one engine of this process."""

import atexit
import os
import threading

from horovod.common.process_sets import (ProcessSet, global_process_set,
                                         integer_ranks)

_NOT_INITIALIZED = "Horovod has not been initialized; use hvd.init()."


class HorovodBasics:
    def __init__(self):
        self._engine = None
        self._generation = 0
        self._lock = threading.Lock()
        self._process_sets = {0: global_process_set}
        self._engine_listeners = []
        self._driver = None  # horovodrun's elastic driver, when it runs us
        atexit.register(self.shutdown)

    # -- lifecycle ----------------------------------------------------------
    def init(self, comm=None, process_sets=None):
        if comm is not None and not isinstance(comm, (list, tuple)):
            raise ValueError("init(comm=...) with an MPI communicator needs the "
                             "MPI backend, which this build does not use")
        with self._lock:
            if self._engine is not None:
                return
            started = True
            from horovod import _core
            from horovod.common.driver_client import DriverClient
            if self._driver is None:
                self._driver = DriverClient.from_environment()
            if self._driver is not None:
                self._engine = self._start_elastic(_core)
            else:
                self._engine = _core.Engine.start(self._generation)
                self._generation += 1
            global_process_set.ranks = list(range(self._engine.size()))
            global_process_set._basics = self
            for listener in self._engine_listeners:
                listener(self._engine)
        if started and comm is not None:
            self._check_comm_ranks(comm)
        for ps in process_sets or []:
            self.add_process_set(ps)

    def _check_comm_ranks(self, comm):
        """init(comm=[ranks]) makes upstream's job of those ranks alone
        (an empty list: of every rank); here a job is the ranks launched,
        so the list must name each of them once. Else the engine just
        started is shut down (every rank passes the same list) and a
        ValueError says what to do instead."""
        if len(comm) == 0:
            return  # upstream's default: every rank
        size, rank = self._engine.size(), self._engine.rank()
        try:
            ranks = sorted(integer_ranks(comm, "comm"))
        except ValueError:
            ranks = None
        if ranks == list(range(size)):
            return
        self.shutdown()
        raise ValueError(
            "init(comm=%r) on rank %d: a list of ranks must name every rank "
            "of the job (0 to %d) once; a job here is the ranks launched, "
            "so launch only those wanted, or use process sets for subsets"
            % (list(comm), rank, size - 1))

    # A round's members can die between the driver's answer and the
    # engine's rendezvous; the survivors then join the next round.
    _ELASTIC_ATTEMPTS = 5

    def _start_elastic(self, core):
        error = None
        for _ in range(self._ELASTIC_ATTEMPTS):
            self._driver.join(os.environ.get("HOROVOD_BIND_ADDR"))
            generation = self._generation
            self._generation += 1
            try:
                return core.Engine.start(generation)
            except RuntimeError as e:  # bad settings (ValueError) propagate
                error = e
        raise error

    def is_elastic(self):
        """Whether horovodrun's elastic mode started this process."""
        return self._driver is not None

    def host_updates(self):
        """Rank 0's question to horovodrun's elastic driver: whether the
        job's hosts changed since this round formed, as {"changed",
        "skip_sync"}; None when no elastic driver runs the job."""
        if self._driver is None:
            return None
        return self._driver.host_updates()

    def shutdown(self):
        with self._lock:
            if self._engine is not None:
                for listener in self._engine_listeners:
                    listener(None)
            engine, self._engine = self._engine, None
            for pid, ps in list(self._process_sets.items()):
                if pid != 0:
                    ps.process_set_id = None
                    del self._process_sets[pid]
        if engine is not None:
            engine.shutdown()

    def add_engine_listener(self, listener):
        """listener(engine) runs now if an engine is running, after each
        init with the new engine, and with None before each shutdown:
        framework kernel libraries bind to the engine through it
        (Engine.framework_api) and let go of it before it is gone."""
        with self._lock:
            self._engine_listeners.append(listener)
            if self._engine is not None:
                listener(self._engine)

    def is_initialized(self):
        return self._engine is not None

    @property
    def engine(self):
        e = self._engine
        if e is None:
            raise ValueError(_NOT_INITIALIZED)
        return e

    # -- topology -----------------------------------------------------------
    def size(self):
        return self.engine.size()

    def rank(self):
        return self.engine.rank()

    def local_size(self):
        return self.engine.local_size()

    def local_rank(self):
        return self.engine.local_rank()

    def cross_size(self):
        return self.engine.cross_size()

    def cross_rank(self):
        return self.engine.cross_rank()

    def is_homogeneous(self):
        return self.engine.is_homogeneous()

    # -- build facts --------------------------------------------------------
    def mpi_threads_supported(self):
        self.engine
        return False

    def mpi_enabled(self):
        return False

    def mpi_built(self):
        return False

    def gloo_enabled(self):
        return False

    def gloo_built(self):
        return False

    def nccl_built(self):
        return 0

    def ddl_built(self):
        return False

    def ccl_built(self):
        return False

    def cuda_built(self):
        return False

    def rocm_built(self):
        return False

    # -- timeline -------------------------------------------------------------
    def start_timeline(self, file_path, mark_cycles=False):
        """Starts recording a Chrome trace of this job into `file_path`
        (rank 0 writes it; elsewhere this does nothing). A timeline already
        being recorded is finished first."""
        if not file_path:
            raise ValueError("start_timeline needs a file path")
        self.engine.start_timeline(str(file_path), bool(mark_cycles))

    def stop_timeline(self):
        """Finishes the timeline file; it stays a complete trace."""
        self.engine.stop_timeline()

    # -- metrics --------------------------------------------------------------
    def metrics(self):
        """Where this rank's engine spent its time since init, and the work
        that time moved, as a dict (cumulative: subtract two snapshots to
        look at an interval):

        - ``cycles``, ``responses``, ``tensors``, ``bytes``: response lists
          executed, collectives run (fused tensors count once), tensors
          and their bytes;
        - ``cache_hits``, ``cache_misses``: requests named by their
          response-cache slot (to rank 0, or on the ready board every rank
          of one host shares) or sent to rank 0 in full;
        - ``board_overdue``: of those posted on the ready board, the ones
          that waited out its patience (20 ms) for the other ranks and went
          to rank 0: this rank submitted them that much earlier;
        - the background loop's seconds by phase, which add up to the time
          it ran: ``idle_s`` (nothing submitted), ``negotiate_s``
          (submitted work waiting for the other ranks and rank 0's answer),
          ``bookkeeping_s`` (messages, coordinator, queue, completing
          handles), ``copy_s`` (fusion buffer), ``transfer_s`` (moving and
          reducing data);
        - ``wait_s``: seconds threads spent blocked waiting on handles.
        """
        return self.engine.metrics()

    # -- process sets -------------------------------------------------------
    def add_process_set(self, process_set):
        if not isinstance(process_set, ProcessSet):
            process_set = ProcessSet(process_set)
        if process_set.process_set_id is not None:
            raise ValueError("process set %r is already registered" % process_set)
        from horovod.common.ops import engine_call
        pid = engine_call(self.engine.add_process_set, process_set.ranks)
        process_set.process_set_id = pid
        process_set._basics = self
        self._process_sets[pid] = process_set
        return process_set

    def process_set_by_id(self, process_set_id):
        """The registered ProcessSet with this id, or None."""
        return self._process_sets.get(process_set_id)

    def remove_process_set(self, process_set):
        if process_set.process_set_id in (None, 0):
            raise ValueError("cannot remove %r" % process_set)
        from horovod.common.ops import engine_call
        engine_call(self.engine.remove_process_set, process_set.process_set_id)
        self._process_sets.pop(process_set.process_set_id, None)
        process_set.process_set_id = None
        return True
