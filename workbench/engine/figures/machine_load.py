"""When something other than the server and the workbench used the machine during a run.

"Client-limited" (``client_limits``) is the workbench's own load: its measuring loop or its
late dispatch shaped the numbers. "Busy machine" is everything else: other processes' CPU
time, a hypervisor's steal, swapping, memory pressure, a throttled CPU, other processes on the
GPU. Either makes the figures the machine's as much as the server's. The thresholds live
here, with the rule that applies them; the catalogue (``metrics``) reads them to print its
definitions.
"""

from __future__ import annotations

from dataclasses import dataclass

# From the spread measured on a quiet and a CPU-hogged two-core machine (docs: metrics, "Was
# the machine busy?").
BUSY_OTHER_CPU_SHARE = 0.25  # other processes' CPU time over the CPUs' capacity
BUSY_STEAL_SHARE = 0.10  # a hypervisor's steal over the CPUs' capacity
BUSY_SWAP_BYTES_PER_S = 1 * 2**20  # swapped in + out, per second of the repeat
BUSY_PRESSURE_SHARE = 0.10  # PSI "some" memory stall over the repeat's wall time
BUSY_FREQ_SHARE = 0.5  # lowest current / top CPU frequency seen

MACHINE_BUSY_RULE = (
    f"other processes over {BUSY_OTHER_CPU_SHARE:.0%} of the CPUs, steal over "
    f"{BUSY_STEAL_SHARE:.0%}, swapping over {BUSY_SWAP_BYTES_PER_S / 2**20:g} MiB/s, memory "
    f"pressure over {BUSY_PRESSURE_SHARE:.0%} of the time, a CPU throttled below "
    f"{BUSY_FREQ_SHARE:.0%} of its top frequency, or another process on the GPU"
)


@dataclass(frozen=True, kw_only=True)
class MachineLoad:
    """What else used the machine during one repeat. None: the OS does not say.

    ``judged`` is False where the machine measured is not the server's (an external server
    by its base URL): its load is then unknown, never quiet."""

    wall_s: float
    cores: int
    other_cpu_s: float  # CPU time of processes other than the server's and the workbench's
    steal_s: float | None = None  # time a hypervisor gave the CPUs to another machine
    load_avg: float | None = None  # the 1-minute load average at the end
    swap_in_bytes: int | None = None
    swap_out_bytes: int | None = None
    memory_pressure_s: float | None = None  # PSI: time some task stalled on memory
    cpu_freq_share: float | None = None  # lowest current / max CPU frequency seen
    gpu_other_processes: int | None = None  # other processes NVML listed on the GPUs
    judged: bool = True

    @property
    def capacity_s(self) -> float:
        """CPU seconds the machine had during the repeat (every core)."""
        return self.wall_s * max(self.cores, 1)

    @property
    def other_cpu_share(self) -> float:
        return self.other_cpu_s / self.capacity_s if self.capacity_s > 0 else 0.0


def describe(load: MachineLoad) -> str:
    """Every figure of a repeat's machine load in one line, ``unknown`` where the OS (or
    NVML) does not say, as ``show`` prints it."""

    def known(value: object, text: str) -> str:
        return "unknown" if value is None else text

    swap = load.swap_in_bytes, load.swap_out_bytes
    parts = [
        f"other processes {load.other_cpu_share:.0%} of {load.cores} cores",
        "steal " + known(load.steal_s, f"{(load.steal_s or 0) / load.capacity_s:.0%}"),
        "load average " + known(load.load_avg, f"{load.load_avg or 0:.2f}"),
        "swap in/out "
        + known(swap[0], f"{(swap[0] or 0) / 2**20:.1f}/{(swap[1] or 0) / 2**20:.1f} MiB"),
        "memory stall " + known(load.memory_pressure_s, f"{load.memory_pressure_s or 0:.2f} s"),
        "CPU frequency " + known(load.cpu_freq_share, f"{load.cpu_freq_share or 0:.0%} of top"),
        "other GPU processes " + known(load.gpu_other_processes, f"{load.gpu_other_processes}"),
    ]
    text = ", ".join(parts)
    return text if load.judged else f"{text} (this machine's; the server's is unknown)"


def machine_busy_reason(load: MachineLoad | None) -> str | None:
    """Why the machine was busy during a repeat, or None (quiet, or not judged)."""
    if load is None or not load.judged or load.wall_s <= 0:
        return None
    reasons = []
    if load.other_cpu_share > BUSY_OTHER_CPU_SHARE:
        reasons.append(
            f"other processes used {load.other_cpu_share:.0%} of the CPUs "
            f"({load.other_cpu_s:.1f} s over {load.wall_s:.1f} s x {load.cores} cores)"
        )
    if load.steal_s is not None and load.steal_s / load.capacity_s > BUSY_STEAL_SHARE:
        reasons.append(f"steal {load.steal_s / load.capacity_s:.0%} of the CPUs")
    swapped = (load.swap_in_bytes or 0) + (load.swap_out_bytes or 0)
    if swapped / load.wall_s > BUSY_SWAP_BYTES_PER_S:
        reasons.append(f"swapped {swapped / 2**20:.1f} MiB")
    stalled = (load.memory_pressure_s or 0.0) / load.wall_s
    if stalled > BUSY_PRESSURE_SHARE:
        reasons.append(f"memory pressure {stalled:.0%} of the time")
    if load.cpu_freq_share is not None and load.cpu_freq_share < BUSY_FREQ_SHARE:
        reasons.append(f"CPU throttled to {load.cpu_freq_share:.0%} of its top frequency")
    if load.gpu_other_processes:
        reasons.append(f"{load.gpu_other_processes} other process(es) on the GPU")
    return "; ".join(reasons) or None


def machine_unknown_reason(load: MachineLoad | None) -> str | None:
    """Why the server's machine load is unknown (an external server), or None."""
    if load is not None and not load.judged:
        return "the server runs elsewhere (a base URL): its machine's load is unknown"
    return None
