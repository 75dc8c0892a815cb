"""One configuration's run, on the engine loop: its server up (or the external one's facts),
its prompts built, warm-up and repeats measured, its summary published.

Every way out of a configuration (the end, a ``WorkbenchError``, a crashed server, a
cancel) goes through the same ``finally``: the server stopped, the slot lanes named from
its complete log, the summary and what it calls for said, ``ConfigFinished`` published. A
failed configuration lets the next one run; a cancel propagates to the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.engine.analysis.planner import context_shortfall, request_tokens
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import RequestRecord, StartupFacts
from workbench.engine.base.states import ConfigStatus, NoticeLevel, ServerState
from workbench.engine.config.experiment import RunConfig
from workbench.engine.config.workloads import ConversationsWorkload
from workbench.engine.events import (
    ClientLoadMeasured,
    ConfigFinished,
    ConfigStarted,
    MachineLoadMeasured,
    Notice,
    ServerCounters,
    ServerReady,
    ServerStateChanged,
    SlotMatched,
    StallsFound,
)
from workbench.engine.figures.per_run import RunObservations
from workbench.engine.figures.saturation import LEFT_UNSENT
from workbench.engine.figures.stalls import found_stalls
from workbench.engine.figures.summaries import ConfigSummary, summarize
from workbench.engine.measure.client_workers import WorkerLoads, run_in_workers
from workbench.engine.measure.conversations import (
    plan_conversations,
    plan_replay,
    run_conversations,
)
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.sampler import ServerSampler, fetch_counters
from workbench.engine.measure.sized_prompts import SizedPrompts
from workbench.engine.measure.workload import (
    ClientLoadMeter,
    arrival_offsets,
    make_client,
    plan_records,
    run_requests,
)
from workbench.engine.models.memory import layout_of
from workbench.engine.run import notices
from workbench.engine.run.prompt_building import build_prompts
from workbench.engine.run.session_setup import RunSetup
from workbench.engine.server.llama_server import LlamaServer, describe_exit
from workbench.engine.server.slot_log import SlotLog

SLOT_LOG_INTERVAL_S = 0.25


@dataclass
class Measured:
    """What one configuration's run has gathered so far: kept however it ends."""

    records: list[RequestRecord] = field(default_factory=list)
    observed: dict[int, RunObservations] = field(default_factory=dict)
    status: ConfigStatus = ConfigStatus.OK
    error: str | None = None
    facts: StartupFacts = field(default_factory=StartupFacts)
    slots: int | None = None
    slot_log: SlotLog | None = None  # a managed server's log, read for the slot lanes


class ConfigRuns:
    """Runs an experiment's configurations one after another, with what they share: the
    setup, the request index that goes on from one to the next, the server now running
    (``stop_server`` is the runner's last word on it) and the summaries so far."""

    def __init__(
        self, setup: RunSetup, emit: Callable[[Any], None], summaries: list[ConfigSummary]
    ) -> None:
        self.setup = setup
        self.emit = emit
        self.external = setup.external
        self.summaries = summaries
        self._next_index = setup.next_index
        self._server: LlamaServer | None = None

    def stop_server(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    async def run(self, config: RunConfig) -> None:
        """One configuration: a ``WorkbenchError`` fails it (said, and the run goes on);
        a cancel is recorded, then propagates."""
        workload = config.workload
        self.emit(ConfigStarted(config, workload.per_repeat * workload.repeats))
        self._warn_about_reuse(config)
        measured = Measured()
        watch: asyncio.Task[None] | None = None
        planned_per_slot = self._planned_per_slot(config)
        try:
            base_url, pid = await self._bring_up(config, measured, planned_per_slot)
            if measured.slot_log is not None:
                watch = asyncio.create_task(self._watch_slots(measured.slot_log, measured.records))
            await self._measure(config, base_url, pid, measured)
        except asyncio.CancelledError:
            measured.status, measured.error = ConfigStatus.CANCELLED, "cancelled by the user"
            raise
        except WorkbenchError as exc:
            measured.status, measured.error = ConfigStatus.FAILED, str(exc)
            self.emit(notices.about_config(config, str(exc), NoticeLevel.ERROR))
        finally:
            await self._finish(config, measured, watch)

    def _warn_about_reuse(self, config: RunConfig) -> None:
        """Fewer prompts than requests: said once, with the first configuration."""
        workload = config.workload
        size = self.setup.prompts.size
        needed = self._next_index + workload.warmup + workload.per_repeat * workload.repeats
        if size is not None and size < needed and config.index == 0:
            self.emit(notices.prompts_reused(size, needed, config.index))

    def _planned_per_slot(self, config: RunConfig) -> int | None:
        """A managed server's context per slot as its settings plan it, said at once if a
        request will not fit."""
        if self.external or config.server.slots <= 0 or config.server.ctx <= 0:
            return None
        layout = layout_of(config.server)
        self._warn_about_context(config, layout.cells_per_slot)
        return layout.cells_per_slot

    async def _bring_up(
        self, config: RunConfig, measured: Measured, planned_per_slot: int | None
    ) -> tuple[str, int | None]:
        """The server's address and process id: the external one as probed, or a managed
        one started, with its log followed for the slot lanes."""
        idx = config.index
        if self.external:
            server = self.setup.external_server
            assert server is not None
            measured.slots, measured.facts = server.slots, server.facts
            self.emit(ServerReady(idx, server.base_url, None, [], None, server.facts, server.slots))
            return server.base_url, None
        started = await self._start_server(config)
        facts = measured.facts = started.facts
        measured.slots = facts.n_slots or config.server.slots
        self.emit(
            ServerReady(
                idx,
                started.base_url,
                started.pid,
                started.command,
                str(started.log_path),
                facts,
                measured.slots,
            )
        )
        if facts.n_ctx_slot is not None and facts.n_ctx_slot != planned_per_slot:
            self._warn_about_context(config, facts.n_ctx_slot)
        measured.slot_log = SlotLog(started.log_path)
        return started.base_url, started.pid

    async def _measure(
        self, config: RunConfig, base_url: str, pid: int | None, measured: Measured
    ) -> None:
        """Warm-up (one at a time), then each repeat with its sampler and the server's
        counters before and after; the server checked alive after each."""
        idx, workload = config.index, config.workload
        per_repeat = workload.per_repeat
        headers = self.setup.headers
        prompts, system_prompt = await self._size_prompts(config, base_url)
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(make_client(base_url, workload, headers))
            if workload.warmup:
                warm = self._plan(idx, -1, workload.warmup, prompts, warmup=True)
                sequential = workload.one_at_a_time()
                await run_requests(client, sequential, warm, [0.0] * len(warm), self.emit)
                await self._check_server_alive(idx, warm)
            for repeat in range(workload.repeats):
                planned = self._plan(idx, repeat, per_repeat, prompts)
                trace = self.setup.traces.get(idx)
                if trace is not None:
                    trace.name_lines(planned)
                offsets = (
                    trace.offsets
                    if trace is not None
                    else arrival_offsets(workload, per_repeat, workload.seed + repeat)
                )
                sampler = ServerSampler(self.emit, idx, base_url, pid, headers=headers)
                sampler.start()
                self.emit(ServerStateChanged(idx, ServerState.RUNNING, f"repeat {repeat + 1}"))
                measured.records += planned  # kept even if the run is cut short
                before = await asyncio.to_thread(fetch_counters, base_url, headers)
                one_client = workload.workers == 1 and not self.setup.load_from
                meter = ClientLoadMeter() if one_client else WorkerLoads()
                try:
                    if isinstance(workload, ConversationsWorkload):
                        conversations = (
                            plan_replay(planned, self.setup.conversations)
                            if workload.conversations_file
                            else plan_conversations(planned, workload.users, system_prompt)
                        )
                        await run_conversations(
                            client, workload, conversations, self.emit, measured.slots
                        )
                    elif isinstance(meter, WorkerLoads):
                        await run_in_workers(
                            base_url,
                            headers,
                            workload,
                            planned,
                            offsets,
                            self.emit,
                            meter,
                            trace.follows if trace is not None else None,
                            trace.output_tokens if trace is not None else None,
                            self.setup.load_from,
                        )
                    else:
                        await run_requests(
                            client,
                            workload,
                            planned,
                            offsets,
                            self.emit,
                            trace.follows if trace is not None else None,
                            trace.output_tokens if trace is not None else None,
                        )
                finally:
                    sampler.stop()
                    load = meter.read()
                    self.emit(ClientLoadMeasured(idx, repeat, load))
                    if (machine := sampler.machine_load()) is not None:
                        self.emit(MachineLoadMeasured(idx, repeat, machine))
                    measured.observed[repeat] = RunObservations(
                        load, before, None, measured.slot_log is not None, machine
                    )
                after = await asyncio.to_thread(fetch_counters, base_url, headers)
                measured.observed[repeat] = replace(measured.observed[repeat], counters_after=after)
                self.emit(ServerCounters(idx, repeat, before, after))
                if unsent := sum(r.error == LEFT_UNSENT for r in planned):
                    self.emit(notices.stopped_when_saturated(config, repeat, unsent))
                await self._check_server_alive(idx, measured.records)
                self.emit(ServerStateChanged(idx, ServerState.HEALTHY, f"repeat {repeat + 1} done"))

    async def _finish(
        self, config: RunConfig, measured: Measured, watch: asyncio.Task[None] | None
    ) -> None:
        """However the configuration ended: its server stopped, its slots named from the
        complete log, its summary said and published."""
        log_tail = self._server.log_tail(40) if self._server is not None else ""
        self.stop_server()
        if watch is not None:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)  # a Stop still propagates
        records = measured.records
        if measured.slot_log is not None:  # the log is complete now: the last requests' slots
            self._name_slots(measured.slot_log, records)
            records = measured.slot_log.named(records)
        summary = self._summarize(
            config,
            records,
            measured.observed,
            measured.facts,
            measured.slots,
            measured.status,
            measured.error,
        )
        for notice in notices.about_summary(config, summary):
            self.emit(notice)
        if stalls := found_stalls(records):
            self.emit(StallsFound(config.index, stalls))
        self.emit(ConfigFinished(config.index, measured.status, measured.error, log_tail, summary))

    async def _watch_slots(self, slot_log: SlotLog, records: list[RequestRecord]) -> None:
        """Name the slot of each finished request as the server logs it (lanes by slot)."""
        while True:
            await asyncio.sleep(SLOT_LOG_INTERVAL_S)
            if not self._name_slots(slot_log, records):
                return

    def _name_slots(self, slot_log: SlotLog, records: list[RequestRecord]) -> bool:
        """Emit the slots the log explains now. The lanes are a view: a log this cannot
        read costs them (a warning), never the run."""
        try:
            matched = slot_log.assign(records)
        except Exception as exc:
            self.emit(notices.slot_lanes_lost(exc))
            return False
        for m in matched:
            r = m.record
            self.emit(SlotMatched(r.config_index, r.repeat, r.index, m.slot))
        return True

    def _plan(
        self,
        idx: int,
        repeat: int,
        count: int,
        prompts: PromptSource | SizedPrompts,
        warmup: bool = False,
    ) -> list[RequestRecord]:
        planned = plan_records(idx, repeat, self._next_index, count, prompts, warmup)
        self._next_index += count
        return planned

    async def _size_prompts(
        self, config: RunConfig, base_url: str
    ) -> tuple[PromptSource | SizedPrompts, str]:
        """This configuration's prompts and a conversations run's system prompt, built
        before its clock starts (``prompt_building``), and what the run says about how."""
        setup = self.setup
        built = await build_prompts(
            config,
            setup.prompts,
            self._next_index,
            base_url,
            setup.headers,
            self.external,
            setup.base_dir,
            setup.conversations,
            setup.traces.get(config.index),
        )
        if built.notice is not None:
            self.emit(Notice(*built.notice, config.index))
        return built.source, built.system_prompt

    async def _start_server(self, config: RunConfig) -> LlamaServer:
        setup = self.setup
        assert setup.binary is not None
        idx = config.index
        server = LlamaServer(
            setup.binary,
            setup.models[config.server.model],
            config.server,
            setup.server_log(config),
            on_state=lambda state, detail: self.emit(ServerStateChanged(idx, state, detail)),
        )
        self._server = server
        await server.start()
        return server

    async def _check_server_alive(self, idx: int, records: list[RequestRecord]) -> None:
        """Raise if the server died. Streams can break a moment before the process is
        reaped, so after failures the exit gets a short grace period to show."""
        server = self._server
        if server is None:
            return
        grace = 1.0 if any(not r.ok for r in records) else 0.0
        code = await asyncio.to_thread(server.wait_exit, grace)
        if code is not None:
            why = describe_exit(code)
            server.state = ServerState.CRASHED
            self.emit(ServerStateChanged(idx, ServerState.CRASHED, why))
            raise WorkbenchError(
                f"llama-server {why} mid-run; its in-flight requests are recorded as failed.\n"
                f"  log: {server.log_path}\n  last log lines:\n"
                + "\n".join("    " + line for line in server.log_tail(15).splitlines())
            )

    def _warn_about_context(self, config: RunConfig, per_slot: int) -> None:
        """Say before the requests go (in the terminal, the window and the session) that
        they will not fit a slot: planned from the settings, then from the server's log
        when that differs."""
        workload = config.workload
        trace = self.setup.traces.get(config.index)
        need = (
            trace.longest_request
            if trace is not None
            else request_tokens(workload.longest_prompt_tokens, workload.max_tokens)
        )
        if why := context_shortfall(per_slot, need):
            self.emit(notices.about_config(config, why))

    def _summarize(
        self,
        config: RunConfig,
        records: list[RequestRecord],
        observed: dict[int, RunObservations],
        facts: StartupFacts,
        slots: int | None,
        status: str,
        error: str | None,
    ) -> ConfigSummary:
        summary = summarize(
            config.index,
            config.label,
            config.server,
            config.workload,
            facts,
            records,
            observed,
            status=status,
            error=error,
            slots=slots,
            managed=not self.external,
        )
        self.summaries.append(summary)
        return summary
