"""A configuration's summary: its settings, what its server said about itself, and its
repeats combined by the catalogue's rules (``metrics``). ``summarize`` makes it from the
records of every repeat, the one way the live run, a reopened session, a replay and an import
all do, so they agree.

The figures of one request are in ``per_request``, of one repeat in ``per_run``; the
summary's wording (trust notes, flags) is in ``wording``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from workbench.engine.base.records import RequestRecord, StartupFacts
from workbench.engine.base.states import ConfigStatus
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.workloads import ConversationsWorkload, RequestsWorkload
from workbench.engine.figures import wording
from workbench.engine.figures.metrics import SUMMARY_PARTS, Combine, figure, in_part
from workbench.engine.figures.per_run import (
    RunObservations,
    RunSummary,
    summarize_run,
)
from workbench.engine.figures.vllm_names import COUNTS as VLLM_COUNTS

MEANS = (Combine.MEAN_SD, Combine.MEAN)  # the rules whose figures have a spread


@dataclass
class ConfigSummary:
    """One configuration: its settings, what the server said about itself, and its runs."""

    index: int
    label: str
    slots: int | None  # None: a server the workbench did not start, and that did not say
    ctx: int | None
    n_ctx_slot: int | None
    n_slots: int | None
    kv_unified: bool | None
    cont_batching: bool | None
    concurrency: int
    max_tokens: int
    status: str  # a ConfigStatus word
    runs: list[RunSummary]
    mean: dict[str, float | None] = field(default_factory=dict)
    sd: dict[str, float | None] = field(default_factory=dict)
    error: str | None = None
    input_tokens: int = 0
    cache_prompt: bool = False
    warmup: int = 0
    users: int | None = None  # a conversations run's conversations at once; else None
    # llama-server's RAM prompt cache (``--cache-ram``), where the workbench set it: another
    # place than the slots a conversation's history can come back from
    cache_ram_mib: int | None = None
    kv_buffer_mib: float | None = None  # the KV cache the server said it allocated
    auto_slots: bool = False  # started with -np -1: the server chose the slots (``slots``)
    n_ctx_train: int | None = None  # the model's training context, where the server said

    @property
    def conversations_per_slot(self) -> float | None:
        """Conversations over the slots they shared, where both are known."""
        if self.users is None or not self.slots or self.slots < 0:
            return None
        return self.users / self.slots

    @property
    def cache_state(self) -> str:
        """How the prompt cache stood for the measured requests: off, cold (on, nothing sent
        before them) or warm (on, after the warm-up requests)."""
        if not self.cache_prompt:
            return "off"
        return "warm" if self.warmup else "cold"

    @property
    def unasked_cache_hits(self) -> str | None:
        return wording.unasked_cache_hits(self)

    def value(self, name: str) -> Any:
        """A figure of the catalogue over the repeats, by its repeat rule; ``ok`` (the
        requests answered) is the requests less those that failed or were cancelled."""
        if name == "ok":
            requests = self.value("requests")
            if requests is None:
                return None
            return requests - (self.value("failed") or 0) - (self.value("cancelled") or 0)
        entry = figure(name)
        if entry.combine in (Combine.SETTING, Combine.POOLED, Combine.LIVE):
            return getattr(self, name)
        if entry.combine in MEANS and name in self.mean:
            return self.mean[name]  # worked out by ``over`` when it was summarized
        return entry.over(self.runs)

    def spread(self, name: str) -> float | None:
        """A figure's standard deviation across the repeats: None with fewer than two, or
        for a figure that is not a mean."""
        entry = figure(name)
        if entry.combine not in MEANS:
            return None
        if name in self.sd:
            return self.sd[name]
        return entry.sd_over(self.runs)

    def vllm_value(self, name: str) -> float | None:
        """A figure as vLLM names it (``vllm_names.COLUMNS``), by the catalogue's rules:
        its counts summed over repeats, the rest averaged."""
        rule = Combine.SUM if name in VLLM_COUNTS else Combine.MEAN
        return rule.apply([run.vllm.get(name) for run in self.runs])

    @property
    def checks_failed(self) -> list[str]:
        return wording.checks_failed(self)

    @property
    def cross_check_failures(self) -> str | None:
        """The failed cross-checks as one line (the CSV's cell), or None."""
        return "; ".join(self.checks_failed) or None

    @property
    def trust_notes(self) -> list[str]:
        return wording.trust_notes(self)

    @property
    def not_same_task(self) -> str | None:
        return wording.not_same_task(self)

    @property
    def flags(self) -> list[str]:
        return wording.flags(self)

    @property
    def client_limited(self) -> str | None:
        return wording.client_limited(self)

    @property
    def over_saturated(self) -> str | None:
        return wording.over_saturated(self)

    @property
    def machine_busy(self) -> str | None:
        return wording.machine_busy(self)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_config(
    index: int,
    label: str,
    server: ServerSettings,
    workload: WorkloadSettings,
    facts: StartupFacts,
    runs: list[RunSummary],
    status: str = ConfigStatus.OK,
    error: str | None = None,
    slots_override: int | None = None,
    managed: bool = True,
) -> ConfigSummary:
    """``managed``: the workbench started the server with ``server``'s settings, so they are
    facts; otherwise (an external server, an imported file) only what the server itself
    said is known, and the rest is None. The figures with a spread keep their mean and sd
    (the JSON export's ``mean`` and ``sd``), by the catalogue's rule."""
    spread = [f for f in in_part(*SUMMARY_PARTS) if f.spread]
    mean = {f.key: f.over(runs) for f in spread}
    sd = {f.key: f.sd_over(runs) for f in spread}
    known = server.slots if managed else facts.n_slots
    slots = slots_override if slots_override is not None else known
    return ConfigSummary(
        index=index,
        label=label,
        slots=slots,
        ctx=facts.n_ctx or (server.ctx if managed else None),
        n_ctx_slot=facts.n_ctx_slot,
        n_slots=facts.n_slots,
        kv_unified=facts.kv_unified,
        cont_batching=server.cont_batching if managed else None,
        concurrency=workload.effective_concurrency,
        max_tokens=workload.max_tokens,
        input_tokens=workload.input_tokens if isinstance(workload, RequestsWorkload) else 0,
        cache_prompt=workload.cache_prompt,
        warmup=workload.warmup,
        users=workload.users if isinstance(workload, ConversationsWorkload) else None,
        cache_ram_mib=server.cache_ram_mib if managed else None,
        kv_buffer_mib=facts.kv_buffer_mib,
        auto_slots=managed and server.slots == -1,
        n_ctx_train=facts.n_ctx_train,
        status=status,
        runs=runs,
        mean=mean,
        sd=sd,
        error=error,
    )


def summarize(
    index: int,
    label: str,
    server: ServerSettings,
    workload: WorkloadSettings,
    facts: StartupFacts,
    records: Sequence[RequestRecord],
    observed: dict[int, RunObservations] | None = None,
    *,
    status: str = ConfigStatus.OK,
    error: str | None = None,
    slots: int | None = None,
    managed: bool = True,
) -> ConfigSummary:
    """One configuration from the records of all its repeats, one ``RunSummary`` per repeat
    (warm-ups left out) with what else was measured about it (``observed``, by repeat).
    ``slots``: the slots the server ran with, when known. The one summary of a
    configuration: live, on reopening, in a replay and for an import."""
    observed = observed or {}
    repeats = sorted({r.repeat for r in records if not r.warmup})
    runs = [
        summarize_run(
            [r for r in records if r.repeat == k and not r.warmup], observed.get(k), workload
        )
        for k in repeats
    ]
    return summarize_config(
        index, label, server, workload, facts, runs, status, error, slots, managed
    )
