"""The launcher's authenticated channel to its own helpers (the network
probe, the ranks of `horovod.run`): both ends prove they know the job's
secret before either reads anything else, and every frame after that
carries an HMAC over its sequence number and body, so a host on the path
can neither impersonate an end nor alter, replay or reorder a frame.

Thread-safety: a `Channel` belongs to one thread.
"""

import hashlib
import hmac
import os
import struct
import threading

NONCE_BYTES = 32
MAC_BYTES = 32
_CLIENT = b"horovod-launcher-client"
_SERVER = b"horovod-launcher-server"
_FRAME = b"horovod-launcher-frame"


class AuthError(ConnectionError):
    pass


def _mac(secret, *parts):
    return hmac.new(secret, b"".join(parts), hashlib.sha256).digest()


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def serve_handshake(sock, secret):
    """The listening end: challenges the peer, then answers its challenge.
    Raises AuthError if the peer does not know the secret."""
    mine = os.urandom(NONCE_BYTES)
    sock.sendall(mine)
    reply = recv_exact(sock, MAC_BYTES + NONCE_BYTES)
    if not hmac.compare_digest(reply[:MAC_BYTES], _mac(secret, _CLIENT, mine)):
        raise AuthError("peer does not know the job's secret")
    theirs = reply[MAC_BYTES:]
    sock.sendall(_mac(secret, _SERVER, theirs))
    return Channel(sock, secret, mine + theirs, is_server=True)


def client_handshake(sock, secret):
    """The connecting end: answers the challenge, then checks the answer
    to its own. Raises AuthError if the listener does not know the secret."""
    theirs = recv_exact(sock, NONCE_BYTES)
    mine = os.urandom(NONCE_BYTES)
    sock.sendall(_mac(secret, _CLIENT, theirs) + mine)
    if not hmac.compare_digest(recv_exact(sock, MAC_BYTES),
                               _mac(secret, _SERVER, mine)):
        raise AuthError("listener does not know the job's secret")
    return Channel(sock, secret, theirs + mine, is_server=False)


def serve_connections(listener, handle):
    """Accepts on `listener` until it is closed, calling `handle(conn)` on a
    thread of its own for each connection (which must handshake first)."""

    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


class Channel:
    """Frames of at most `max_bytes`: 8-byte length, body, HMAC(secret,
    session, direction, sequence, body)."""

    def __init__(self, sock, secret, session, is_server):
        self._sock = sock
        self._secret = secret
        self._session = session
        self._out_dir = b"s" if is_server else b"c"
        self._in_dir = b"c" if is_server else b"s"
        self._sent = 0
        self._received = 0

    def _tag(self, direction, seq, body):
        return _mac(self._secret, _FRAME, self._session, direction,
                    struct.pack("<Q", seq), body)

    def send(self, body):
        tag = self._tag(self._out_dir, self._sent, body)
        self._sent += 1
        self._sock.sendall(struct.pack("<Q", len(body)) + body + tag)

    def recv(self, max_bytes):
        (n,) = struct.unpack("<Q", recv_exact(self._sock, 8))
        if n > max_bytes:
            raise AuthError("frame of %d bytes exceeds the limit of %d"
                            % (n, max_bytes))
        body = recv_exact(self._sock, n)
        tag = recv_exact(self._sock, MAC_BYTES)
        if not hmac.compare_digest(tag, self._tag(self._in_dir, self._received,
                                                  body)):
            raise AuthError("frame failed its integrity check")
        self._received += 1
        return body
