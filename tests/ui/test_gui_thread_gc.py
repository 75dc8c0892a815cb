"""Cycles are collected on the GUI thread's timer only while the window runs."""

from __future__ import annotations

import gc
import threading
import weakref

from workbench.ui.gui_thread_gc import GuiThreadGarbageCollection


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cycle collector frees it


def test_a_worker_thread_never_collects_and_the_timer_does(qapp):
    collection = GuiThreadGarbageCollection()
    collection.start()
    try:
        assert not gc.isenabled()
        node = Node()
        gone = weakref.ref(node)
        del node

        kept: list[list[int]] = []

        def allocate() -> None:  # far past generation 0's threshold, on another thread
            kept.extend([] for _ in range(10 * gc.get_threshold()[0]))

        worker = threading.Thread(target=allocate)
        worker.start()
        worker.join()
        assert gone() is not None  # nobody collected on the worker
        collection.collect_due()
        assert gone() is None
    finally:
        collection.stop()
    assert gc.isenabled() and not collection.timer.isActive()
