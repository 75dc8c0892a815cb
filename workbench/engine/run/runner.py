"""Running an experiment: one owner for the servers, the streams and the session.

The runner's engine thread has its own asyncio loop, where only streams run; sampling and
session writing have threads of their own; consumers (CLI, window) read the event bus. Every
way out (the end, ``cancel()``, an exception, a crashed server) goes through the same
``finally``: streams cancelled, server stopped, session closed with its status.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from workbench.engine.analysis.planner import context_shortfall, kv_layout, request_tokens
from workbench.engine.base.errors import OutputDirError, WorkbenchError
from workbench.engine.base.records import Hardware, RequestRecord, StartupFacts
from workbench.engine.base.words import plural
from workbench.engine.config.experiment import Experiment, RunConfig
from workbench.engine.events import (
    ClientLoadMeasured,
    ConfigFinished,
    ConfigStarted,
    EventBus,
    ExperimentFinished,
    ExperimentStarted,
    Notice,
    ServerCounters,
    ServerReady,
    ServerStateChanged,
    SlotMatched,
)
from workbench.engine.figures.summaries import (
    ConfigSummary,
    RunObservations,
    summarize_config,
    summarize_run,
)
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.measure.prompts import PromptSource, load_prompts
from workbench.engine.measure.sampler import ServerSampler, fetch_counters
from workbench.engine.measure.sized_prompts import SizedPrompts
from workbench.engine.measure.workload import (
    ClientLoadMeter,
    arrival_offsets,
    make_client,
    plan_records,
    run_requests,
)
from workbench.engine.run.prompt_building import build_prompts
from workbench.engine.server.discovery import find_server_binary, resolve_model
from workbench.engine.server.external import (
    ExternalServer,
    api_key_headers,
    probe_external,
    split_credentials,
)
from workbench.engine.server.llama_server import LlamaServer, describe_exit
from workbench.engine.server.slot_log import SlotLog
from workbench.engine.store import SessionWriter, create_session, open_session, reopen_session

SWITCH_INTERVAL_S = 0.0005
SLOT_LOG_INTERVAL_S = 0.25


@dataclass(frozen=True)
class RunOptions:
    out_dir: Path
    base_url: str | None = None
    server_bin: str | None = None
    api_key_env: str | None = None  # the variable's name; its value is read, never kept
    resume: Path | None = None  # a session whose run did not finish: go on in it


@dataclass(frozen=True)
class RunTables:
    """The CSV tables a finished run leaves next to its session, or why they are missing:
    the run's measurements are in the session either way, so a table that cannot be
    written is reported, not fatal to the result."""

    concurrency: Path
    requests: Path
    error: str | None = None


@dataclass(frozen=True)
class RunResult:
    status: str
    session_path: Path
    summaries: list[ConfigSummary]
    error: str | None = None
    tables: RunTables | None = None  # written by the run's lifecycle once the run ended


def check_out_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise OutputDirError(
            f"cannot write to the output folder {out_dir}: {exc.strerror or exc}"
        ) from None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "experiment"


class ExperimentRunner:
    """Runs an experiment on its own thread and publishes what happens on ``bus``.

    ``prepare()`` checks everything a user can get wrong before anything starts (binary, model,
    output folder, base URL) and raises a ``WorkbenchError`` with the reason.
    """

    def __init__(self, experiment: Experiment, options: RunOptions, bus: EventBus | None = None):
        self.experiment = experiment
        self.options = options
        self.bus = bus or EventBus()
        self.external = options.base_url is not None
        self.configs: list[RunConfig] = experiment.configs(external=self.external)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        base = f"{_slug(experiment.name)}-{stamp}"
        self.session_path = options.out_dir / f"{base}.session.sqlite"
        if options.resume is not None:
            self.session_path = options.resume
            base = options.resume.name.removesuffix(".session.sqlite")
        self.log_dir = options.out_dir / "logs" / base
        self.binary: str | None = None
        self.binary_text = ""  # the binary and how it was found, as the window shows it
        self.models: dict[str, Path] = {}
        self.prompts: PromptSource | None = None
        self.external_server: ExternalServer | None = None
        self.summaries: list[ConfigSummary] = []
        self._thread: threading.Thread | None = None
        self._ended = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._server: LlamaServer | None = None
        self._writer: SessionWriter | None = None
        self._next_index = 0
        # Said when the experiment starts: which binary runs and how it was found, which
        # kind of server an external one is, and what a resumed session keeps.
        self._start_notices: list[str] = []
        self._status = "complete"
        self._error: str | None = None
        self._cancel_requested = threading.Event()
        self._main_task_cancelled = False
        self._headers: dict[str, str] = {}  # authorization for an external server

    # -- set-up -----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Everything a user can get wrong is checked before the output folder is made: a
        run refused here (no model, nothing at the base URL) leaves nothing behind."""
        base_dir = Path(self.experiment.path).parent if self.experiment.path else None
        prompt_specs = {c.workload.prompts for c in self.configs}
        if len(prompt_specs) > 1:
            raise WorkbenchError("a sweep over [workload] prompts is not supported")
        self.prompts = load_prompts(prompt_specs.pop(), base_dir)
        if self.external:
            assert self.options.base_url is not None
            clean, self._headers = split_credentials(self.options.base_url)
            self._headers.update(api_key_headers(self.options.api_key_env))
            self.options = replace(self.options, base_url=clean)
            self.external_server = probe_external(clean, self._headers)
            self._start_notices.append(self.external_server.description)
            self.configs = [self._external_model(c) for c in self.configs]
        else:
            binary = find_server_binary(self.options.server_bin)
            self.binary = binary.path
            self.binary_text = f"{binary.path} (found by: {binary.found_by})"
            self._start_notices.append(f"llama-server: {self.binary_text}")
            for config in self.configs:
                if config.server.model not in self.models:
                    self.models[config.server.model] = resolve_model(config.server.model, base_dir)
        check_out_dir(self.options.out_dir)
        hardware = fingerprint(self.binary)
        if self.options.resume is not None:
            self._resume(hardware)
            return
        if self._session_exists():
            raise OutputDirError(f"session file already exists: {self.session_path}")
        try:
            create_session(
                self.session_path,
                self.experiment.name,
                self.experiment.source,
                self.experiment.path,
                "external" if self.external else "managed",
                self.options.base_url,
                hardware,
                time.perf_counter_ns(),
            )
        except OSError as exc:
            raise OutputDirError(
                f"cannot create the session file {self.session_path}: {exc}"
            ) from None

    def _resume(self, hardware: Hardware) -> None:
        """Go on with a session whose run was interrupted: the configurations it finished
        (status ok) are kept and counted in the result; the others run again from their
        start in the same file."""
        with open_session(self.session_path) as session:
            source = session.import_source()
            if source is not None:
                raise WorkbenchError(
                    f"{self.session_path} was {source.describe()}: it is read-only"
                )
            if session.status == "complete":
                raise WorkbenchError(
                    f"{self.session_path} is complete: every configuration finished"
                )
            if (session.meta["mode"] == "external") != self.external:
                raise WorkbenchError(
                    f"{self.session_path} measured "
                    + (
                        "an external server: give --base-url"
                        if not self.external
                        else "a server it started: leave out --base-url"
                    )
                )
            done = {c.index for c in session.configs if c.status == "ok"}
            kept = [s for s in session.summaries() if s.index in done]
            known = session.hardware.hostname
        if known and hardware.hostname and known != hardware.hostname:
            self._start_notices.append(
                f"resumed on {hardware.hostname}, the session began on {known}: "
                "its configurations were measured on two machines"
            )
        self.configs = [c for c in self.configs if c.index not in done]
        if not self.configs:
            raise WorkbenchError(f"{self.session_path}: every configuration finished already")
        self.summaries = kept
        self._next_index = reopen_session(self.session_path, [c.index for c in self.configs])
        self._start_notices.append(
            f"resumed: {plural(len(done), 'finished configuration')} kept, "
            f"{len(self.configs)} to run ({', '.join(c.label for c in self.configs)})"
        )

    def _external_model(self, config: RunConfig) -> RunConfig:
        """vLLM and SGLang need a model name the server knows; llama.cpp takes any."""
        server = self.external_server
        if config.workload.model_name != "default" or server is None or not server.models:
            return config
        return replace(config, workload=replace(config.workload, model_name=server.models[0]))

    def _session_exists(self) -> bool:
        return self.session_path.exists()

    # -- thread control -----------------------------------------------------------------------
    def start(self) -> None:
        """Start the session writer and the engine thread; ``prepare()`` must have run."""
        # A thread waiting for the GIL waits up to the switch interval (5 ms by default):
        # shorten it so a token's arrival is timestamped promptly whatever else runs.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._writer = SessionWriter(self.session_path, self.bus, on_failure=self.cancel)
        self._writer.start()
        self._thread = threading.Thread(target=self._thread_main, name="engine", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Thread-safe: stop at once, keeping what was measured. However often it is called,
        the run is cancelled once: a second cancel (Ctrl-C twice, Stop then closing the
        window) must not interrupt the cleanup that the first started, or the
        configuration's end is lost. Every call asks the engine loop again, so a call cut
        short (a signal raising in the middle of it) is made good by the next."""
        self._cancel_requested.set()
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
                loop.call_soon_threadsafe(self._cancel_main_task)

    def _cancel_main_task(self) -> None:
        """On the engine loop: cancel the run's task, the first time only."""
        task = self._main_task
        if task is not None and not self._main_task_cancelled:
            self._main_task_cancelled = True
            task.cancel()

    def wait(self, timeout: float | None = None) -> RunResult | None:
        """Block until the run and its session are finished; None on timeout."""
        assert self._thread is not None and self._writer is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            return None
        self._writer.join(30.0)
        if self._writer.error is not None:
            self._status = "failed"
            self._error = f"writing the session failed: {self._writer.error}"
        summaries = sorted(self.summaries, key=lambda s: s.index)  # a resumed run's too
        return RunResult(self._status, self.session_path, summaries, self._error)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._ended.is_set()

    def _thread_main(self) -> None:
        """Run, then say so: ``running`` turns false before the bus wakes its followers, so
        one woken finds the run over (its thread may take a moment more to exit)."""
        try:
            asyncio.run(self._main())
        finally:
            self._ended.set()
            self.bus.run_ended()

    # -- the run ------------------------------------------------------------------------------
    def emit(self, event: Any) -> None:
        self.bus.publish(event)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._main_task = asyncio.current_task()
        mode = "external" if self.external else "managed"
        self.emit(
            ExperimentStarted(
                self.experiment.name,
                str(self.session_path),
                len(self.configs),
                mode,
                time.perf_counter_ns(),
                self.binary_text,
            )
        )
        for text in self._start_notices:
            self.emit(Notice("info", text))
        if self.prompts is not None and self.prompts.origin != "builtin":
            # Say where the prompts come from: a path in someone else's experiment file
            # could point at any file, and its lines would be sent to the server.
            self.emit(
                Notice(
                    "info",
                    f"prompts: {self.prompts.size} from {self.prompts.origin} "
                    "(not the built-in set)",
                )
            )
        try:
            if self._cancel_requested.is_set():
                raise asyncio.CancelledError
            for config in self.configs:
                await self._run_config(config)
        except asyncio.CancelledError:
            self._status = "cancelled"
        except Exception as exc:  # an engine bug must still end in the same shutdown path
            self._status, self._error = "failed", f"{type(exc).__name__}: {exc}"
            self.emit(Notice("error", self._error))
        finally:
            self._stop_server()
            self.emit(ExperimentFinished(self._status, self._error))

    def _stop_server(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    async def _run_config(self, config: RunConfig) -> None:
        idx = config.index
        workload = config.workload
        per_repeat = workload.requests
        self.emit(ConfigStarted(config, per_repeat * workload.repeats))
        size = self.prompts.size if self.prompts else None
        needed = self._next_index + workload.warmup + per_repeat * workload.repeats
        if size is not None and size < needed and idx == 0:
            self.emit(
                Notice(
                    "warning",
                    f"the prompt file has {size} prompts for {needed} "
                    "requests: prompts are reused, so the prefix cache may flatter "
                    "TTFT (watch the cache hits column)",
                    idx,
                )
            )
        records: list[RequestRecord] = []
        observed: dict[int, RunObservations] = {}
        status, error, log_tail, facts, slots = "ok", None, "", StartupFacts(), None
        slot_log: SlotLog | None = None
        watch: asyncio.Task[None] | None = None
        planned_per_slot = None
        if not self.external and config.server.slots > 0 and config.server.ctx > 0:
            layout = kv_layout(
                config.server.ctx, config.server.slots, bool(config.server.kv_unified)
            )
            planned_per_slot = layout.cells_per_slot
            self._warn_about_context(config, planned_per_slot)
        try:
            if self.external:
                assert self.external_server is not None
                base_url, pid = self.external_server.base_url, None
                slots, facts = self.external_server.slots, self.external_server.facts
                self.emit(ServerReady(idx, base_url, None, [], None, facts, slots))
            else:
                server = await self._start_server(config)
                base_url, pid = server.base_url, server.pid
                facts = server.facts
                slots = facts.n_slots or config.server.slots
                self.emit(
                    ServerReady(
                        idx, base_url, pid, server.command, str(server.log_path), facts, slots
                    )
                )
                if facts.n_ctx_slot is not None and facts.n_ctx_slot != planned_per_slot:
                    self._warn_about_context(config, facts.n_ctx_slot)
                slot_log = SlotLog(server.log_path)
                watch = asyncio.create_task(self._watch_slots(slot_log, records))
            prompts = await self._size_prompts(config, base_url)
            async with contextlib.AsyncExitStack() as stack:
                headers = self._headers
                client = await stack.enter_async_context(make_client(base_url, workload, headers))
                if workload.warmup:
                    warm = self._plan(idx, -1, workload.warmup, prompts, warmup=True)
                    sequential = replace(workload, concurrency=1, arrival="burst")
                    await run_requests(client, sequential, warm, [0.0] * len(warm), self.emit)
                    await self._check_server_alive(idx, warm)
                for repeat in range(workload.repeats):
                    planned = self._plan(idx, repeat, per_repeat, prompts)
                    offsets = arrival_offsets(workload, per_repeat, workload.seed + repeat)
                    sampler = ServerSampler(self.emit, idx, base_url, pid, headers=headers)
                    sampler.start()
                    self.emit(ServerStateChanged(idx, "running", f"repeat {repeat + 1}"))
                    records += planned  # kept even if the run is cut short
                    before = await asyncio.to_thread(fetch_counters, base_url, headers)
                    meter = ClientLoadMeter()
                    try:
                        await run_requests(client, workload, planned, offsets, self.emit)
                    finally:
                        sampler.stop()
                        load = meter.read()
                        self.emit(ClientLoadMeasured(idx, repeat, load))
                        observed[repeat] = RunObservations(load, before, None, slot_log is not None)
                    after = await asyncio.to_thread(fetch_counters, base_url, headers)
                    observed[repeat] = replace(observed[repeat], counters_after=after)
                    self.emit(ServerCounters(idx, repeat, before, after))
                    await self._check_server_alive(idx, records)
                    self.emit(ServerStateChanged(idx, "healthy", f"repeat {repeat + 1} done"))
        except asyncio.CancelledError:
            status, error = "cancelled", "cancelled by the user"
            raise
        except WorkbenchError as exc:
            status, error = "failed", str(exc)
            self.emit(Notice("error", f"[{config.label}] {exc}", idx))
        finally:
            if self._server is not None:
                log_tail = self._server.log_tail(40)
            self._stop_server()
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)  # a Stop still propagates
            if slot_log is not None:  # the log is complete now: the last requests' slots
                self._name_slots(slot_log, records)
                records = slot_log.named(records)
            summary = self._summarize(config, records, observed, facts, slots, status, error)
            if summary.client_limited:
                self.emit(
                    Notice(
                        "warning",
                        f"[{config.label}] client-limited ({summary.client_limited}): the "
                        "client, not the server, shaped these numbers",
                        idx,
                    )
                )
            for text in summary.checks_failed:
                self.emit(Notice("warning", f"[{config.label}] cross-check: {text}", idx))
            per_chunk = [r.tokens_per_chunk for r in summary.runs if r.tokens_per_chunk]
            if per_chunk and max(per_chunk) > 1.05:
                self.emit(
                    Notice(
                        "info",
                        f"[{config.label}] chunks carried {max(per_chunk):.1f} tokens on "
                        "average: TPOT and decode speed use the server's token counts, and "
                        "ITL is the gap between chunks, not between tokens",
                        idx,
                    )
                )
            self.emit(ConfigFinished(idx, status, error, log_tail, summary))

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
            self.emit(Notice("warning", f"slot lanes: cannot follow the server log ({exc})"))
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

    async def _size_prompts(self, config: RunConfig, base_url: str) -> PromptSource | SizedPrompts:
        """This configuration's prompts, built before its clock starts (``prompt_building``),
        and what the run says about how."""
        assert self.prompts is not None
        base_dir = Path(self.experiment.path).parent if self.experiment.path else None
        built = await build_prompts(
            config, self.prompts, self._next_index, base_url, self._headers, self.external, base_dir
        )
        if built.notice is not None:
            self.emit(Notice(*built.notice, config.index))
        return built.source

    async def _start_server(self, config: RunConfig) -> LlamaServer:
        assert self.binary is not None
        idx = config.index
        server = LlamaServer(
            self.binary,
            self.models[config.server.model],
            config.server,
            self.log_dir / f"config-{idx}-{_slug(config.label)}.log",
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
            server.state = "crashed"
            self.emit(ServerStateChanged(idx, "crashed", why))
            raise WorkbenchError(
                f"llama-server {why} mid-run; its in-flight requests are recorded as failed.\n"
                f"  log: {server.log_path}\n  last log lines:\n"
                + "\n".join("    " + line for line in server.log_tail(15).splitlines())
            )

    def _warn_about_context(self, config: RunConfig, per_slot: int) -> None:
        """Say before the requests go (in the terminal, the window and the session) that
        they will not fit a slot: planned from the settings, then from the server's log
        when that differs."""
        need = request_tokens(config.workload.input_tokens, config.workload.max_tokens)
        if why := context_shortfall(per_slot, need):
            self.emit(Notice("warning", f"[{config.label}] {why}", config.index))

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
        repeats = sorted({r.repeat for r in records})
        runs = [
            summarize_run([r for r in records if r.repeat == k], observed.get(k)) for k in repeats
        ]
        d = config.to_dict()
        summary = summarize_config(
            config.index,
            config.label,
            d["server"],
            d["workload"],
            facts,
            runs,
            status,
            error,
            slots_override=slots,
            managed=not self.external,
        )
        self.summaries.append(summary)
        return summary
