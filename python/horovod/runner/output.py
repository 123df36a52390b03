"""How horovodrun shows its ranks' output: each record (a line, or a
progress bar's redraw) prefixed with its rank and stream, as soon as it
ends; optionally with the time it arrived, and copied into one folder per
rank (`--output-filename`).

Thread-safety: one pump thread per rank and stream calls `Output.pump`;
every write to the console holds one lock, so records never interleave.
"""

import os
import threading
import time

class _Records:
    """Splits a rank's output stream into records ended by \\n or by \\r
    (progress bars redraw with \\r): each is forwarded as soon as its end
    arrives instead of waiting for a newline."""

    def __init__(self):
        self._partial = b""
        self._after_cr = False

    def feed(self, chunk):
        data = self._partial + chunk
        out = []
        start = 0
        for i, byte in enumerate(data):
            if byte in (0x0A, 0x0D):
                out.append((data[start:i], data[i:i + 1]))
                start = i + 1
                self._after_cr = byte == 0x0D
        self._partial = data[start:]
        return out

    def preview(self):
        """The redraw in progress: text after a \\r whose end has not come
        yet (a progress bar's current state; its end arrives only with the
        next redraw)."""
        return self._partial if self._after_cr else b""

    def end(self):
        """What is left when the stream closes, as a final line."""
        rest, self._partial = self._partial, b""
        return [(rest, b"\n")] if rest else []


class _Console:
    """Writes records with their rank prefix. On a terminal a record ended
    by \\r is drawn as one updating line (the next record of the same rank
    and stream overwrites it); anywhere else every record is its own line.
    Holds `lock` around every write, so records never interleave."""

    def __init__(self, lock):
        self._lock = lock
        self._open = None  # (sink, owner, blank) of an updating line

    def write(self, sink, owner, prefix, text, ending):
        tty = isatty(sink)
        with self._lock:
            if ending == b"\r" and not text:
                return  # a bare \r only moves the cursor
            if self._open is not None and self._open[1] != owner:
                self._close_open()
            if tty and ending == b"\r":
                out = b"\r" + prefix + text + b"\x1b[K"
                self._open = (sink, owner, not text.strip())
            elif tty and self._open is not None:
                out = b"\r" + prefix + text + b"\x1b[K\n"
                self._open = None
            else:
                out = prefix + text + b"\n"
            sink.buffer.write(out)
            sink.buffer.flush()

    def _close_open(self):
        """Ends the updating line before another rank or stream writes: a
        bar still drawn stays on its line; one its owner blanked (a
        progress bar closed with leave=False) is erased, so the next record
        takes its place."""
        sink, _, blank = self._open
        sink.buffer.write(b"\r\x1b[K" if blank else b"\n")
        sink.buffer.flush()
        self._open = None


def isatty(sink):
    try:
        return sink.isatty()
    except (AttributeError, ValueError):
        return False


class Output:
    """The launcher's output: the console, plus per-rank files when
    `folder` is given (`folder/rank.<N>/stdout` and `stderr`, N zero-padded
    to the width of the largest rank so the folders sort in rank order)."""

    def __init__(self, folder=None, size=1, timestamps=False):
        self._console = _Console(threading.Lock())
        self._folder = folder
        self._width = len(str(max(size - 1, 0)))
        self._timestamps = timestamps

    def _file(self, rank, kind):
        if self._folder is None:
            return None
        # An elastic worker has no fixed rank: its folder is its slot's.
        name = ("rank.%0*d" % (self._width, rank) if isinstance(rank, int)
                else "worker.%s" % rank)
        folder = os.path.join(self._folder, name)
        os.makedirs(folder, exist_ok=True)
        return open(os.path.join(folder, kind),
                    "wb" if isinstance(rank, int) else "ab")

    def _prefix(self, base):
        if not self._timestamps:
            return base
        return time.strftime("%a %b %d %H:%M:%S %Y").encode() + base

    def pump(self, stream, rank, kind, sink):
        """Forwards one rank's stream until it closes. `rank`: the rank,
        or an elastic worker's host:slot."""
        base = ("[%s]<%s>:" % (rank, kind)).encode()
        records = _Records()
        fd = stream.fileno()
        tty = isatty(sink)
        copy = self._file(rank, kind)
        try:
            while True:
                chunk = os.read(fd, 65536)
                if copy is not None and chunk:
                    copy.write(chunk)
                    copy.flush()
                for text, ending in (records.feed(chunk) if chunk
                                     else records.end()):
                    self._console.write(sink, (rank, kind), self._prefix(base),
                                        text, ending)
                if not chunk:
                    break
                if tty and records.preview():
                    # Drawn now; redrawn (the same) when its end arrives.
                    self._console.write(sink, (rank, kind), self._prefix(base),
                                        records.preview(), b"\r")
        finally:
            if copy is not None:
                copy.close()
            stream.close()
