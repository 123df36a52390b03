"""`ElasticRayExecutor`: an elastic Horovod job (hvd.elastic) whose workers
are Ray actors, one per slot of every Ray node (a slot: `cpus_per_slot`
CPUs, and `gpus_per_slot` GPUs with use_gpu).

It drives horovodrun's own elastic driver (horovod.runner.elastic_driver)
with Ray in place of ssh: the hosts are the cluster's live nodes, polled
every second, and a worker is an actor pinned to its node that runs the
function. Workers join rounds through the driver's authenticated round
service exactly as horovodrun's do. A worker that raises or whose actor
dies gets its node blacklisted (for good, or for `cooldown_range`), while
the others go on in the next round; a node that joins the cluster adds
workers at the next commit.

Thread-safety: one thread drives an executor; the driver's own threads
only read the actors' states.
"""

import secrets
import signal

from horovod.runner import discovery, flags
from horovod.runner.elastic_driver import ElasticDriver
from horovod.runner.probe import nic_address


# The settings as the job's errors name them.
_NAMES = {"np": "min_np", "min_np": "min_np", "timeout": "elastic_timeout",
          "reset_limit": "reset_limit"}


class _Settings:
    def __init__(self, min_np, max_np, reset_limit, elastic_timeout,
                 timeout_s, cooldown_range, nics, verbose):
        self.min_np = min_np
        self.max_np = max_np
        self.reset_limit = reset_limit
        self.elastic_timeout = elastic_timeout
        self.timeout_s = timeout_s
        self.cooldown_range = cooldown_range
        self.nics = set(nics) if nics else None
        self.verbose = verbose
        self.key = secrets.token_hex(32)

    def __repr__(self):  # never the key
        return ("ElasticRayExecutor settings(min_np=%r, max_np=%r, "
                "reset_limit=%r, elastic_timeout=%r)"
                % (self.min_np, self.max_np, self.reset_limit,
                   self.elastic_timeout))


class _RayNodes:
    """Discovery over the cluster's live nodes: {node address: slots}."""

    may_add = True

    def __init__(self, cpus_per_slot, gpus_per_slot):
        self._cpus = cpus_per_slot
        self._gpus = gpus_per_slot
        self.node_ids = {}

    def find(self):
        import ray

        found = {}
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            res = node.get("Resources", {})
            slots = int(res.get("CPU", 0) // self._cpus)
            if self._gpus:
                slots = min(slots, int(res.get("GPU", 0) // self._gpus))
            if slots > 0:
                addr = node["NodeManagerAddress"]
                found[addr] = slots
                self.node_ids[addr] = node["NodeID"]
        return found


class ElasticWorker:
    """The actor behind one worker: runs the function once, in the
    environment that makes its `hvd.init()` join the driver's rounds."""

    def run(self, fn, env):
        import os

        os.environ.update(env)
        try:
            value = fn()
        except SystemExit as e:
            if e.code in (None, 0):
                return ("left", None, None)  # told to leave the job
            raise
        return ("done", value, int(os.environ.get("HOROVOD_RANK", -1)))


class _ActorProcess:
    """An actor running the function, as the driver sees a worker process:
    poll() is None while it runs, then 0 (returned or left), 1 (raised)
    or -9 (the actor died); signal() kills the actor."""

    header = None

    def __init__(self, actor, ref):
        self.actor = actor
        self.ref = ref
        self.proc = self
        self.code = None
        self.outcome = None  # ("done", value, rank) or the error

    def poll(self):
        import ray
        from ray.exceptions import RayActorError

        if self.code is not None:
            return self.code
        ready, _ = ray.wait([self.ref], timeout=0)
        if not ready:
            return None
        try:
            self.outcome = ray.get(self.ref)
            self.code = 0
        except RayActorError as e:
            self.outcome, self.code = e, -9
        except Exception as e:  # noqa: BLE001 - the function's own error
            self.outcome, self.code = e, 1
        return self.code

    def wait(self, timeout=None):
        import ray
        ray.wait([self.ref], timeout=timeout)
        return self.poll()

    def kill(self):
        self.signal(signal.SIGKILL)

    def signal(self, sig):
        import ray
        if self.poll() is None:
            ray.kill(self.actor)


class ElasticRayExecutor:
    """Runs an elastic training function (one using hvd.elastic.run) on
    every slot of the Ray cluster's nodes, from `min_np` up to `max_np`
    workers."""

    @staticmethod
    def create_settings(min_np=1, max_np=None, reset_limit=None,
                        elastic_timeout=600, timeout_s=30,
                        cooldown_range=None, nics=None, verbose=False):
        """min_np/max_np: the job's smallest and largest size;
        reset_limit: how often it may re-form; elastic_timeout: how long
        a round may take to form; timeout_s: the engine's rendezvous
        (HOROVOD_START_TIMEOUT); cooldown_range (min, max): seconds a
        failed node stays blacklisted (doubling per failure), else for
        good; nics: interfaces the workers listen on."""
        if not isinstance(min_np, int) or min_np < 1:
            raise ValueError("ElasticRayExecutor: min_np=%r is not a positive "
                             "integer" % (min_np,))
        if max_np is not None and (not isinstance(max_np, int) or
                                   max_np < min_np):
            raise ValueError("ElasticRayExecutor: max_np=%r is below min_np=%d"
                             % (max_np, min_np))
        flags.check_seconds("ElasticRayExecutor",
                            elastic_timeout=elastic_timeout,
                            timeout_s=timeout_s)
        return _Settings(min_np, max_np, reset_limit, elastic_timeout,
                         timeout_s, cooldown_range, nics, verbose)

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1,
                 gpus_per_slot=None, env_vars=None):
        if gpus_per_slot and not use_gpu:
            raise ValueError("ElasticRayExecutor: gpus_per_slot=%r needs "
                             "use_gpu=True" % (gpus_per_slot,))
        self.settings = settings
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = (gpus_per_slot or 1) if use_gpu else 0
        self.env_vars = dict(env_vars or {})
        self._nodes = None

    def start(self):
        """Checks that Ray is running and finds its nodes."""
        import ray

        if not ray.is_initialized():
            raise RuntimeError("ElasticRayExecutor: call ray.init() first")
        self._nodes = _RayNodes(self.cpus_per_slot, self.gpus_per_slot)
        if not self._nodes.find():
            raise RuntimeError(
                "ElasticRayExecutor: no Ray node has a slot of %g CPUs%s"
                % (self.cpus_per_slot, " and %g GPUs" % self.gpus_per_slot
                   if self.gpus_per_slot else ""))

    def _log(self, line):
        import sys
        if self.settings.verbose or line.startswith("job failed"):
            sys.stderr.write("ElasticRayExecutor: %s\n" % line)
            sys.stderr.flush()

    def run(self, worker_fn):
        """Runs worker_fn() on every worker until one returns; returns the
        values of the last round's workers, in rank order. RuntimeError
        when the job fails (naming why; a worker's exception, if one
        raised, is the cause)."""
        import ray
        from ray.util.scheduling_strategies import \
            NodeAffinitySchedulingStrategy

        if self._nodes is None:
            raise RuntimeError("ElasticRayExecutor: call start() first")
        s = self.settings
        me = ray.util.get_node_ip_address()
        remote = ray.remote(num_cpus=self.cpus_per_slot,
                            num_gpus=self.gpus_per_slot)(ElasticWorker)
        processes = []

        def probe(host):
            if not s.nics:
                return host
            return ray.get(ray.remote(num_cpus=0)(nic_address).options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(
                    self._nodes.node_ids[host], soft=False)).remote(s.nics),
                timeout=60)

        def start_worker(wid, host, slot, extra):
            env = dict(self.env_vars)
            env.update(extra)
            env.update({"HOROVOD_SECRET_KEY": s.key,
                        "HOROVOD_START_TIMEOUT": str(s.timeout_s),
                        "PYTHONUNBUFFERED": "1"})
            actor = remote.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(
                    self._nodes.node_ids[host], soft=False)).remote()
            p = _ActorProcess(actor, actor.run.remote(worker_fn, env))
            processes.append(p)
            return p

        cooldown = tuple(s.cooldown_range) if s.cooldown_range else None
        driver = ElasticDriver(
            self._nodes, discovery.HostManager(cooldown), s.min_np, s.min_np,
            s.max_np, s.elastic_timeout, s.reset_limit, s.key, [me], me,
            start_worker, probe, self._log, verbose=s.verbose,
            names=_NAMES)
        code = driver.run([])
        for p in processes:
            p.signal(signal.SIGKILL)
        done = [p.outcome for p in processes
                if isinstance(p.outcome, tuple) and p.outcome[0] == "done"]
        raised = [p.outcome for p in processes
                  if isinstance(p.outcome, Exception)]
        if code != 0 or not done:
            why = ("job failed: %s" % driver.failure if driver.failure
                   else "exit code %d" % code)
            error = RuntimeError("ElasticRayExecutor.run: %s" % why)
            if raised:
                raise error from getattr(raised[0], "cause", None) or raised[0]
            raise error
        ranks = sorted(done, key=lambda o: o[2])
        return [o[1] for o in ranks]

