"""The pieces horovodrun uses for other hosts, on this machine: the
placement of ranks on hosts, the choice of interface, the agent that runs
a rank over ssh and the network probe. The same pieces across real
(namespace) hosts: test_multihost.py."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import process_alive

from horovod.runner import auth, probe
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


def test_horovod_run_returns_each_ranks_value_in_rank_order():
    code = """
import horovod
from horovod.runner import run

def f(base, scale=1):
    import horovod.torch as hvd, torch
    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank())]), op=hvd.Sum)
    return (hvd.rank(), base + scale * total.item())

import signal
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
before = [signal.getsignal(s) for s in SIGNALS]
print(horovod.run(f, args=(100,), kwargs={"scale": 2}, np=3))
assert horovod.run is not run and run(f, args=(0,), np=1) == [(0, 0.0)]
# The caller's handlers are back: Ctrl-C raises KeyboardInterrupt again.
assert [signal.getsignal(s) for s in SIGNALS] == before
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == "[(0, 106.0), (1, 106.0), (2, 106.0)]"


def test_horovod_run_raises_a_ranks_exception_naming_the_rank():
    code = """
import horovod

def f():
    import os
    if os.environ["HOROVOD_RANK"] == "1":
        raise KeyError("no such thing")
    return 1

try:
    horovod.run(f, np=2)
except RuntimeError as e:
    print("RAISED", e, "|", repr(e.__cause__))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=180)
    assert ("RAISED horovod.run: rank 1 raised KeyError: 'no such thing' | "
            "KeyError('no such thing')") in out.stdout, out


def test_horovod_run_elastic_returns_the_last_rounds_values():
    code = """
import os
import horovod

def f():
    import horovod.torch as hvd, torch
    hvd.init()
    state = hvd.elastic.TorchState(steps=0)

    @hvd.elastic.run
    def train(state):
        while state.steps < 6:
            hvd.allreduce(torch.ones(1), name="step")
            if state.steps == 2 and ":2#" in os.environ["HOROVOD_ELASTIC_WORKER"]:
                os._exit(3)  # slot 2's worker dies; the others go on
            state.steps += 1
            state.commit()
        return (hvd.rank(), hvd.size(), state.steps)

    return train(state)

import signal
before = signal.getsignal(signal.SIGINT)
print(horovod.run(f, np=3, min_np=2, hosts="localhost:3"))
assert signal.getsignal(signal.SIGINT) is before
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[-1] == "[(0, 2, 6), (1, 2, 6)]", out.stdout
    assert "worker localhost:2 exited with code 3" in out.stderr


def _listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    return srv


def test_launcher_channel_refuses_a_peer_without_the_secret():
    secret, wrong = os.urandom(32), os.urandom(32)
    srv = _listener()
    outcome = {}

    def serve():
        conn, _ = srv.accept()
        with conn:
            try:
                auth.serve_handshake(conn, secret)
                outcome["server"] = "accepted"
            except auth.AuthError as e:
                outcome["server"] = str(e)

    t = threading.Thread(target=serve)
    t.start()
    with socket.create_connection(srv.getsockname()) as c:
        try:
            auth.client_handshake(c, wrong)
        except (auth.AuthError, ConnectionError):
            pass
    t.join(10)
    srv.close()
    assert outcome["server"] == "peer does not know the job's secret"


def test_run_task_unpickles_nothing_from_a_launcher_without_the_secret(tmp_path):
    """A listener posing as the launcher, with the wrong secret: the rank
    fails the handshake and never reads the payload."""
    srv = _listener()
    marker = tmp_path / "ran"

    def impostor():
        # Takes the rank's proof without checking it, answers with a
        # made-up one, then sends a pickle that would write the marker.
        conn, _ = srv.accept()
        with conn:
            try:
                conn.sendall(os.urandom(auth.NONCE_BYTES))
                auth.recv_exact(conn, auth.MAC_BYTES + auth.NONCE_BYTES)
                conn.sendall(os.urandom(auth.MAC_BYTES))
                import cloudpickle
                blob = cloudpickle.dumps((open, (str(marker), "w"), {}))
                conn.sendall(len(blob).to_bytes(8, "little") + blob +
                             os.urandom(auth.MAC_BYTES))
            except OSError:
                pass

    t = threading.Thread(target=impostor)
    t.start()
    env = dict(os.environ, HOROVOD_RUN_ADDR="127.0.0.1",
               HOROVOD_RUN_PORT=str(srv.getsockname()[1]),
               HOROVOD_SECRET_KEY=os.urandom(32).hex(), HOROVOD_RANK="0")
    out = subprocess.run([sys.executable, "-m", "horovod.runner.run_task"],
                         env=env, capture_output=True, text=True, timeout=60)
    t.join(10)
    srv.close()
    assert out.returncode != 0
    assert out.stderr.strip() == (
        "rank 0: cannot take the function from horovod.run's launcher at "
        "127.0.0.1:%s: listener does not know the job's secret"
        % env["HOROVOD_RUN_PORT"]), out.stderr
    assert not marker.exists()


def _channel_pair():
    """(server channel, client channel, client's socket) over a socketpair."""
    secret = os.urandom(32)
    a, b = socket.socketpair()
    result = {}
    t = threading.Thread(target=lambda: result.update(
        server=auth.serve_handshake(a, secret)))
    t.start()
    client = auth.client_handshake(b, secret)
    t.join(10)
    return result["server"], client, b


def test_launcher_channel_frames_fail_when_altered():
    server, client, b = _channel_pair()
    frame = bytearray()
    client._sock = _Capture(frame)
    client.send(b"hello")
    b.sendall(bytes(frame))
    assert server.recv(100) == b"hello"
    b.sendall(bytes(frame))  # the same frame again: a replay
    with pytest.raises(auth.AuthError, match="integrity"):
        server.recv(100)
    b.close()


def test_launcher_channel_frames_fail_when_a_bit_flips():
    server, client, b = _channel_pair()
    frame = bytearray()
    client._sock = _Capture(frame)
    client.send(b"hello")
    frame[9] ^= 1  # in the body
    b.sendall(bytes(frame))
    with pytest.raises(auth.AuthError, match="integrity"):
        server.recv(100)
    b.close()


class _Capture:
    def __init__(self, buf):
        self.buf = buf

    def sendall(self, data):
        self.buf += data
