"""``workbench run`` with settings as flags: with no file, or over a file's values."""

from __future__ import annotations

import argparse
import re

import pytest

from workbench.cli.main import build_parser, main
from workbench.cli.run_commands import experiment_of
from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.store import open_session


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *argv])


def test_flags_alone_make_an_experiment() -> None:
    experiment = experiment_of(
        parsed("--slots", "1,2,4", "--requests", "8", "--max-tokens", "64", "--input-tokens", "512")
    )
    assert experiment.name == "quick"
    assert [(c.label, c.server.slots) for c in experiment.configs()] == [
        ("np=1", 1),
        ("np=2", 2),
        ("np=4", 4),
    ]
    workload = experiment.configs()[0].workload
    assert (workload.requests, workload.max_tokens, workload.input_tokens) == (8, 64, 512)
    # The session keeps what ran: the flags written out as a file that reads back the same.
    assert parse_experiment(experiment.source).server == {"slots": [1, 2, 4]}


def test_flags_replace_a_files_values_and_each_kind_is_read(tmp_path) -> None:
    path = tmp_path / "exp.toml"
    path.write_text(
        "name = 'mine'\n[server]\nslots = [1, 2]\nctx = 4096\n[workload]\nrequests = 4\n"
    )
    experiment = experiment_of(
        parsed(
            str(path),
            "--ctx", "8192",
            "--stream", "on,off",
            "--temperature", "0.5",
            "--arrival", "gamma",
            "--rate", "2",
            "--concurrency", "slots",
        )
    )  # fmt: skip
    assert experiment.name == "mine" and experiment.server == {"slots": [1, 2], "ctx": 8192}
    assert experiment.workload == {
        "requests": 4,
        "stream": [True, False],
        "temperature": 0.5,
        "arrival": "gamma",
        "rate": 2.0,
        "concurrency": "slots",
    }
    assert experiment.sweep_axes == ("server.slots", "workload.stream")
    assert [c.label for c in experiment.configs()] == [
        "np=1 stream=on",
        "np=1 stream=off",
        "np=2 stream=on",
        "np=2 stream=off",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "give an experiment file, or settings as flags"),
        (("--slots", "1,x"), "--slots: 'x' is not a whole number"),
        (("--stream", "maybe"), "--stream: 'maybe' is not on or off"),
        (("--slots", "0"), "<flags>: [server] slots must be between 1 and 1024"),
        (("--arrival", "poisson"), "needs rate > 0"),
    ],
)
def test_bad_flags_are_clear_errors(argv, message, capsys) -> None:
    with pytest.raises((ExperimentError, WorkbenchError), match=re.escape(message)):
        experiment_of(parsed(*argv))
    assert main(["run", *argv]) == 1
    assert message.split(":")[0] in capsys.readouterr().err


@pytest.mark.server
def test_a_quick_run_from_flags_on_the_real_server(tmp_path) -> None:
    out = tmp_path / "out"
    argv = ["run", "--slots", "1,2", "--requests", "2", "--max-tokens", "4", "--warmup", "0"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    (session,) = out.glob("quick-*.session.sqlite")
    with open_session(session) as opened:
        assert [c.label for c in opened.configs] == ["np=1", "np=2"]
        assert "slots = [\n    1,\n    2,\n]" in opened.meta["experiment_toml"]
