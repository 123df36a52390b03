"""A horovodrun elastic job under test: its output collected line by line
as it arrives, and the records of workers/elastic_train.py (START, READY,
STEP, RESET, FINAL) parsed from it."""

import os
import re
import stat
import subprocess
import time

from test_faults import Watched

_RECORD = re.compile(r"^\[([^\]]+)\]<stdout>:(START|READY|STEP|RESET|FINAL) (.*)$")


class ElasticJob(Watched):
    def __init__(self, argv, **popen):
        super().__init__(subprocess.Popen(argv, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True,
                                          **popen))

    def records(self, kind):
        """[{worker, field: value, ...}] of one record kind, in order."""
        found = []
        for line in list(self.out):
            m = _RECORD.match(line)
            if m and m.group(2) == kind:
                rec = {"worker": m.group(1)}
                for item in re.findall(r"(\w+)=(\[[^\]]*\]|\S+)", m.group(3)):
                    key, value = item
                    try:
                        rec[key] = float(value) if "." in value else int(value)
                    except ValueError:
                        rec[key] = value
                found.append(rec)
        return found

    def wait_record(self, kind, where=lambda r: True, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            ended = self.proc.poll() is not None
            for rec in self.records(kind):
                if where(rec):
                    return rec
            if ended or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        raise AssertionError("no %s record as wanted within %ss; stderr: %s"
                             % (kind, timeout, "\n".join(self.err[-20:])))

    def wait_err(self, text, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in l for l in self.err):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("%r not in stderr within %ss: %s"
                             % (text, timeout, "\n".join(self.err[-20:])))

    def finish(self, timeout):
        code = super().finish(timeout)
        if code is None:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the job did not end within %ss; stderr: %s"
                                 % (timeout, "\n".join(self.err[-30:])))
        return code

    def stderr(self):
        return "\n".join(self.err)

    def check_trained_exactly(self, size):
        """Every worker of the last round printed weights equal to what
        the epochs imply, at the size wanted."""
        finals = self.records("FINAL")
        assert len(finals) == size, (finals, self.stderr()[-3000:])
        assert all(f["ok"] == 1 and f["size"] == size for f in finals), finals
        return finals


def discovery(tmp_path, lines):
    """A discovery script printing the listing file, and a function that
    rewrites the listing."""
    listing = tmp_path / "hosts"
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\ncat %s\n" % listing)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)

    def write(lines):
        tmp = tmp_path / "hosts.tmp"
        tmp.write_text("".join(l + "\n" for l in lines))
        os.replace(tmp, listing)

    write(lines)
    return script, write
