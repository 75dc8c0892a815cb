"""Speculative decoding is a server setting like any other: a draft model checked as the
model is, before any server starts, and its token counts only beside it; each becomes the
flags this llama-server build takes (``test_speculative_real`` measures which)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.engine.base.errors import ExperimentError, ModelFileError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.model_file import default_model_path
from workbench.engine.run.runner import ExperimentRunner, RunOptions
from workbench.engine.server.llama_server import server_arguments

WORKLOAD = "[workload]\nrequests = 1\nmax_tokens = 4\n"


def args(**settings) -> list[str]:
    return server_arguments(ServerSettings(**settings), Path("/m.gguf"), 9000)


def test_a_draft_model_brings_the_spec_type_this_build_needs_and_its_counts():
    line = " ".join(args(draft_model="/d.gguf", draft_max=8, draft_min=2))
    assert "-md /d.gguf --spec-type draft-simple" in line
    assert "--spec-draft-n-max 8" in line and "--spec-draft-n-min 2" in line
    # the flags the build removed (it refuses to start on them) are never given
    assert "--draft-max" not in line.split() and "--draft-min" not in line.split()


@pytest.mark.parametrize("none", [None, ""])
def test_no_draft_model_gives_no_draft_flags(none):
    line = args(draft_model=none)
    assert "-md" not in line and "--spec-type" not in line


def test_draft_settings_sweep_and_label_their_configurations():
    text = '[server]\ndraft_model = ["", "d.gguf"]\ndraft_max = [2, 8]\n' + WORKLOAD
    configs = parse_experiment(text).configs()
    assert [c.label for c in configs] == [
        "draft=none draft_max=2",
        "draft=none draft_max=8",
        "draft=d.gguf draft_max=2",
        "draft=d.gguf draft_max=8",
    ]
    # without the draft its counts mean nothing: those configurations hold none
    assert [(c.server.draft_model, c.server.draft_max) for c in configs] == [
        (None, None),
        (None, None),
        ("d.gguf", 2),
        ("d.gguf", 8),
    ]


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (
            "draft_max = 8\n",
            r'^<experiment>: \[server\] draft_max = 8 needs draft_model = "DRAFT.gguf" '
            r"\(speculative decoding\)$",
        ),
        ('draft_min = [1, 2]\ndraft_model = ""\n', r": \[server\] draft_min = 1 needs draft_model"),
        ('draft_model = "d.gguf"\ndraft_max = 0\n', r"\[server\] draft_max must be between 1 and"),
        (
            'draft_model = "d.gguf"\ndraft_max = 1.5\n',
            r"\[server\] draft_max must be a whole number",
        ),
        ('draft_model = "d.gguf"\ndraft_min = -1\n', r"\[server\] draft_min must be between 0 and"),
        (
            'draft_model = "d.gguf"\ndraft_max = 4\ndraft_min = 5\n',
            r"\[server\] draft_min = 5 is above draft_max = 4",
        ),
        ("draft_model = 3\n", r"\[server\] draft_model must be text"),
    ],
)
def test_bad_draft_settings_are_refused_by_name(server, message):
    with pytest.raises(ExperimentError, match=message):
        parse_experiment("[server]\n" + server + WORKLOAD)


def test_a_flag_is_checked_as_the_file_is(tmp_path, capsys):
    experiment = tmp_path / "e.toml"
    experiment.write_text(WORKLOAD)
    code = main(["run", str(experiment), "--out", str(tmp_path / "out"), "--draft-max", "4"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1
    assert 'draft_max = 4 needs draft_model = "DRAFT.gguf"' in err


def test_the_draft_model_is_found_beside_the_experiment_file(write_experiment, tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "draft.gguf").symlink_to(default_model_path())
    _, experiment = write_experiment(
        '[server]\ndraft_model = "models/draft.gguf"\ndraft_max = 4\n' + WORKLOAD
    )
    runner = ExperimentRunner(experiment, RunOptions(tmp_path / "out"))
    runner.prepare()
    (config,) = runner.configs
    assert config.server.draft_model == str(tmp_path / "models" / "draft.gguf")
    assert "-md" in server_arguments(config.server, Path("/m.gguf"), 9000)


def test_a_missing_or_broken_draft_model_is_refused_before_anything_starts(
    write_experiment, tmp_path, capsys
):
    path, experiment = write_experiment('[server]\ndraft_model = "gone.gguf"\n' + WORKLOAD)
    with pytest.raises(ModelFileError, match=r"^\[server\] draft_model: model file not found: "):
        ExperimentRunner(experiment, RunOptions(tmp_path / "out")).prepare()
    assert not (tmp_path / "out").exists()
    (tmp_path / "text.gguf").write_text("not a model, only words " * 8)
    path.write_text('[server]\ndraft_model = "text.gguf"\n' + WORKLOAD)
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "[server] draft_model:" in err
    assert "is not a GGUF model file" in err and not (tmp_path / "out").exists()
