"""`RayExecutor`: a Horovod job whose ranks are Ray actors.

`start()` reserves the job's resources as one placement group (a bundle
per worker, or per host with `num_hosts`), starts one actor per rank in
it, asks every actor where it runs, numbers the ranks host by host
(horovod.runner.placement) and gives each actor its rank's environment;
the functions that `run` and `execute` send then call `hvd.init()` and
join that job. The job's secret travels to the actors as an argument of
that call, over Ray's own channel, and nowhere else.

A rank that raises or whose actor dies fails `run`/`execute` at once with
that rank named; the other ranks' collectives fail within the engine's
own bounds, so nothing hangs. After a failure, `shutdown()` and start a
new executor.

Thread-safety: one thread drives an executor.
"""

import secrets
import time

from horovod.runner import flags
from horovod.runner.placement import assign_ranks, rank_env
from horovod.runner.run_api import cause_first, first_line, rank_raised
from horovod.ray.worker import BaseHorovodWorker

# After the first failure, how long other ranks' reports may still arrive:
# a dead actor is the cause, and its peers' errors about it may come first.
_SETTLE_S = 1.0


class _Settings:
    def __init__(self, timeout_s, placement_group_timeout_s, nics, key,
                 ssh_identity_file, ssh_str):
        self.timeout_s = timeout_s
        self.placement_group_timeout_s = placement_group_timeout_s
        self.nics = set(nics) if nics else None
        self.key = key
        # Accepted for upstream's signature: Ray starts the actors, so
        # nothing is started over ssh.
        self.ssh_identity_file = ssh_identity_file
        self.ssh_str = ssh_str

    def __repr__(self):  # never the key
        return ("RayExecutor settings(timeout_s=%r, placement_group_timeout_s"
                "=%r, nics=%r)" % (self.timeout_s,
                                   self.placement_group_timeout_s, self.nics))


class RayExecutor:
    """`num_workers` ranks (or `num_workers_per_host` on each of
    `num_hosts` hosts), each an actor with `cpus_per_worker` CPUs (and
    `gpus_per_worker` GPUs with use_gpu)."""

    @staticmethod
    def create_settings(timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        """timeout_s: how long the ranks' rendezvous may take
        (HOROVOD_START_TIMEOUT); placement_group_timeout_s: how long
        `start()` waits for the cluster to grant the resources; nics:
        interface names the ranks listen on."""
        flags.check_seconds("RayExecutor", timeout_s=timeout_s,
                            placement_group_timeout_s=placement_group_timeout_s)
        return _Settings(timeout_s, placement_group_timeout_s, nics,
                         secrets.token_hex(32), ssh_identity_file, ssh_str)

    def __init__(self, settings, num_workers=None, num_hosts=None,
                 num_workers_per_host=1, cpus_per_worker=1, use_gpu=False,
                 gpus_per_worker=None, use_current_placement_group=True):
        if not (num_workers or num_hosts):
            raise ValueError("RayExecutor: give num_workers or num_hosts")
        if num_workers and num_hosts:
            raise ValueError("RayExecutor: give num_workers or num_hosts, "
                             "not both")
        for name, value in (("num_workers", num_workers),
                            ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host)):
            if value is not None and (not isinstance(value, int) or
                                      value < 1):
                raise ValueError("RayExecutor: %s=%r is not a positive "
                                 "integer" % (name, value))
        if gpus_per_worker and not use_gpu:
            raise ValueError("RayExecutor: gpus_per_worker=%r needs "
                             "use_gpu=True" % (gpus_per_worker,))
        self.settings = settings
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.num_workers = num_workers or num_hosts * num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers = []
        self._hosts = []
        self._placement_group = None
        self._own_placement_group = False

    # ----- start and stop -------------------------------------------------

    def _bundles(self):
        """(bundles, strategy, bundle index per worker)."""
        one = {"CPU": self.cpus_per_worker}
        if self.gpus_per_worker:
            one["GPU"] = self.gpus_per_worker
        if self.num_hosts:
            per_host = {k: v * self.num_workers_per_host
                        for k, v in one.items()}
            index = [i // self.num_workers_per_host
                     for i in range(self.num_workers)]
            return [per_host] * self.num_hosts, "STRICT_SPREAD", index
        return [one] * self.num_workers, "PACK", list(range(self.num_workers))

    def _reserve(self, bundles, strategy):
        import ray
        from ray.util import get_current_placement_group
        from ray.util.placement_group import (placement_group,
                                              remove_placement_group)

        current = (get_current_placement_group()
                   if self.use_current_placement_group else None)
        if current is not None:
            if len(current.bundle_specs) < len(bundles):
                raise ValueError(
                    "RayExecutor: the current placement group has %d bundles;"
                    " this executor needs %d" % (len(current.bundle_specs),
                                                 len(bundles)))
            return current, False
        group = placement_group(bundles, strategy=strategy)
        timeout = self.settings.placement_group_timeout_s
        ready, _ = ray.wait([group.ready()], timeout=timeout)
        if not ready:
            remove_placement_group(group)
            raise TimeoutError(
                "RayExecutor: the cluster did not grant %d x %s (%s) within "
                "placement_group_timeout_s=%gs; it has %s available"
                % (len(bundles), bundles[0], strategy, timeout,
                   ray.available_resources()))
        return group, True

    def start(self, executable_cls=None, executable_args=None,
              executable_kwargs=None, extra_env_vars=None):
        """Starts the actors and gives each its rank. `executable_cls` is
        built on every worker (with executable_args/kwargs) and handed to
        the functions of `execute`; `extra_env_vars` are set on every
        worker."""
        import ray
        from ray.util.scheduling_strategies import \
            PlacementGroupSchedulingStrategy

        if self.workers:
            raise RuntimeError("RayExecutor: start() was already called")
        bundles, strategy, index = self._bundles()
        group, own = self._reserve(bundles, strategy)
        self._placement_group, self._own_placement_group = group, own
        remote = ray.remote(num_cpus=self.cpus_per_worker,
                            num_gpus=self.gpus_per_worker)(BaseHorovodWorker)
        actors = [remote.options(scheduling_strategy=(
            PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=index[i]))).remote()
                  for i in range(self.num_workers)]
        try:
            infos = ray.get([a.node_info.remote(self.settings.nics)
                             for a in actors],
                            timeout=self.settings.placement_group_timeout_s)
        except Exception:
            for a in actors:
                ray.kill(a)
            self.shutdown()
            raise
        places = assign_ranks([i["host"] for i in infos])
        first = infos[next(i for i, p in enumerate(places) if p["rank"] == 0)]
        order = sorted(range(self.num_workers), key=lambda i: places[i]["rank"])
        self.workers = [actors[i] for i in order]
        self._hosts = [infos[i]["hostname"] for i in order]
        setups = []
        for i in order:
            env = dict(extra_env_vars or {})
            env.update(rank_env(places[i], infos[i]["host"], infos[i]["addr"],
                                first["addr"], first["port"],
                                self.settings.key))
            env["HOROVOD_START_TIMEOUT"] = str(self.settings.timeout_s)
            setups.append(actors[i].setup.remote(
                {str(k): str(v) for k, v in env.items()}, executable_cls,
                executable_args, executable_kwargs))
        self._gather(setups, "start")

    def shutdown(self):
        """Kills the actors and frees the placement group this executor
        made."""
        import ray
        from ray.util.placement_group import remove_placement_group

        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._placement_group is not None and self._own_placement_group:
            remove_placement_group(self._placement_group)
        self._placement_group = None

    # ----- running functions ------------------------------------------------

    def _started(self):
        if not self.workers:
            raise RuntimeError("RayExecutor: call start() first")

    def run_remote(self, fn, args=None, kwargs=None):
        """fn(*args, **kwargs) on every rank; the ObjectRefs, rank order."""
        self._started()
        return [w.run.remote(fn, tuple(args or ()), dict(kwargs or {}))
                for w in self.workers]

    def run(self, fn, args=None, kwargs=None):
        """fn(*args, **kwargs) on every rank; their return values in rank
        order. RuntimeError naming the rank if one raises (its exception
        is the cause) or its actor dies."""
        return self._gather(self.run_remote(fn, args, kwargs), "run")

    def execute(self, fn):
        """fn(executable) on every rank; the values in rank order."""
        self._started()
        return self._gather([w.execute.remote(fn) for w in self.workers],
                            "execute")

    def execute_single(self, fn):
        """fn(executable) on rank 0 only; its value."""
        self._started()
        return self._gather([self.workers[0].execute.remote(fn)],
                            "execute_single")[0]

    def _gather(self, refs, what):
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        rank_of = {ref: r for r, ref in enumerate(refs)}
        pending = list(refs)
        values = {}
        failures = []  # (rank, error), in the order they came
        first_failure = None
        while pending:
            if first_failure is not None:
                left = first_failure + _SETTLE_S - time.monotonic()
                if left <= 0:
                    break
                done, pending = ray.wait(pending, num_returns=1, timeout=left)
            else:
                done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    values[rank_of[ref]] = ray.get(ref)
                except (RayActorError, RayTaskError) as e:
                    failures.append((rank_of[ref], e))
                    if first_failure is None:
                        first_failure = time.monotonic()
        if not failures:
            return [values[r] for r in range(len(refs))]
        died = [(r, e) for r, e in failures if isinstance(e, RayActorError)]
        if died:
            rank, error = died[0]
            raise RuntimeError("RayExecutor.%s: rank %d's worker (on %s) "
                               "died: %s" % (what, rank, self._hosts[rank],
                                             first_line(error))) from error
        rank, cause = cause_first(
            [(r, getattr(e, "cause", None) or e) for r, e in failures])[0]
        raise RuntimeError(rank_raised("RayExecutor." + what, rank, cause)) \
            from cause
