"""Every state's stored word: what session files, requests.csv and the JSON export hold, so it
must never change (older files are read by it)."""

from __future__ import annotations

import json

import pytest

from workbench.engine.base.states import (
    ConfigStatus,
    NoticeLevel,
    RequestState,
    RunStatus,
    ServerState,
)

STORED_WORDS = {
    RunStatus: ["running", "complete", "cancelled", "failed", "incomplete"],
    ConfigStatus: ["running", "ok", "failed", "cancelled"],
    ServerState: ["idle", "starting", "healthy", "running", "stopping", "stopped", "crashed"],
    RequestState: ["queued", "prefill", "decoding", "done", "failed", "cancelled"],
    NoticeLevel: ["info", "warning", "error"],
}


@pytest.mark.parametrize("states", list(STORED_WORDS), ids=lambda s: s.__name__)
def test_each_state_is_its_stored_word(states) -> None:
    words = STORED_WORDS[states]
    assert [member.value for member in states] == words
    for word in words:
        member = states(word)  # read back from a file
        assert member == word and str(member) == word and f"{member}" == word
        assert json.dumps(member) == json.dumps(word)


def test_request_states_are_named_for_the_views() -> None:
    assert [s.label for s in RequestState] == [
        "queued", "prefill", "decode", "done", "failed", "cancelled"
    ]  # fmt: skip
    assert [s for s in RequestState if s.finished] == ["done", "failed", "cancelled"]
    assert [s for s in RequestState if s.cut] == ["failed", "cancelled"]
    assert RequestState.QUEUED.meaning == "waiting for a slot"
    assert RequestState.CANCELLED.meaning == "stopped by the user"
    assert {s.meaning for s in RequestState if s not in ("queued", "cancelled")} == {""}
