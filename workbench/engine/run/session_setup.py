"""Before a run starts: everything a user can get wrong, checked, and the session it writes.

Preparing finds the prompts, the server (a llama-server binary and each model, or an external
server, probed, its credentials split off the URL so the session never stores them) and a
writable output folder, then creates the session file, or reopens one whose run did not
finish (``resume``). A run refused here leaves nothing behind.
"""

from __future__ import annotations

import re
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from workbench.engine.base.errors import (
    ExperimentError,
    ModelFileError,
    OutputDirError,
    WorkbenchError,
)
from workbench.engine.base.records import Hardware
from workbench.engine.base.states import ConfigStatus, RunStatus
from workbench.engine.config.experiment import Experiment, RunConfig, workload_file
from workbench.engine.config.workloads import ConversationsWorkload
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.interop.conversation_file import read_conversations
from workbench.engine.interop.trace_file import TracePlan, trace_plans
from workbench.engine.measure.client_workers import WorkerFactory
from workbench.engine.measure.conversations import RecordedConversation
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.measure.prompts import PromptSource, load_prompts
from workbench.engine.models.gguf_header import loadable_model
from workbench.engine.run import notices
from workbench.engine.server.discovery import find_server_binary
from workbench.engine.server.external import (
    ExternalServer,
    api_key_headers,
    probe_external,
    split_credentials,
)
from workbench.engine.store import create_session, open_session, reopen_session


@dataclass(frozen=True)
class RunOptions:
    out_dir: Path
    base_url: str | None = None
    server_bin: str | None = None
    api_key_env: str | None = None  # the variable's name; its value is read, never kept
    resume: Path | None = None  # a session whose run did not finish: go on in it
    # a client worker each on another machine (``run --load-from``), beside this one's
    load_from: tuple[WorkerFactory, ...] = ()


@dataclass
class RunSetup:
    """What preparing found, for the configurations' runs: ``configs`` are the ones still to
    run (a resumed session's finished ones are in ``kept``), ``next_index`` the first
    request index they use, ``notices`` what the run says when it starts."""

    configs: list[RunConfig]
    prompts: PromptSource
    base_dir: Path | None  # where the experiment file's relative paths start
    log_dir: Path
    base_url: str | None  # an external server's, without its credentials
    headers: dict[str, str] = field(default_factory=dict)  # its authorization, never stored
    external_server: ExternalServer | None = None
    binary: str | None = None
    binary_text: str = ""  # the binary and how it was found, as the window shows it
    models: dict[str, Path] = field(default_factory=dict)
    kept: list[ConfigSummary] = field(default_factory=list)
    next_index: int = 0
    notices: list[str] = field(default_factory=list)
    conversations: tuple[RecordedConversation, ...] = ()  # a conversations file's, read whole
    traces: dict[int, TracePlan] = field(default_factory=dict)  # a trace configuration's, by index
    hardware: Hardware | None = None  # this machine, as the session stores it
    load_from: tuple[WorkerFactory, ...] = ()  # the options', for every repeat

    @property
    def external(self) -> bool:
        return self.base_url is not None

    @property
    def mode(self) -> str:
        """The session's mode, as it is stored."""
        return "external" if self.external else "managed"

    def server_log(self, config: RunConfig) -> Path:
        return self.log_dir / f"config-{config.index}-{_slug(config.label)}.log"


def session_paths(experiment: Experiment, options: RunOptions) -> tuple[Path, Path]:
    """The session file and its servers' log folder: named after the experiment and the
    time, or a resumed session's own."""
    if options.resume is not None:
        base = options.resume.name.removesuffix(".session.sqlite")
        return options.resume, options.out_dir / "logs" / base
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = f"{_slug(experiment.name)}-{stamp}"
    return options.out_dir / f"{base}.session.sqlite", options.out_dir / "logs" / base


def prepare_run(
    experiment: Experiment,
    options: RunOptions,
    configs: list[RunConfig],
    session_path: Path,
    log_dir: Path,
) -> RunSetup:
    """Check everything a user can get wrong before the output folder is made, then create
    the session (or reopen it, resumed); a ``WorkbenchError`` says what is wrong."""
    base_dir = Path(experiment.path).parent if experiment.path else None
    prompt_specs = {c.workload.prompts for c in configs}
    if len(prompt_specs) > 1:
        raise WorkbenchError("a sweep over [workload] prompts is not supported")
    prompts = load_prompts(prompt_specs.pop(), base_dir)
    setup = RunSetup(configs, prompts, base_dir, log_dir, options.base_url)
    setup.load_from = options.load_from
    if options.load_from and any(isinstance(c.workload, ConversationsWorkload) for c in configs):
        raise WorkbenchError(
            "--load-from is for independent requests: a conversations run sends each "
            "conversation from this machine"
        )
    _load_conversations(setup)
    _load_traces(setup)
    if setup.external:
        _connect_external(setup, options.api_key_env)
    else:
        _find_server(setup, options.server_bin)
    check_out_dir(options.out_dir)
    hardware = setup.hardware = fingerprint(setup.binary)
    if options.resume is not None:
        _resume(setup, session_path, hardware)
        return setup
    if session_path.exists():
        raise OutputDirError(f"session file already exists: {session_path}")
    try:
        create_session(
            session_path,
            experiment.name,
            experiment.source,
            experiment.path,
            setup.mode,
            setup.base_url,
            hardware,
            time.perf_counter_ns(),
        )
    except OSError as exc:
        raise OutputDirError(f"cannot create the session file {session_path}: {exc}") from None
    return setup


def _load_conversations(setup: RunSetup) -> None:
    """A conversations file, read whole and checked before any server starts (a replay never
    runs from a half-read file); each configuration's ``requests`` becomes its user
    messages, what one repeat of the replay sends."""
    files = {
        c.workload.conversations_file
        for c in setup.configs
        if isinstance(c.workload, ConversationsWorkload)
    } - {""}
    if not files:
        return
    if len(files) > 1:
        raise WorkbenchError("a sweep over [workload] conversations_file is not supported")
    path = workload_file("conversations_file", files.pop(), setup.base_dir)
    try:
        setup.conversations = read_conversations(path)
    except ExperimentError as exc:
        raise ExperimentError(f"[workload] conversations_file: {exc}") from None
    turns = sum(len(c.questions) for c in setup.conversations)
    setup.configs = [
        replace(c, workload=replace(c.workload, requests=turns)) for c in setup.configs
    ]


def _load_traces(setup: RunSetup) -> None:
    """Each trace, read whole and checked before any server starts (nothing runs from a
    half-read file); a trace configuration's ``requests`` becomes the rows it sends."""
    setup.traces = trace_plans(setup.configs, setup.base_dir)
    setup.configs = [
        replace(c, workload=replace(c.workload, requests=len(setup.traces[c.index].rows)))
        if c.index in setup.traces
        else c
        for c in setup.configs
    ]


def check_out_dir(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise OutputDirError(
            f"cannot write to the output folder {out_dir}: {exc.strerror or exc}"
        ) from None


def _connect_external(setup: RunSetup, api_key_env: str | None) -> None:
    """Credentials in the URL and the key's variable become headers; the URL kept (and
    stored) is the one without them."""
    assert setup.base_url is not None
    clean, setup.headers = split_credentials(setup.base_url)
    setup.headers.update(api_key_headers(api_key_env))
    setup.base_url = clean
    setup.external_server = probe_external(clean, setup.headers)
    setup.notices.append(setup.external_server.description)
    setup.configs = [_external_model(c, setup.external_server) for c in setup.configs]


def _external_model(config: RunConfig, server: ExternalServer) -> RunConfig:
    """vLLM and SGLang need a model name the server knows; llama.cpp takes any."""
    if config.workload.model_name != "default" or not server.models:
        return config
    return replace(config, workload=replace(config.workload, model_name=server.models[0]))


def _find_server(setup: RunSetup, server_bin: str | None) -> None:
    binary = find_server_binary(server_bin)
    setup.binary = binary.path
    setup.binary_text = f"{binary.path} (found by: {binary.found_by})"
    setup.notices.append(f"llama-server: {setup.binary_text}")
    for config in setup.configs:
        if config.server.model not in setup.models:
            setup.models[config.server.model] = loadable_model(config.server.model, setup.base_dir)
    setup.configs = [_resolved_draft(c, setup.base_dir) for c in setup.configs]


def _resolved_draft(config: RunConfig, base_dir: Path | None) -> RunConfig:
    """A draft model is checked as the model is, before any server starts, and reaches the
    server's command line by its resolved path (``default`` is the default model)."""
    if not config.server.draft_model:
        return config
    try:
        path = loadable_model(config.server.draft_model, base_dir)
    except ModelFileError as exc:
        raise ModelFileError(f"[server] draft_model: {exc}") from None
    return replace(config, server=replace(config.server, draft_model=str(path)))


def _resume(setup: RunSetup, session_path: Path, hardware: Hardware) -> None:
    """Go on with a session whose run was interrupted: the configurations it finished
    (status ok) are kept and counted in the result; the others run again from their
    start in the same file."""
    with open_session(session_path) as session:
        source = session.import_source()
        if source is not None:
            raise WorkbenchError(f"{session_path} was {source.describe()}: it is read-only")
        if session.status == RunStatus.COMPLETE:
            raise WorkbenchError(f"{session_path} is complete: every configuration finished")
        if (session.meta["mode"] == "external") != setup.external:
            raise WorkbenchError(
                f"{session_path} measured "
                + (
                    "an external server: give --base-url"
                    if not setup.external
                    else "a server it started: leave out --base-url"
                )
            )
        done = {c.index for c in session.configs if c.status == ConfigStatus.OK}
        kept = [s for s in session.summaries() if s.index in done]
        known = session.hardware.hostname
    if known and hardware.hostname and known != hardware.hostname:
        setup.notices.append(notices.resumed_elsewhere(hardware.hostname, known))
    setup.configs = [c for c in setup.configs if c.index not in done]
    if not setup.configs:
        raise WorkbenchError(f"{session_path}: every configuration finished already")
    setup.kept = kept
    setup.next_index = reopen_session(session_path, [c.index for c in setup.configs])
    setup.notices.append(notices.resumed(len(done), setup.configs))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "experiment"
