"""Thread helpers (upstream's tests import in_thread from here)."""

import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Runs target(*args) in a new started thread and returns the thread."""
    def run():
        try:
            target(*args)
        except BaseException:
            if not silent:
                raise

    t = threading.Thread(target=run if silent else target,
                         args=() if silent else args, name=name, daemon=daemon)
    t.start()
    return t


def on_event(event, func, args=(), stop=None, check_stop_interval_s=1.0,
             silent=False):
    """Runs func(*args) in a thread once `event` is set (unless `stop` is set
    first). Returns the thread."""
    def wait_then_run():
        while not event.wait(check_stop_interval_s):
            if stop is not None and stop.is_set():
                return
        func(*args)

    return in_thread(wait_then_run, silent=silent)
