"""Draws a progress bar on stderr the way tqdm does (each update starts
with \\r, no newline until the end), one update every 0.3 s, then prints a
line on stdout. Uses no horovod: it exercises horovodrun's forwarding."""

import sys
import time

for step in range(1, 6):
    sys.stderr.write("\rstep %d/5" % step)
    sys.stderr.flush()
    time.sleep(0.3)
sys.stderr.write("\n")
sys.stderr.flush()
print("done", flush=True)
