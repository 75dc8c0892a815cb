"""Sliding-window attention (SWA): which layers of a model keep only a window of recent
tokens, and how many cells llama-server gives their cache.

llama.cpp holds such a model's KV in two caches (``llama_kv_cache_iswa``): the full layers
get the slot's whole context, the windowed layers ``pad256(min(full, window x sequences +
-ub))`` cells per stream, where the sequences are all the slots when the pool is unified
(``--kv-unified``, ``-np -1``) and one otherwise; ``--swa-full`` gives them the full size.

Which layers are windowed is set per architecture in llama.cpp's hparams loading
(``set_swa_pattern(period)``: every ``period``-th layer is full, the others windowed); a GGUF
may override it with ``{arch}.attention.sliding_window_pattern`` (a period, or one flag per
layer). The window is ``{arch}.attention.sliding_window``. An architecture with a window key
that is not in ``SWA_PERIODS`` gets no window here: its KV is then the full-cache upper bound,
and ``read_window`` says so in a note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from workbench.engine.models.gguf_header import Value

CELL_PAD = 256  # llama.cpp pads the SWA cache to 256 cells whatever the backend
DEFAULT_UBATCH = 512  # llama-server's -ub
DEFAULT_BATCH = 2048  # llama-server's -b


@dataclass(frozen=True)
class ArchitectureWindow:
    """What llama.cpp's loader hard-codes for one architecture."""

    period: int  # every period-th layer is full (set_swa_pattern(period))
    default_tokens: int = 0  # the window when the GGUF has no sliding_window key; 0: none


# From llama.cpp's per-architecture ``load_arch_hparams`` (src/models/<arch>.cpp, formerly
# llama-model.cpp's load_hparams): the period passed to ``set_swa_pattern`` (dense last).
SWA_PERIODS: dict[str, ArchitectureWindow] = {
    "gemma2": ArchitectureWindow(2, default_tokens=4096),
    "gemma3": ArchitectureWindow(6),
    "gemma-embedding": ArchitectureWindow(6),
    "cohere2": ArchitectureWindow(4),
    "gpt-oss": ArchitectureWindow(2),
}


@dataclass(frozen=True)
class SlidingWindow:
    """A model's window in tokens and, per layer, whether that layer is windowed."""

    tokens: int
    windowed: tuple[bool, ...]

    @property
    def windowed_layers(self) -> int:
        return sum(self.windowed)


def swa_pattern(period: int, layers: int) -> tuple[bool, ...]:
    """llama.cpp's ``set_swa_pattern(period)``: layer ``i`` is windowed unless it is the last
    of its period (``i % period == period - 1``); period 0 windows every layer."""
    return tuple(period == 0 or i % period < period - 1 for i in range(layers))


def read_window(
    fields: Mapping[str, Value], arch: str, layers: int
) -> tuple[SlidingWindow | None, str]:
    """The model's sliding window from its GGUF header, and a note when it has one that this
    module cannot place (then None: every layer is counted with a full cache)."""
    known = SWA_PERIODS.get(arch)
    tokens = fields.get(f"{arch}.attention.sliding_window")
    if tokens is None and known is not None:
        tokens = known.default_tokens
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0:
        return None, ""
    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, tuple) and len(pattern) == layers:
        return SlidingWindow(tokens, tuple(bool(p) for p in pattern)), ""
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern >= 0:
        return SlidingWindow(tokens, swa_pattern(pattern, layers)), ""
    if known is None:
        return None, (
            f"architecture '{arch}' has a {tokens}-token sliding window, but which of its "
            "layers use it is not known here: its KV is counted as a full cache on every "
            "layer, an upper bound"
        )
    return SlidingWindow(tokens, swa_pattern(known.period, layers)), ""


def micro_batch(batch: int | None, ubatch: int | None) -> int:
    """The micro-batch a server runs with ``-b batch -ub ubatch`` (None: its default): never
    more than the batch."""
    return min(batch or DEFAULT_BATCH, ubatch or DEFAULT_UBATCH)


def windowed_cells(
    full_cells: int,
    slots: int,
    unified: bool,
    window: int,
    ubatch: int = DEFAULT_UBATCH,
    swa_full: bool = False,
) -> int:
    """The cells of the windowed layers' cache, all streams together, beside a full cache of
    ``full_cells`` (all streams together): one stream per slot, or one shared by all slots
    when unified, each ``pad256(min(full per stream, window x sequences + ubatch))``."""
    streams = 1 if unified else slots
    per_stream = full_cells // streams
    if swa_full:
        return full_cells
    sequences = slots if unified else 1
    wanted = min(per_stream, window * sequences + ubatch)
    return math.ceil(wanted / CELL_PAD) * CELL_PAD * streams
