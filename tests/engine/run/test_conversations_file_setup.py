"""A conversations file is read whole when a run is prepared, before any server starts: its
conversations are kept for the run, each configuration's request count is the file's user
messages, and its path is taken from the experiment file's folder as ``prompts`` is."""

from __future__ import annotations

import shutil
from pathlib import Path

from workbench.engine.config.experiment import load_experiment
from workbench.engine.interop.conversation_file import read_conversations
from workbench.engine.run.session_setup import RunOptions, prepare_run, session_paths

SAMPLE = Path(__file__).parents[3] / "resources" / "conversations" / "sample.jsonl"


def test_the_file_is_read_at_setup_and_counts_each_repeats_requests(tmp_path):
    shutil.copy(SAMPLE, tmp_path / "chats.jsonl")
    path = tmp_path / "exp.toml"
    path.write_text(
        '[server]\nslots = [1, 4]\n[workload]\nkind = "conversations"\n'
        'conversations_file = "chats.jsonl"\nusers = 4\n'
    )
    experiment = load_experiment(path)
    options = RunOptions(tmp_path / "out")
    session, logs = session_paths(experiment, options)
    setup = prepare_run(experiment, options, experiment.configs(), session, logs)
    assert setup.conversations == read_conversations(SAMPLE)
    assert [c.workload.per_repeat for c in setup.configs] == [35, 35]  # its user messages
    assert [c.workload.users for c in setup.configs] == [4, 4]
