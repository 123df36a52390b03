"""Draws a progress bar on stderr the way tqdm does (each update starts
with \\r, no newline until the end), one update every 0.3 s, then prints a
line on stdout 0.3 s later. With argv[1] == "blank" it ends the bar as tqdm's
leave=False does: blanks it with spaces and \\r instead of a newline. Uses
no horovod: it exercises horovodrun's forwarding."""

import sys
import time

for step in range(1, 6):
    sys.stderr.write("\rstep %d/5" % step)
    sys.stderr.flush()
    time.sleep(0.3)
if len(sys.argv) > 1 and sys.argv[1] == "blank":
    sys.stderr.write("\r" + " " * 8 + "\r")
else:
    sys.stderr.write("\n")
sys.stderr.flush()
# stdout and stderr travel apart: let stderr's last record arrive first.
time.sleep(0.3)
print("done", flush=True)
