"""Python's cycle collector, run on the GUI thread only.

Python collects cycles in whichever thread happens to allocate when a threshold is crossed:
often an ``asyncio.to_thread`` worker (a session load, a library scan). A collected chart or
window there cannot be deleted on that thread, so PySide defers the C++ deletion to the GUI
thread's next call into Qt. That call can be in the middle of painting a plot: deleting a
QMenu there deadlocked the window on a Qt mutex (seen in the comparison window's tests, with
the GUI thread asleep in ``QObject::~QObject``). So automatic collection is off while the
window runs, and a timer collects on the GUI thread, as pyqtgraph's ``GarbageCollector``
suggests, with the generations' own thresholds.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QTimer


class GuiThreadGarbageCollection:
    def __init__(self, interval_ms: int = 1000) -> None:
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.collect_due)
        self._was_enabled = gc.isenabled()

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
        """The oldest generation whose count passed its threshold, as Python would have."""
        counts, limits = gc.get_count(), gc.get_threshold()
        due = [g for g in range(3) if counts[g] > limits[g]]
        if due:
            gc.collect(max(due))
