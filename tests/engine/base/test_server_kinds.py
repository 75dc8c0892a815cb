"""The catalogue of server kinds: parsing /metrics, telling the kind, reading its facts, and
the cross-checks reading the same counters (no server needed)."""

from __future__ import annotations

import pytest

from workbench.engine.base.records import RequestRecord
from workbench.engine.base.server_kinds import (
    KINDS,
    LLAMACPP,
    SGLANG,
    VLLM,
    by_owner,
    describe,
    detect,
    parse_metrics,
    share,
    total,
)
from workbench.engine.figures.cross_checks import request_check, token_checks
from workbench.mock_server import EXPOSITIONS, MockServer, Timing

# A vLLM /metrics as prometheus_client writes it: labelled series, a counter's _total and
# _created, a histogram's buckets.
VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 3.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m",engine="0"} 120.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{model_name="m",engine="0"} 1.7e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="m",engine="0"} 0.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m",engine="0"} 4.0
vllm:time_to_first_token_seconds_count{model_name="m",engine="0"} 4.0
vllm:time_to_first_token_seconds_sum{model_name="m",engine="0"} 0.8
"""


def test_samples_keep_gauges_and_counters_with_their_labels():
    assert parse_metrics(VLLM_TEXT) == {
        "vllm:num_requests_running{engine=0,model_name=m}": 3.0,
        "vllm:prompt_tokens_total{engine=0,model_name=m}": 120.0,
    }
    bare = "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\n"
    assert parse_metrics(bare) == {"llamacpp:requests_processing": 2.0}


def test_series_of_one_name_are_one_figure():
    values = {"a{engine=0}": 1.0, "a{engine=1}": 3.0, "b": 0.5}
    assert total(values, ("a",)) == 4.0 and share(values, ("a",)) == 2.0
    assert total(values, ("missing", "b")) == 0.5  # the first name present
    assert total(values, ("missing",)) is None and share({}, ("a",)) is None


def test_the_kind_is_told_by_its_names_or_its_owner():
    assert detect(parse_metrics(VLLM_TEXT)) is VLLM
    assert detect({"sglang:token_usage{model_name=m}": 0.1}) is SGLANG
    assert detect({"llamacpp:tokens_predicted_total": 7.0}) is LLAMACPP
    assert detect({"tgi_queue_size": 1.0}) is None and detect({}) is None
    assert [by_owner(k.owned_by) for k in KINDS] == list(KINDS)
    assert by_owner("ollama") is None and by_owner(None) is None


def test_what_a_kind_gives_is_said_in_one_line():
    assert describe(VLLM, VLLM.gives(parse_metrics(VLLM_TEXT)), False) == (
        "vLLM detected: /metrics gives requests running; no /slots (no slot lanes or "
        "per-slot context)"
    )
    assert describe(SGLANG, (), False).startswith(
        "SGLang detected: no /metrics series the workbench reads (start it with --enable-metrics)"
    )
    assert describe(LLAMACPP, ("requests running",), True).endswith(
        "/slots gives busy slots and each slot's context use"
    )
    assert describe(None, (), False).startswith("server kind not recognised")


@pytest.mark.parametrize("key", sorted(EXPOSITIONS))
def test_the_mock_speaks_each_kind_from_its_state(key):
    """The mock's /metrics for each kind parses as that kind, with its streams in flight,
    the KV cache its streams hold, and its counters; llama.cpp says no KV use (current
    builds), vLLM and SGLang have no /props or /slots."""
    server = MockServer(Timing(slots=2), key)
    server.counters.processing, server.counters.held_tokens = 3, 2048
    server.counters.prompt_tokens, server.counters.tokens_predicted = 50, 70
    server.counters.finished.update({"stop": 1, "length": 2})
    text = server.metrics_text()
    kind = EXPOSITIONS[key].kind
    values = parse_metrics(text)
    assert detect(values) is kind
    load = kind.load(values)
    assert (load.running, load.waiting) == (3.0, 0.0)
    assert load.kv_usage == (None if kind is LLAMACPP else pytest.approx(2048 / (2 * 4096)))
    assert total(values, kind.prompt_tokens) == 50.0
    assert total(values, kind.output_tokens) == 70.0
    assert total(values, kind.requests) == (3.0 if kind.requests else None)
    for name in {k.partition("{")[0] for k in values}:
        assert f"# HELP {name} " in text and f"# TYPE {name} " in text
    model_label = 'model_name="mock"' in text
    assert model_label == (kind is not LLAMACPP)
    models = server.document("/v1/models")
    assert models is not None and f'"owned_by": "{kind.owned_by}"' in models[2]
    assert (server.document("/slots") is None) == (not kind.slots)
    assert (server.document("/props") is None) == (not kind.slots)


@pytest.mark.parametrize("kind", [VLLM, SGLANG], ids=lambda k: k.name)
def test_cross_checks_read_each_kinds_counters(kind):
    record = RequestRecord(0, 0, 0, "p", t_submit_ns=1, ok=True)
    record.usage = {"completion_tokens": 10, "prompt_tokens": 5}

    def counters(prompt: float, output: float, requests: float) -> dict[str, float]:
        label = "{model_name=m}"
        return {
            kind.prompt_tokens[0] + label: prompt,
            kind.output_tokens[0] + label: output,
            kind.requests[0] + label: requests,
        }

    output, prompt = token_checks([record], counters(50, 100, 7), counters(55, 110, 8))
    assert output.agrees and prompt.agrees
    check = request_check([record], counters(50, 100, 7), counters(55, 110, 10))
    assert check is not None and not check.agrees and "more requests" in check.describe()


def test_a_counter_that_had_not_counted_yet_counts_from_zero():
    """A labelled counter has no series until it first counts: SGLang's /metrics before
    its first request has its gauges only."""
    record = RequestRecord(0, 0, 0, "p", t_submit_ns=1, ok=True)
    record.usage = {"completion_tokens": 10, "prompt_tokens": 5}
    fresh = parse_metrics(MockServer(Timing(), SGLANG.key).metrics_text())
    assert detect(fresh) is SGLANG and total(fresh, SGLANG.output_tokens) is None
    after = {"sglang:generation_tokens_total{model_name=m}": 10.0}
    (output,) = token_checks([record], fresh, after)
    assert (output.client, output.server) == (10.0, 10.0)
    assert token_checks([record], None, after) == []  # no /metrics before: nothing to say
