"""Python's cycle collector, run on the GUI thread only.

Python collects cycles in whichever thread happens to allocate when a threshold is crossed:
often an ``asyncio.to_thread`` worker (a session load, a library scan). A collected chart or
window there cannot be deleted on that thread, so PySide defers the C++ deletion to the GUI
thread's next call into Qt. That call can be in the middle of painting a plot: deleting a
QMenu there deadlocked the window on a Qt mutex (seen in the comparison window's tests, with
the GUI thread asleep in ``QObject::~QObject``). So automatic collection is off while the
window runs, and a timer collects on the GUI thread, as pyqtgraph's ``GarbageCollector``
suggests: the young generations by their own thresholds, the old one at most once a minute.
"""

from __future__ import annotations

import gc
import time

from PySide6.QtCore import QTimer

FULL_EVERY_S = 60.0


class GuiThreadGarbageCollection:
    def __init__(self, interval_ms: int = 1000) -> None:
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.collect_due)
        self._was_enabled = gc.isenabled()
        self._last_full = time.monotonic()

    def start(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()
        self.timer.start()

    def stop(self) -> None:
        """Collect the young garbage left (what the window made since the timer last ran),
        here, then give collection back to Python. A full collection took ~30 ms per
        stop in the tests, which stop after every window test."""
        self.timer.stop()
        gc.collect(1)
        if self._was_enabled:
            gc.enable()

    def collect_due(self) -> None:
        """The young generations when their counts passed Python's thresholds; the oldest
        only when its own count did and ``FULL_EVERY_S`` has passed since the last full
        collection. Python itself delays full collections while few objects are new to the
        old generation; a full one of a large opened session's objects took 0.6 s, so on
        the GUI thread they are kept rare."""
        counts, limits = gc.get_count(), gc.get_threshold()
        due = [g for g in range(3) if counts[g] > limits[g]]
        if not due:
            return
        now = time.monotonic()
        if max(due) == 2 and now - self._last_full >= FULL_EVERY_S:
            self._last_full = now
            gc.collect(2)
        else:
            gc.collect(min(max(due), 1))
