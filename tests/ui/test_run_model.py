"""RunModel folds engine events into what the views show (no Qt needed)."""

from __future__ import annotations

import pytest

from workbench.engine.base.records import RequestRecord, StartupFacts, TokenChunk
from workbench.engine.base.states import RequestState
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    ExperimentFinished,
    ExperimentStarted,
    FirstToken,
    MetricsSample,
    ProcessSample,
    RequestFinished,
    RequestSubmitted,
    ServerReady,
    SlotMatched,
    SlotsSample,
    TokenChunkArrived,
)
from workbench.engine.figures.footprint import predicted_footprint_mib
from workbench.engine.measure.sampler import normalise_slots
from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt_rows import segments
from workbench.ui.views.stream_grid import grid_shape, pane_stats

S = 1_000_000_000


def started(model: RunModel, n: int = 3) -> None:
    config = parse_experiment("[server]\nslots = 1\n").configs()[0]
    model.apply([ExperimentStarted("e", "s", 1, "managed", 0), ConfigStarted(config, n)])
    model.apply([RequestSubmitted(0, 0, i, False, i * S // 10) for i in range(n)])


def test_requests_move_through_their_states():
    model = RunModel()
    started(model)
    assert [v.state for v in model.ordered()] == ["queued"] * 3
    # One slot busy, nobody decoding yet: the first request is in prefill, the rest wait.
    changes = model.apply([SlotsSample(0, S, [{"id": 0, "is_processing": True}])])
    assert [v.state for v in model.ordered()] == ["prefill", "queued", "queued"]
    assert changes.samples and len(changes.requests) == 1
    model.apply(
        [
            FirstToken(0, 0, 0, 2 * S),
            TokenChunkArrived(0, 0, 0, 2 * S, "Hel"),
            TokenChunkArrived(0, 0, 0, 3 * S, "lo"),
        ]
    )
    first = model.ordered()[0]
    assert first.state == "decoding" and first.ttft_s == 2.0 and first.chunks == 2
    assert model.take_text((0, 0, 0)) == "Hello" and model.take_text((0, 0, 0)) == ""
    assert first.live_rate(now=3.0) == 1.0
    # Live, the pane's rate is a chunk rate and says it is an estimate.
    assert pane_stats(first, now=3.0) == ["TTFT 2.00s", "≈1 chunks/s", "2 tok"]
    record = RequestRecord(
        0,
        0,
        0,
        "p",
        t_submit_ns=0,
        t_first_token_ns=2 * S,
        t_last_token_ns=3 * S,
        t_done_ns=3 * S,
        ok=True,
        usage={"completion_tokens": 5},
        timings={"prompt_ms": 500.0},
        chunks=[TokenChunk(2 * S, "Hel"), TokenChunk(3 * S, "lo")],
    )
    failed = RequestRecord(
        0, 0, 1, "p", t_submit_ns=S // 10, t_done_ns=4 * S, error="HTTP 503: busy"
    )
    model.apply([RequestFinished(record), RequestFinished(failed)])
    done, bad, _ = model.ordered()
    assert (done.state, done.queue_s, done.prefill_s, done.output_tokens) == ("done", 1.5, 0.5, 5)
    assert done.decode_tok_s == 4.0  # 4 gaps in 1 s from the server's count of 5
    assert done.live_rate(now=9.0) is None
    assert pane_stats(done, now=9.0) == ["TTFT 2.00s", "4 tok/s", "5 tok"]
    assert (bad.state, bad.error) == ("failed", "HTTP 503: busy")


def test_gantt_segments_split_waiting_into_queue_and_prefill_once_known():
    model = RunModel()
    started(model, 1)
    view = model.ordered()[0]
    assert segments(view, now=1.0) == [("queued", 0.0, 1.0)]
    # Live, a slot seen prefilling it at 1.2 s turns the rest of its wait amber, not all of it.
    model.apply([SlotsSample(0, 12 * S // 10, [{"id": 0, "is_processing": True}])])
    assert view.state == "prefill" and view.t_prefill == 1.2
    assert segments(view, now=1.5) == [("queued", 0.0, 1.2), ("prefill", 1.2, 1.5)]
    model.apply([FirstToken(0, 0, 0, 2 * S)])
    assert segments(view, now=2.5) == [
        ("queued", 0.0, 1.2),
        ("prefill", 1.2, 2.0),
        ("decoding", 2.0, 2.5),
    ]
    view.state, view.queue_s, view.t_last = RequestState.DONE, 1.5, 3.0
    assert segments(view, now=9.0) == [
        ("queued", 0.0, 1.5),
        ("prefill", 1.5, 2.0),
        ("decoding", 2.0, 3.0),
    ]


def test_samples_and_predicted_footprint():
    model = RunModel()
    started(model, 1)
    facts = StartupFacts(model_buffer_mib=92.1, kv_buffer_mib=180.0, compute_buffer_mib=18.6)
    model.apply(
        [
            ServerReady(0, "http://x", 1, [], None, facts, 1),
            ProcessSample(0, S, 300 * 2**20, 150.0),
            MetricsSample(
                0, S, {"llamacpp:requests_processing": 1.0, "llamacpp:requests_deferred": 2.0}
            ),
        ]
    )
    assert model.rss == ([1.0], [300.0])
    assert model.running[1] == [1.0] and model.waiting[1] == [2.0]
    assert model.kv_usage == ([], [])  # current llama.cpp builds do not say it in /metrics
    assert model.predicted_mib == predicted_footprint_mib(facts) == pytest.approx(290.7)
    assert predicted_footprint_mib(StartupFacts(model_buffer_mib=1.0)) is None
    assert model.server.kind_text.startswith("llama.cpp detected: /metrics gives requests")
    model.apply([SlotsSample(0, S, [])])
    assert model.server.kind_text.endswith("/slots gives busy slots and each slot's context use")


# /metrics samples as the sampler parses them: vLLM labels each series with its model and
# engine (two engines here: counts add up, KV-cache shares are averaged); SGLang with its model.
VLLM_SAMPLE = {
    "vllm:num_requests_running{engine=0,model_name=m}": 3.0,
    "vllm:num_requests_running{engine=1,model_name=m}": 2.0,
    "vllm:num_requests_waiting{engine=0,model_name=m}": 4.0,
    "vllm:num_requests_waiting{engine=1,model_name=m}": 0.0,
    "vllm:kv_cache_usage_perc{engine=0,model_name=m}": 0.5,
    "vllm:kv_cache_usage_perc{engine=1,model_name=m}": 0.25,
    "vllm:prompt_tokens_total{engine=0,model_name=m}": 100.0,
}
SGLANG_SAMPLE = {
    "sglang:num_running_reqs{model_name=m}": 2.0,
    "sglang:num_queue_reqs{model_name=m}": 1.0,
    "sglang:token_usage{model_name=m}": 0.3,
}


@pytest.mark.parametrize(
    ("values", "expected", "kind"),
    [
        (VLLM_SAMPLE, (5.0, 4.0, 0.375), "vLLM"),
        (SGLANG_SAMPLE, (2.0, 1.0, 0.3), "SGLang"),
        # vLLM before 0.9 named its KV-cache share gpu_cache_usage_perc.
        ({"vllm:gpu_cache_usage_perc{model_name=m}": 0.75}, (None, None, 0.75), "vLLM"),
    ],
)
def test_other_servers_fill_the_same_series(values, expected, kind):
    model = RunModel()
    started(model, 1)
    changes = model.apply([MetricsSample(0, S, values), MetricsSample(0, 2 * S, values)])
    assert changes.server and changes.samples
    for series, value in zip((model.running, model.waiting, model.kv_usage), expected, strict=True):
        assert series[1] == ([] if value is None else [pytest.approx(value)] * 2)
    assert model.server.kind is not None and model.server.kind.name == kind
    assert model.server.kind_text.startswith(f"{kind} detected: /metrics gives ")
    assert model.server.kind_text.endswith("no /slots (no slot lanes or per-slot context)")
    # Another configuration's server is looked at afresh.
    model.apply([ConfigStarted(parse_experiment("").configs()[0], 1)])
    assert model.server.kind is None and model.server.kind_text == ""


def test_a_server_of_no_known_kind_is_said_so_and_plots_nothing():
    model = RunModel()
    started(model, 1)
    model.apply([MetricsSample(0, S, {"tgi_queue_size": 3.0})])
    assert model.running == model.waiting == model.kv_usage == ([], [])
    assert model.server.kind_text.startswith("server kind not recognised")
    # A server whose series show only once set (SGLang's) is told by a later sample.
    changes = model.apply([MetricsSample(0, 2 * S, SGLANG_SAMPLE)])
    assert changes.server and model.server.kind_text.startswith("SGLang detected")
    assert model.running[1] == [2.0]
    assert not model.apply([MetricsSample(0, 3 * S, SGLANG_SAMPLE)]).server


def test_grid_shapes_stay_readable_from_1_to_64_panes():
    assert grid_shape(0) == (0, 0)
    assert grid_shape(1) == (1, 1)
    for n in range(1, 65):
        cols, rows = grid_shape(n)
        assert cols * rows >= n and cols * (rows - 1) < n  # no empty row
        assert cols * rows - n < max(cols, 2)
    assert [grid_shape(n) for n in (2, 4, 16, 64)] == [(1, 2), (2, 2), (4, 4), (8, 8)]


def test_slot_spans_follow_the_slots_endpoint():
    model = RunModel()
    started(model, 1)

    def slots(t: float, *busy: bool) -> SlotsSample:
        return SlotsSample(
            0, int(t * S), [{"id": i, "is_processing": b} for i, b in enumerate(busy)]
        )

    model.apply(
        [
            slots(1.0, True, False),
            slots(1.5, True, True),
            slots(2.0, False, True),
            slots(3.0, False, False),
            slots(4.0, True, False),
        ]
    )
    assert model.slot_spans == {0: [[1.0, 2.0], [4.0, None]], 1: [[1.5, 3.0]]}


def test_gpu_memory_joins_the_memory_series():
    from workbench.engine.events import GpuSample

    model = RunModel()
    started(model, 1)
    changes = model.apply([GpuSample(0, S, 1024 * 2**20)])
    assert changes.samples and model.gpu == ([1.0], [1024.0])


def test_slots_are_matched_to_requests_by_tokens_decoded():
    from workbench.ui.views.gantt_rows import lane_rows

    model = RunModel()
    started(model, 3)
    model.apply([FirstToken(0, 0, i, 2 * S) for i in range(2)])
    model.apply(
        [TokenChunkArrived(0, 0, 0, 2 * S, "x")] * 10 + [TokenChunkArrived(0, 0, 1, 2 * S, "y")] * 3
    )

    def sample(*decoded):
        return SlotsSample(
            0,
            3 * S,
            [
                {"id": i, "is_processing": d is not None, "n_decoded": d}
                for i, d in enumerate(decoded)
            ],
        )

    changes = model.apply([sample(3, 11)])  # slot 0 has 3 tokens out, slot 1 has 11
    assert changes.gantt
    first, second, waiting = model.ordered()
    assert (first.slot, second.slot, waiting.slot) == (1, 0, None)
    model.apply([sample(40, 40)])  # already assigned: nothing moves
    assert (first.slot, second.slot) == (1, 0)
    rows, names = lane_rows(model)
    assert names == ["np=1 · slot 0", "np=1 · slot 1", "np=1 · unmatched"]
    assert rows[(0, 1)] == 1 and rows[(0, None)] == 2
    # The server's log names the slots once requests end: it wins over the live guess,
    # and the request no sample caught leaves the "unmatched" lane.
    changes = model.apply([SlotMatched(0, 0, 0, 0), SlotMatched(0, 0, 2, 1)])
    assert changes.gantt
    assert (first.slot, second.slot, waiting.slot) == (0, 0, 1)
    assert lane_rows(model)[1] == ["np=1 · slot 0", "np=1 · slot 1"]


def slots_sample(t: float, *held: int | None, n_ctx: int = 1000) -> SlotsSample:
    """/slots as the real server answers it, as the sampler keeps it: each slot holding
    ``n`` tokens of its ``n_ctx`` (in prefill: none processed yet), or idle (None)."""
    answer = []
    for i, n in enumerate(held):
        slot = {"id": i, "n_ctx": n_ctx, "is_processing": n is not None}
        if n is not None:
            slot |= {"n_prompt_tokens": n, "n_prompt_tokens_processed": 0}
        answer.append(slot)
    return SlotsSample(0, int(t * S), normalise_slots(answer))


def test_each_slots_context_share_follows_the_slots_endpoint():
    model = RunModel()
    started(model, 1)
    changes = model.apply(
        [slots_sample(1.0, None, None), slots_sample(1.25, 500, None), slots_sample(1.5, 510, 800)]
        + [slots_sample(1.75 + i / 4, None, 800) for i in range(8)]
    )
    assert changes.samples
    # Slot 0 rose with its prompt and fell when done; nine equal shares of slot 1 (and
    # eight idle samples of slot 0) are two points, the second moved to the last sample.
    assert model.slot_context == {
        0: ([1.0, 1.25, 1.5, 1.75, 3.5], [0.0, 0.5, 0.51, 0.0, 0.0]),
        1: ([1.0, 1.25, 1.5, 3.5], [0.0, 0.0, 0.8, 0.8]),
    }
    # The server stops with its configuration: what its slots held goes with it.
    model.apply([RequestFinished(RequestRecord(0, 0, 0, "p", t_done_ns=4 * S))])
    model.apply([ConfigFinished(0, "ok"), ExperimentFinished("complete", None)])
    assert model.slot_context[1] == ([1.0, 1.25, 1.5, 3.5, 4.0], [0.0, 0.0, 0.8, 0.8, 0.0])
    assert model.slot_context[0][1][-1] == 0.0 and len(model.slot_context[0][0]) == 5


def test_no_context_share_where_the_slots_do_not_say_it():
    """A session recorded before the counts were kept, or a build without them."""
    model = RunModel()
    started(model, 1)
    model.apply([SlotsSample(0, S, [{"id": 0, "is_processing": True, "n_decoded": 3}])])
    model.apply([SlotsSample(0, S, [{"id": "0", "is_processing": True, "n_ctx": 10}])])
    assert model.slot_context == {} and model.slot_spans == {0: [[1.0, None]]}


def test_a_reopened_session_shows_the_context_shares_it_recorded(tmp_path):
    from tests.made_sessions import Config, build_session, startup_facts
    from workbench.engine.run.replay import session_events
    from workbench.engine.store import open_session

    held = {1.0: None, 1.25: 1024, 1.5: 1536, 1.75: None}
    samples = [slots_sample(t, n, n_ctx=2048) for t, n in held.items()]
    live = RunModel()
    started(live, 0)
    live.apply(samples)
    path = build_session(
        tmp_path / "s.sqlite",
        "[server]\nslots = 1\nctx = 2048\n",
        [Config(facts=startup_facts(1, 2048), samples=samples)],
    )
    with open_session(path) as session:
        events = session_events(session)
    reopened = RunModel()
    reopened.apply([e for _, e in events])
    assert live.slot_context == {0: ([1.0, 1.25, 1.5, 1.75], [0.0, 0.5, 0.75, 0.0])}
    assert reopened.slot_context == live.slot_context


def test_every_configuration_keeps_its_predicted_footprint_over_its_own_span():
    """The dashed 'predicted' line was drawn for the last configuration only: a sweep's
    first ones lost theirs when the next began (live and in replay)."""
    model = RunModel()
    model.apply([ExperimentStarted("e", "s", 2, "managed", 0)])
    configs = parse_experiment("[server]\nslots = [1, 2]\n").configs()
    for config, kv, t in zip(configs, (45.0, 90.0), (1, 5), strict=True):
        facts = StartupFacts(kv_buffer_mib=kv, model_buffer_mib=100.0, compute_buffer_mib=10.0)
        model.apply([ProcessSample(0, t * S, 2**28, 1.0), ConfigStarted(config, 1)])
        model.apply([ServerReady(config.index, "u", 1, [], None, facts, 1)])
    model.apply([ProcessSample(1, 9 * S, 2**28, 1.0), ExperimentFinished("complete", None)])
    assert model.predicted == [[1.0, 5.0, 155.0], [5.0, 9.0, 200.0]]
