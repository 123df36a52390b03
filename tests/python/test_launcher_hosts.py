"""The pieces horovodrun uses for other hosts, on this machine: the
placement of ranks on hosts, the choice of interface, the agent that runs
a rank over ssh and the network probe. The same pieces across real
(namespace) hosts: test_multihost.py."""

import json
import os
import signal
import subprocess
import sys
import time

from conftest import process_alive

from horovod.runner import probe
from horovod.runner.hosts import choose_interface
from horovod.runner.launch import placement

AGENT = [sys.executable, "-m", "horovod.runner.remote"]
PROBE = [sys.executable, "-m", "horovod.runner.probe"]


def test_ranks_fill_hosts_in_order_up_to_their_slots():
    assert placement([("a", 2), ("b", 2)], 4) == [
        ("a", 0, 2, 0, 2), ("a", 1, 2, 0, 2), ("b", 0, 2, 1, 2),
        ("b", 1, 2, 1, 2)]
    # Fewer ranks than slots: later hosts get none and are not counted.
    assert placement([("a", 1), ("b", 4), ("c", 2)], 3) == [
        ("a", 0, 1, 0, 2), ("b", 0, 2, 1, 2), ("b", 1, 2, 1, 2)]


NAMES = ["h1", "h2"]
FOUND = [{"lo": "127.0.0.1", "eth0": "10.0.0.1", "ib0": "10.1.0.1"},
         {"lo": "127.0.0.1", "eth0": "10.0.0.2", "ib0": "10.1.0.2"}]


def test_interface_choice_takes_one_every_host_reaches():
    assert choose_interface(NAMES, FOUND, [{"eth0", "ib0"}] * 2, []) == \
        ("eth0", None)
    # ib0 answers only from h2: not usable.
    assert choose_interface(NAMES, FOUND, [{"eth0"}, {"eth0", "ib0"}], []) == \
        ("eth0", None)
    # Forced, in the order given.
    assert choose_interface(NAMES, FOUND, [{"eth0", "ib0"}] * 2,
                            ["ib0", "eth0"]) == ("ib0", None)


def test_interface_choice_names_what_is_wrong():
    _, err = choose_interface(NAMES, FOUND, [{"eth0"}] * 2, ["eth9"])
    assert err == "network interface eth9 is missing on hosts h1, h2"
    _, err = choose_interface(NAMES, [FOUND[0], {"lo": "127.0.0.1", "em1": "x"}],
                              [set(), set()], [])
    assert err == ("the hosts share no network interface name: "
                   "h1 has eth0, ib0, lo; h2 has em1, lo")
    _, err = choose_interface(NAMES, FOUND, [{"ib0"}, set()], [])
    assert err == "no network interface of eth0, ib0 reaches every host (h2 -> h1)"


def _agent(header_line):
    proc = subprocess.Popen(AGENT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdin.write(header_line)
    proc.stdin.flush()
    return proc


def test_agent_runs_the_command_with_the_environment_it_is_sent(tmp_path):
    code = "import os; print(os.getcwd(), os.environ['HVD_X']); raise SystemExit(3)"
    header = {"cwd": str(tmp_path), "env": {"HVD_X": "secret-ish"},
              "command": [sys.executable, "-c", code]}
    proc = _agent((json.dumps(header) + "\n").encode())
    out = proc.stdout.read()  # standard input stays open: the session lasts
    assert proc.wait(60) == 3, proc.stderr.read()
    assert out.decode().split() == [str(tmp_path), "secret-ish"]


def test_agent_refuses_a_malformed_header():
    for line, why in ((b"not json\n", "Expecting value"),
                      (b"[1]\n", "not a JSON object"),
                      (b'{"cwd": "/", "env": {}, "command": []}\n',
                       "non-empty list"),
                      (b"x" * ((1 << 20) + 1), "longer than")):
        proc = _agent(line)
        proc.stdin.close()
        err = proc.stderr.read()
        assert proc.wait(60) == 2, (line[:40], err)
        assert why.encode() in err, (line[:40], err)


def test_agent_stops_the_rank_when_its_session_ends(tmp_path):
    pidfile = tmp_path / "pid"
    code = ("import os, time; open(%r, 'w').write(str(os.getpid())); "
            "time.sleep(120)" % str(pidfile))
    header = {"cwd": "/", "env": dict(os.environ),
              "command": [sys.executable, "-c", code]}
    proc = _agent((json.dumps(header) + "\n").encode())
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    rank = int(pidfile.read_text())
    t0 = time.monotonic()
    proc.stdin.close()  # the ssh session is gone
    proc.wait(30)
    assert not process_alive(rank)
    assert time.monotonic() - t0 < 5
    assert proc.returncode == 128 + signal.SIGTERM


def test_agent_forwards_signal_lines(tmp_path):
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGINT, lambda *a: sys.exit(7))\n"
            "print('up', flush=True); time.sleep(120)\n")
    header = {"cwd": "/", "env": dict(os.environ),
              "command": [sys.executable, "-c", code]}
    proc = _agent((json.dumps(header) + "\n").encode())
    assert proc.stdout.readline() == b"up\n"
    proc.stdin.write(b"INT\n")
    proc.stdin.flush()
    assert proc.wait(30) == 7


def test_probe_answers_only_a_peer_with_the_job_secret():
    secret = os.urandom(32)
    proc = subprocess.Popen(PROBE, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        proc.stdin.write((json.dumps({"secret": secret.hex()}) + "\n").encode())
        proc.stdin.flush()
        hello = json.loads(proc.stdout.readline())
        assert hello["ifaces"]["lo"] == "127.0.0.1"
        assert 0 < hello["free_port"] < 65536
        port = hello["port"]
        assert probe.reaches("127.0.0.1", port, secret)
        assert not probe.reaches("127.0.0.1", port, os.urandom(32))
        # The probe reports what it reached of its targets: itself here,
        # and a port where nothing of this job listens.
        targets = [{"port": port, "ifaces": {"lo": "127.0.0.1"}},
                   {"port": hello["free_port"], "ifaces": {"lo": "127.0.0.1"}}]
        proc.stdin.write((json.dumps({"targets": targets}) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == {"reached": [["lo"], []]}
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
