"""Attacks on a job's rendezvous listener. Rank 2
starts late, so rank 0 listens for a few seconds while clients with no key,
a wrong key, a replayed handshake, malformed records (bad magic, rank >=
size, a 0xFFFFFFFF length, truncated frames), a pickle that would create a
file, 1000 idle connections and one-byte-a-second senders hit it. The job
must still complete with correct results, rank 0's peak memory must stay
with the others', the file must not appear, and the secret must appear in
no output."""

import hashlib
import hmac
import os
import pickle
import resource
import secrets
import socket
import struct
import threading
import time

from conftest import collect, free_port, spawn_ranks

MAGIC = 0x48445648  # handshake records
FRAME_MAGIC = 0x31445648
SIZE = 3


def hello(rank, size=SIZE, magic=MAGIC, nonce=None):
    return struct.pack("<IHBBii", magic, 1, 1, 0, rank, size) + (
        nonce or secrets.token_bytes(16))


def proof(secret, role, n1, n2, client, server):
    msg = role.encode().ljust(16, b"\0") + n1 + n2 + struct.pack(
        "<Biii", 1, client, server, SIZE)
    return hmac.new(secret.encode(), msg, hashlib.sha256).digest()


def recv_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def keyed_client(port, secret, rank, then):
    """A client holding the job's key: a valid handshake claiming `rank`,
    then `then` (raw bytes after the handshake)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        h = hello(rank)
        s.sendall(h)
        reply = recv_exactly(s, 64)
        s.sendall(proof(secret, "hvd-client", reply[16:32], h[16:32], rank, 0))
        s.sendall(then)
        return h + proof(secret, "hvd-client", reply[16:32], h[16:32], rank, 0)


def frame(body, length=None):
    return struct.pack("<II", FRAME_MAGIC,
                       len(body) if length is None else length) + body


class Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch " + self.path,))


def attack(port, secret, marker, stop, errors):
    def quietly(fn, *args):
        try:
            fn(*args)
        except OSError:
            pass
        except Exception as e:  # noqa: BLE001 - report, do not hide
            errors.append(repr(e))

    def send_raw(data, close=True):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(data)
        if close:
            time.sleep(0.2)
            s.close()
        return s

    evil = pickle.dumps(Evil(marker))
    one_shots = [
        lambda: send_raw(b""),                                # no key at all
        lambda: send_raw(hello(1, magic=0xDEADBEEF)),         # bad magic
        lambda: send_raw(hello(7)),                           # rank >= size
        lambda: send_raw(hello(1, size=99)),                  # another job
        lambda: send_raw(b"\xff\xff\xff\xff" + b"\0" * 60),   # huge "length"
        lambda: send_raw(hello(1)[:20]),                      # truncated
        lambda: send_raw(evil.ljust(64, b"\0")),              # a pickle
        # The key, then: a frame of 0xFFFFFFFF bytes, a truncated frame,
        # bad frame magic, and a pickle where the announcement goes.
        lambda: keyed_client(port, secret, 2, frame(b"", 0xFFFFFFFF)),
        lambda: keyed_client(port, secret, 2, frame(b"abc", 100)),
        lambda: keyed_client(port, secret, 2, b"XXXX" + b"\3\0\0\0abc"),
        lambda: keyed_client(port, secret, 2, frame(evil)),
    ]
    for fn in one_shots:
        quietly(fn)

    # A wrong key: a well-formed hello, then a proof made with another key.
    def wrong_key():
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            h = hello(2)
            s.sendall(h)
            reply = recv_exactly(s, 64)
            s.sendall(proof("not-the-secret", "hvd-client", reply[16:32],
                            h[16:32], 2, 0))
            time.sleep(0.2)
    quietly(wrong_key)

    # A replay: the bytes of a handshake that worked, sent again.
    def replay():
        recorded = keyed_client(port, secret, 2, frame(b"bad announcement"))
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(recorded)
            time.sleep(0.2)
    quietly(replay)

    # One byte a second, from three clients.
    def slow():
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            for b in hello(2):
                if stop.is_set():
                    return
                s.sendall(bytes([b]))
                time.sleep(1)
    slow_threads = [threading.Thread(target=quietly, args=(slow,), daemon=True)
                    for _ in range(3)]
    for t in slow_threads:
        t.start()

    # 1000 connections held open.
    held = []
    for _ in range(1000):
        if stop.is_set():
            break
        try:
            held.append(socket.create_connection(("127.0.0.1", port),
                                                 timeout=5))
        except OSError:
            time.sleep(0.01)
    stop.wait(30)
    for s in held:
        s.close()
    return len(held)


def test_listener_survives_attacks_and_job_completes(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)),
                                                hard))
    port = free_port()
    secret = secrets.token_hex(32)
    marker = str(tmp_path / "pwned")
    env = {"HOROVOD_START_TIMEOUT": "60"}

    def rank_env(r):
        return {"SECURITY_INIT_DELAY": "6" if r == 2 else "0"}
    procs = spawn_ranks(SIZE, "secure.py", env=env, rank_env=rank_env,
                        port=port, secret=secret)
    # Wait for rank 0 to listen, then attack until the job is done.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    stop = threading.Event()
    errors = []
    held = []
    attacker = threading.Thread(
        target=lambda: held.append(attack(port, secret, marker, stop, errors)),
        daemon=True)
    attacker.start()
    try:
        results = collect(procs, timeout=120)
    finally:
        stop.set()
        attacker.join(timeout=30)
    out = "".join(o + e for _, o, e in results)
    for r, (rc, o, e) in enumerate(results):
        assert rc == 0, (r, o, e[-3000:])
        assert "secure OK on rank %d" % r in o, (r, o)
    assert errors == [], errors
    print("attack: %d connections held open; rank 0 log:\n%s"
          % (held[0] if held else -1, results[0][2][-1500:]))
    assert held and held[0] >= 500, held
    assert not os.path.exists(marker)
    assert secret not in out
    assert "rejected a connection" in results[0][2]
    # Peak resident memory: no allocation sized by an attacker's length.
    hwm = [int(o.split("VmHWM_kB=")[1].split()[0]) for _, o, _ in results]
    print("peak resident memory (kB) by rank:", hwm)
    assert hwm[0] < max(hwm[1:]) + 64 * 1024, hwm
