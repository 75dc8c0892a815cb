"""Made sessions whose repeats recorded what else used the machine: the busy-machine tests'."""

from __future__ import annotations

from pathlib import Path

from tests.made_sessions import SWEEP, Config, build_session, burst, startup_facts
from workbench.engine.figures.machine_load import MachineLoad

# Measured on this project's two-core machine (docs: metrics, "Was the machine busy?"):
# the highest other-process share seen idle, and the lowest with a two-process CPU hog.
QUIET = MachineLoad(wall_s=3.0, cores=2, other_cpu_s=0.66, steal_s=0.0, load_avg=1.9)
HOGGED = MachineLoad(wall_s=11.7, cores=2, other_cpu_s=15.0, steal_s=0.04, load_avg=4.3)


def machine_sweep(path: Path, np1: MachineLoad | None, np2: MachineLoad | None, **kw) -> Path:
    """``SWEEP``'s slots 1 and 2 (decode 10 then 8 tok/s: it falls with slots), each
    configuration's repeats with the machine load given (None: not recorded)."""
    return build_session(
        path,
        SWEEP,
        [
            Config(burst(0, 3, slots=1, at_s=2.0), startup_facts(1, 2048), machine=np1),
            Config(
                burst(3, 3, slots=2, at_s=8.0, itl_s=0.125), startup_facts(2, 2048), machine=np2
            ),
        ],
        **kw,
    )
