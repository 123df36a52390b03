"""horovodrun's elastic driver without processes: host discovery and the
blacklist, the rank plan, and the round service spoken to by real
DriverClients over its authenticated socket, with fake worker processes
whose exits the test decides."""

import os
import stat
import threading
import time

import pytest

from horovod.common.driver_client import DriverClient
from horovod.common.exceptions import HorovodInternalError
from horovod.runner import auth
from horovod.runner.discovery import (DiscoveryError, FixedHosts, HostManager,
                                      ScriptDiscovery, parse_hosts)
from horovod.runner.elastic_driver import ElasticDriver, plan_round

SECRET = "ab" * 32


def test_parse_hosts_reads_slots_and_names_bad_lines():
    assert parse_hosts("a:2\n\n# c\nb:1\n", None, "s") == {"a": 2, "b": 1}
    assert parse_hosts("a\nb:3", 4, "s") == {"a": 4, "b": 3}
    with pytest.raises(DiscoveryError, match="line 1: 'a' gives no slots"):
        parse_hosts("a", None, "s")
    with pytest.raises(DiscoveryError, match="line 2: '-oProxyCommand=x' is "
                                             "not a host name"):
        parse_hosts("a:1\n-oProxyCommand=x:1", None, "s")
    with pytest.raises(DiscoveryError, match="0 slots"):
        parse_hosts("a:0", None, "s")


def test_discovery_script_output_and_failures(tmp_path):
    script = tmp_path / "discover.sh"

    def write(body):
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(script.stat().st_mode | stat.S_IEXEC)

    write("echo h1:2; echo h2:1\n")
    assert ScriptDiscovery(str(script), None).find() == {"h1": 2, "h2": 1}
    write("echo oops >&2; exit 3\n")
    with pytest.raises(DiscoveryError, match="exited with code 3: oops"):
        ScriptDiscovery(str(script), None).find()
    write("sleep 5\n")
    with pytest.raises(DiscoveryError, match="did not finish within 0.2s"):
        ScriptDiscovery(str(script), None, timeout_s=0.2).find()
    with pytest.raises(DiscoveryError, match="cannot run"):
        ScriptDiscovery(str(tmp_path / "missing"), None).find()


def test_blacklist_cooldown_doubles_up_to_its_maximum():
    now = [100.0]
    hosts = HostManager((2, 5), clock=lambda: now[0])
    hosts.update({"a": 1, "b": 2})
    assert hosts.blacklist("b") == 2
    assert hosts.usable() == [("a", (0,))] and hosts.could_change()
    now[0] += 2
    assert hosts.readmitted() == ["b"] and hosts.usable() == [("a", (0,)),
                                                      ("b", (0, 1))]
    assert hosts.blacklist("b") == 4
    assert hosts.blacklist("b") == 5  # capped
    forever = HostManager(None, clock=lambda: now[0])
    forever.update({"a": 1})
    assert forever.blacklist("a") is None
    now[0] += 1e9
    assert forever.usable() == [] and not forever.could_change()


def test_discovery_order_is_kept_and_reports_changes():
    hosts = HostManager()
    assert hosts.update({"b": 1, "a": 1}) == (["b", "a"], [])
    assert hosts.update({"a": 1, "c": 2}) == (["c"], ["b"])
    hosts.update({"c": 2, "b": 1, "a": 1})
    assert [h for h, _ in hosts.usable()] == ["b", "a", "c"]


def test_plan_keeps_the_senior_veteran_at_rank_0():
    order = {"h1": 0, "h2": 1, "h3": 2}.get
    # h1 is back after a failure with a fresh worker; rank 0 stays the
    # veteran on h2, whose host goes first.
    plan = plan_round([("n", "h1", 0, None), ("v2", "h2", 1, 1),
                       ("v1", "h2", 0, 0), ("w", "h3", 0, 2)], order)
    assert [p["worker"] for p in plan] == ["v1", "v2", "n", "w"]
    assert [(p["local_rank"], p["local_size"], p["cross_rank"],
             p["cross_size"]) for p in plan] == \
        [(0, 2, 0, 3), (1, 2, 0, 3), (0, 1, 1, 3), (0, 1, 2, 3)]
    assert {p["size"] for p in plan} == {4}
    fresh = plan_round([("b", "h2", 0, None), ("a", "h1", 1, None),
                        ("c", "h1", 0, None)], order)
    assert [p["worker"] for p in fresh] == ["c", "a", "b"]


class FakeProc:
    def __init__(self):
        self.code = None
        self.signals = []

    def poll(self):
        return self.code

    def wait(self, timeout=None):
        return self.code


class FakeWorker:
    def __init__(self, wid, host, slot, env):
        self.wid, self.host, self.slot, self.env = wid, host, slot, env
        self.proc = FakeProc()
        self.header = None

    def signal(self, sig):
        self.proc.signals.append(sig)
        self.proc.code = -sig


class Job:
    """A driver over fake workers, run in a thread."""

    def __init__(self, hosts, np=2, min_np=None, max_np=None, timeout_s=5.0,
                 reset_limit=None, cooldown=None, discovery=None):
        self.started = []
        self.log = []
        self.driver = ElasticDriver(
            discovery or FixedHosts(hosts), HostManager(cooldown), np,
            min_np or np, max_np, timeout_s, reset_limit, SECRET,
            ["127.0.0.1"], "127.0.0.1", self._start, None, self.log.append)
        self.interrupts = []
        self.code = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _start(self, wid, host, slot, env):
        w = FakeWorker(wid, host, slot, env)
        self.started.append(w)
        return w

    def _run(self):
        self.code = self.driver.run(self.interrupts)

    def wait_started(self, n, timeout=5):
        deadline = time.monotonic() + timeout
        while len(self.started) < n:
            assert time.monotonic() < deadline, (self.started, self.log)
            time.sleep(0.01)
        return self.started[:n]

    def client(self, w):
        return DriverClient(w.env["HOROVOD_ELASTIC_DRIVER"],
                            w.env["HOROVOD_ELASTIC_WORKER"], SECRET, 5.0)

    def wait_changed(self, w, round_no, timeout=5):
        """Rank 0's question at a commit, asked until the answer is that the
        hosts changed; returns that answer."""
        c = self.client(w)
        c.round = round_no
        deadline = time.monotonic() + timeout
        while True:
            answer = c.host_updates()
            if answer["changed"]:
                return answer
            assert time.monotonic() < deadline, self.log
            time.sleep(0.05)

    def join_all(self, workers):
        """Joins with each worker at once; returns their replies (or the
        exception each raised)."""
        out = [None] * len(workers)

        def one(i):
            try:
                out[i] = self.client(workers[i]).join("127.0.0.1")
            except BaseException as e:  # noqa: BLE001 - returned to the test
                out[i] = e

        threads = [threading.Thread(target=one, args=(i,))
                   for i in range(len(workers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        return out

    def finish(self, workers):
        for w in workers:
            w.proc.code = 0
        self.thread.join(10)
        return self.code


@pytest.fixture(autouse=True)
def clean_env():
    """A join sets this process's HOROVOD_RANK, SIZE, ... as it does a
    worker's: put the environment back, or later tests' subprocesses would
    take them for a launcher's."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_a_round_forms_when_every_worker_joined_and_the_job_ends():
    job = Job({"localhost": 3}, np=2)
    workers = job.wait_started(3)
    assert {w.slot for w in workers} == {0, 1, 2}
    assert all("HOROVOD_SECRET_KEY" not in w.env for w in workers)
    replies = job.join_all(workers)
    assert sorted(r["rank"] for r in replies) == [0, 1, 2]
    assert {(r["size"], r["round"], r["controller_addr"]) for r in replies} == \
        {(3, 1, "127.0.0.1")}
    assert os.environ["HOROVOD_SIZE"] == "3"
    # Nothing changed since round 1.
    root = next(w for w, r in zip(workers, replies) if r["rank"] == 0)
    c = job.client(root)
    c.round = 1
    assert c.host_updates() == {"changed": False, "skip_sync": False}
    assert job.finish(workers) == 0


def test_a_failed_worker_shrinks_the_job_and_its_host_is_blacklisted():
    job = Job({"localhost": 3}, np=3, min_np=2)
    workers = job.wait_started(3)
    replies = job.join_all(workers)
    dead = next(w for w, r in zip(workers, replies) if r["rank"] == 1)
    dead.proc.code = 137
    rest = [w for w in workers if w is not dead]
    root = next(w for w, r in zip(workers, replies) if r["rank"] == 0)
    time.sleep(0.3)
    c = job.client(root)
    c.round = 1
    assert c.host_updates()["changed"]
    again = job.join_all(rest)
    assert sorted(r["rank"] for r in again) == [0, 1]
    # Rank 0 stays where it was; no worker replaces the dead one.
    assert again[rest.index(root)]["rank"] == 0
    assert len(job.started) == 3
    assert any("blacklisted for the rest of the job" in l for l in job.log), job.log
    assert job.finish(rest) == 0


def test_a_blacklisted_host_gets_a_new_worker_after_its_cooldown():
    job = Job({"localhost": 2}, np=2, min_np=1, cooldown=(0.3, 1))
    workers = job.wait_started(2)
    job.join_all(workers)
    workers[1].proc.code = 1
    assert job.join_all(workers[:1])[0]["size"] == 1
    t0 = time.monotonic()
    new = job.wait_started(3)[2]
    assert time.monotonic() - t0 >= 0.2 and new.slot == workers[1].slot
    assert any("back after its cooldown" in l for l in job.log), job.log
    # The newcomer waits; the veteran hears of it at its next commit.
    waiting = []
    t = threading.Thread(target=lambda: waiting.extend(job.join_all([new])))
    t.start()
    assert job.wait_changed(workers[0], 2) == {"changed": True,
                                               "skip_sync": False}
    veteran = job.join_all(workers[:1])[0]
    t.join(10)
    assert veteran["rank"] == 0 and waiting[0]["rank"] == 1
    assert job.finish([workers[0], new]) == 0


def test_reset_limit_stops_the_job():
    job = Job({"localhost": 3}, np=3, min_np=1, reset_limit=0)
    workers = job.wait_started(3)
    job.join_all(workers)
    workers[2].proc.code = 1
    replies = job.join_all(workers[:2])
    assert all(isinstance(r, HorovodInternalError) for r in replies), replies
    assert "re-formed 1 times, more than --reset-limit 0" in str(replies[0])
    job.thread.join(10)
    assert job.code == 1
    assert any("job failed: the job re-formed" in l for l in job.log), job.log


def test_too_few_workers_fail_the_job_once_none_can_start():
    job = Job({"localhost": 2}, np=2, timeout_s=60)
    workers = job.wait_started(2)
    workers[0].proc.code = 1  # its host is blacklisted for good
    t0 = time.monotonic()
    reply = job.join_all(workers[1:])[0]
    assert isinstance(reply, HorovodInternalError)
    assert "only 1 of the 2 workers needed (-np) were available, and no " \
        "more can start" in str(reply)
    job.thread.join(10)
    assert job.code == 1 and time.monotonic() - t0 < 5


def test_too_few_workers_wait_for_a_cooling_host_until_the_timeout():
    job = Job({"localhost": 2}, np=2, timeout_s=0.5, cooldown=(100, 100))
    workers = job.wait_started(2)
    workers[0].proc.code = 1
    reply = job.join_all(workers[1:])[0]
    assert isinstance(reply, HorovodInternalError)
    assert "only 1 of the 2 workers needed (-np) were available for" in \
        str(reply) and "(--elastic-timeout)" in str(reply)
    job.thread.join(10)
    assert job.code == 1


class Listing:
    """A discovery whose hosts the test changes (`hosts`)."""

    may_add = True

    def __init__(self, hosts):
        self.hosts = hosts

    def find(self):
        return dict(self.hosts)


def test_slots_with_holes_and_a_lost_slot_that_blacklists_nothing():
    listing = {"h": [0, 3]}
    job = Job(None, np=2, min_np=1, discovery=Listing(listing))
    workers = job.wait_started(2)
    assert sorted(w.slot for w in workers) == [0, 3]
    job.join_all(workers)
    # Slot 0's task ends and takes its worker along: no blacklisting, the
    # survivor goes on alone, and the slot's return brings a new worker.
    listing["h"] = [3]
    workers[0].lost = "its Spark task ended"
    workers[0].proc.code = -9
    assert job.wait_changed(workers[1], 1)["changed"]
    assert job.join_all(workers[1:])[0]["size"] == 1
    listing["h"] = [0, 3]
    new = job.wait_started(3)[2]
    assert new.slot == 0 and new.host == "h"
    assert any("gone with its slot (its Spark task ended)" in l
               for l in job.log), job.log
    assert not any("blacklisted" in l for l in job.log), job.log
    replies = job.join_all([workers[1], new])
    assert sorted(r["rank"] for r in replies) == [0, 1], (replies, job.log)
    assert job.finish([workers[1], new]) == 0


def test_a_launcher_stops_the_job_with_its_reason():
    job = Job({"localhost": 2}, np=2)
    workers = job.wait_started(2)
    job.driver.fail("the Spark job failed: boom")
    job.thread.join(10)
    assert job.code == 1 and all(w.proc.signals for w in workers)
    assert any("job failed: the Spark job failed: boom" in l
               for l in job.log), job.log


def test_a_host_gone_from_discovery_tells_its_workers_to_leave(tmp_path):
    listing = {"localhost": 2}
    job = Job(None, np=2, min_np=1, discovery=Listing(listing))
    workers = job.wait_started(2)
    job.join_all(workers)
    listing["localhost"] = 1  # slot 1 is no longer offered
    assert job.wait_changed(workers[0], 1) == {"changed": True,
                                               "skip_sync": True}
    stay, leave = job.join_all(workers)
    assert stay["size"] == 1
    assert isinstance(leave, SystemExit) and leave.code == 0
    assert job.finish(workers) == 0


def test_the_round_service_refuses_strangers():
    job = Job({"localhost": 1}, np=1)
    w = job.wait_started(1)[0]
    wrong = DriverClient(w.env["HOROVOD_ELASTIC_DRIVER"],
                         w.env["HOROVOD_ELASTIC_WORKER"], "cd" * 32, 2.0)
    with pytest.raises(HorovodInternalError, match="did not answer"):
        wrong.join("127.0.0.1")
    impostor = job.client(w)
    impostor.worker = "nobody:0#9"
    with pytest.raises(HorovodInternalError, match="is not one of this job's"):
        impostor.join("127.0.0.1")
    assert job.join_all([w])[0]["size"] == 1
    assert job.finish([w]) == 0


def test_a_request_without_a_worker_id_is_refused():
    job = Job({"localhost": 1}, np=1)
    w = job.wait_started(1)[0]
    client = job.client(w)
    assert client._ask({"op": "join", "worker": ["x"], "port": 1}, 5) == \
        {"error": "request without a worker id"}
    assert job.join_all([w])[0]["size"] == 1
    assert job.finish([w]) == 0
