"""The machine meter against a real CPU hog: other processes' CPU time is counted, the
workbench's own (and its children's) is not."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from tests.hog import cpu_hog
from workbench.engine.figures.machine_load import machine_busy_reason
from workbench.engine.measure.machine_load import MachineMeter, memory_stall_s, tree_cpu_s


def test_a_cpu_hog_makes_the_machine_busy() -> None:
    with cpu_hog(2) as pids:
        assert all(psutil.pid_exists(p) for p in pids)
        meter = MachineMeter(None)
        time.sleep(2.0)
        load = meter.read()
    assert load.other_cpu_share > 0.5  # two busy loops on two cores, less what others left
    assert "other processes used" in (machine_busy_reason(load) or "")


def test_the_workbenchs_own_children_are_not_other_processes() -> None:
    # A child that burns CPU for a second and ends (as a client worker does) is the
    # workbench's own time: it stays in its tree's count after it ended.
    me = psutil.Process()
    before = tree_cpu_s(me, None)
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    assert tree_cpu_s(me, None) - before >= 0.95


def test_memory_stall_reads_the_some_line() -> None:
    text = "some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\nfull avg10=0.00 total=10\n"
    assert memory_stall_s(text) == 2.5
    assert memory_stall_s("nonsense") is None
