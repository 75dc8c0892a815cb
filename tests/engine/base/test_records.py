"""The raw records: whose token count a request reports, every view's request number, and
what a session stores of the server's startup facts and the machine."""

from __future__ import annotations

import pytest

from workbench.engine.base.records import (
    CONTEXT_FULL,
    STATED_ONLY,
    Gpu,
    Hardware,
    ImportSource,
    RequestKey,
    RequestRecord,
    StartupFacts,
    TokenChunk,
    request_numbers,
)


def record(index: int = 0, **fields) -> RequestRecord:
    return RequestRecord(0, 0, index, "p", **fields)


def chunks(n: int) -> list[TokenChunk]:
    return [TokenChunk(i, f"t{i} ") for i in range(n)]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"usage": {"completion_tokens": 7}, "timings": {"predicted_n": 9}}, (7, "usage")),
        ({"usage": {"completion_tokens": 0}, "timings": {"predicted_n": 9}}, (0, "usage")),
        ({"usage": {"prompt_tokens": 3}, "timings": {"predicted_n": 9}}, (9, "timings")),
        # Not a count: a bool, a negative, a float, text; the next source is asked.
        ({"usage": {"completion_tokens": True}, "timings": {"predicted_n": 9}}, (9, "timings")),
        ({"usage": {"completion_tokens": -1}, "timings": {"predicted_n": 9}}, (9, "timings")),
        ({"usage": {"completion_tokens": 7.0}, "chunks": chunks(4)}, (4, "chunks")),
        ({"timings": {"predicted_n": "9"}, "chunks": chunks(4)}, (4, "chunks")),
        ({"chunks": chunks(4)}, (4, "chunks")),
        ({"ok": True}, (0, "none")),  # finished with nothing said and no text
        ({"ok": False}, (None, "none")),  # failed before anything came: unknown
    ],
)
def test_the_servers_own_count_comes_first_and_chunks_last(fields, expected) -> None:
    assert record(**fields).output_tokens == expected


def reasoned(n: int, of: int) -> list[TokenChunk]:
    return [TokenChunk(i, f"t{i} ", reasoning=i < n) for i in range(of)]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # The server's count first (vLLM with a reasoning parser), whatever the chunks say.
        (
            {"usage": {"completion_tokens_details": {"reasoning_tokens": 5}}, "chunks": chunks(3)},
            (5, "usage"),
        ),
        ({"usage": {"completion_tokens_details": {"reasoning_tokens": 0}}}, (0, "usage")),
        # More than the whole output: no count.
        (
            {
                "usage": {
                    "completion_tokens": 4,
                    "completion_tokens_details": {"reasoning_tokens": 5},
                },
                "chunks": reasoned(2, 4),
            },
            (2, "chunks"),
        ),
        # Not a count: counted from the chunks, which say which were reasoning.
        (
            {
                "usage": {"completion_tokens_details": {"reasoning_tokens": -2}},
                "chunks": reasoned(2, 4),
            },
            (2, "chunks"),
        ),
        ({"usage": {"completion_tokens_details": "5"}, "chunks": reasoned(3, 3)}, (3, "chunks")),
        ({"chunks": reasoned(3, 5), "t_first_answer_ns": 3}, (3, "chunks")),
        ({"chunks": chunks(4), "t_first_answer_ns": 0}, (0, "chunks")),  # answered at once
        # No answer time and no reasoning chunk: a file older than schema 7, which joined the
        # two, or nothing came.
        ({"chunks": chunks(4)}, (None, "none")),
        ({"ok": True}, (None, "none")),
    ],
)
def test_reasoning_tokens_are_the_servers_count_else_the_reasoning_chunks(fields, expected) -> None:
    assert record(**fields).reasoning_tokens == expected


def test_a_record_knows_its_key_its_text_and_a_full_context() -> None:
    r = RequestRecord(2, 1, 5, "p", chunks=chunks(2))
    assert r.key == RequestKey(2, 1, 5) and r.key.config_index == 2
    assert r.text == "t0 t1 "
    assert not r.context_full
    assert record(error=f"{CONTEXT_FULL}: 3000 tokens, 2048 per slot").context_full
    assert not record(error=f"refused: {CONTEXT_FULL}").context_full  # must start with it


def test_request_numbers_count_measured_requests_in_the_order_they_were_sent() -> None:
    records = [
        RequestRecord(0, 0, 0, "p", warmup=True, t_submit_ns=1),  # a warm-up: no number
        RequestRecord(0, 0, 1, "p", t_submit_ns=30),
        RequestRecord(0, 0, 2, "p", t_submit_ns=20),
        RequestRecord(0, 0, 3, "p", t_submit_ns=20),  # sent with 2: its index after
        RequestRecord(0, 0, 4, "p"),  # never sent: no number
        RequestRecord(1, 0, 1, "p", t_submit_ns=5),  # the next configuration, sent "earlier"
        RequestRecord(1, 1, 0, "p", t_submit_ns=6),
    ]
    assert request_numbers(reversed(records)) == {
        RequestKey(0, 0, 2): 1,
        RequestKey(0, 0, 3): 2,
        RequestKey(0, 0, 1): 3,
        RequestKey(1, 0, 1): 4,
        RequestKey(1, 1, 0): 5,
    }


def test_startup_facts_store_late_fields_only_where_the_server_stated_them() -> None:
    silent = StartupFacts(n_slots=4, devices=("CPU",)).to_dict()
    assert not set(STATED_ONLY) & set(silent)
    assert silent["devices"] == ["CPU"] and silent["n_slots"] == 4
    assert silent["n_ctx"] is None  # an older field: stored, None and all
    stated = StartupFacts(layers_offloaded=31, layers_total=31).to_dict()
    assert (stated["layers_offloaded"], stated["layers_total"]) == (31, 31)
    assert "metal_working_set_bytes" not in stated


def test_a_fingerprint_stores_the_servers_binary_and_a_gpus_bandwidth_only_where_known() -> None:
    external = Hardware(cpu_model="cpu", gpus=(Gpu("A", 1, "d"),)).to_dict()
    for key in ("llama_server", "llama_server_build", "process_memory"):
        assert key not in external
    assert external["gpus"] == [{"name": "A", "memory_bytes": 1, "driver": "d"}]
    managed = Hardware(
        llama_server="/bin/llama-server",
        llama_server_build="b1",
        gpus=(Gpu("A", memory_bandwidth_gbs=4800.0),),
    ).to_dict()
    assert managed["llama_server"] == "/bin/llama-server" and managed["llama_server_build"] == "b1"
    assert managed["gpus"][0]["memory_bandwidth_gbs"] == 4800.0
    assert Hardware(apple_chip="M2", cpu_model="x").machine_name == "M2"
    assert Hardware(cpu_model="x").machine_name == "x" and Hardware().machine_name == "?"


def test_an_import_says_where_it_came_from() -> None:
    assert ImportSource("vllm bench serve", "0.9.1", "r.json").describe() == (
        "imported from vllm bench serve 0.9.1, r.json"
    )
    assert "(version not recorded in the file)" in ImportSource("t", None, "f").describe()
