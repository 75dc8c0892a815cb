"""``--space`` and ``--slo`` as typed: what each part means, and one clear error for each
wrong one, naming the setting or the SLO."""

from __future__ import annotations

import pytest

from workbench.engine.tune import space as space_module
from workbench.engine.tune.records import SloTarget
from workbench.engine.tune.slo_targets import (
    SloError,
    key_of,
    meets,
    misses,
    parse_slo,
    parse_slos,
    value_ms,
)
from workbench.engine.tune.space import SpaceError, parse_space


def test_a_space_of_ranges_lists_bounds_and_bare_names(monkeypatch):
    monkeypatch.setattr(space_module, "_cores", lambda: 8)
    space = parse_space(
        "slots=1..16; ctx>=8192; cache_type_k=f16,q8_0; flash_attn=on,off; threads; "
        "cont_batching=off"
    )
    assert space.axes == {
        "slots": (1, 2, 4, 8, 16),
        "ctx": (8192, 16384),
        "cache_type_k": ("f16", "q8_0"),
        "flash_attn": ("on", "off"),
        "threads": (4, 7, 8),
        "cont_batching": (False,),
    }
    assert len(space.candidates()) == 5 * 2 * 2 * 2 * 3
    assert space.candidates()[0] == {
        "slots": 1, "ctx": 8192, "cache_type_k": "f16", "flash_attn": "on", "threads": 4,
        "cont_batching": False,
    }  # fmt: skip


def test_a_range_takes_its_ends_and_the_doublings_between():
    assert parse_space("slots=3..10").axes == {"slots": (3, 6, 10)}
    assert parse_space("batch_size").axes == {"batch_size": (256, 512, 1024, 2048)}
    assert parse_space("ctx>=20000").axes == {"ctx": (20000,)}
    assert parse_space("ctx<8192").axes == {"ctx": (4096,)}


def test_a_stall_slo_searches_the_batch_and_micro_batch_sizes_by_default():
    assert parse_space("", stalls=True).axes == {
        "slots": (1, 2, 4, 8),
        "batch_size": (256, 512, 1024, 2048),
        "ubatch_size": (128, 256, 512),
    }
    assert parse_space("slots=4", stalls=True).axes == {"slots": (4,)}  # as the user asked


def test_an_empty_space_searches_the_slots():
    assert parse_space("").axes == {"slots": (1, 2, 4, 8)}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("slot=1,2", "--space: 'slot' is not a server setting (did you mean 'slots'?)"),
        ("slots=0", "--space slots must be between 1 and 1024"),
        ("slots=two", "--space slots: 'two' is not a whole number"),
        ("cache_type_k=f8", "--space cache_type_k must be one of f32, f16"),
        ("flash_attn=maybe", "--space flash_attn must be one of on, off, auto"),
        ("cont_batching=maybe", "--space cont_batching: 'maybe' is not on or off"),
        ("slots=8..2", "--space slots=8..2: a range is of whole numbers from 1"),
        ("slots=1; slots=2", "--space slots is given twice"),
        ("gpu_layers", "--space gpu_layers: give its values"),
        ("flash_attn>=2", "--space flash_attn>=2: a bound is for a number setting"),
        ("ctx>100000000", "--space ctx must be between"),
        ("model=a.gguf", "--space: 'model' is not a server setting"),
        ("slots=", "--space slots=: give a value"),
        (
            "slots=1..1024; batch_size=1..1000000; ubatch_size=1..1000000",
            "--space holds 4,851 combinations, over the 4,096 a tune searches",
        ),
    ],
)
def test_a_bad_space_is_one_error_naming_the_setting(text, said):
    with pytest.raises(SpaceError) as caught:
        parse_space(text)
    assert said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_slo_is_a_percentile_limit_of_a_catalogue_figure():
    assert parse_slo("ttft_p90:2000") == SloTarget("ttft", 90, 2000.0)
    assert parse_slo("TPOT_P50:120.5") == SloTarget("tpot", 50, 120.5)
    keys = [key_of(parse_slo(t)) for t in ("ttft_p90:1", "tpot_p50:1", "itl_p99:1", "e2el_p99:1")]
    assert keys == ["ttft_p90_s", "tpot_p50_ms", "itl_p99_ms", "e2e_p99_s"]
    figures = {"ttft_p90_s": 1.5, "tpot_p50_ms": 130.0}
    slos = parse_slos(["ttft_p90:2000", "tpot_p50:120"])
    assert value_ms(slos[0], figures) == 1500.0
    assert misses(slos, figures) == ["TPOT p50 130 ms > 120 ms"]
    assert not meets(slos, figures) and meets(slos[:1], figures)
    assert misses(parse_slos(["e2el_p99:5"]), figures) == ["E2EL p99 not measured"]


def test_every_slo_names_a_figure_of_the_catalogue():
    from workbench.engine.figures.metrics import figure

    for metric in ("ttft", "tpot", "itl", "e2el"):
        for pct in (50, 90, 99):
            assert figure(key_of(SloTarget(metric, pct, 1))).key
    assert figure(key_of(SloTarget("stall", 99, 1))).key == "stall_p99_s"


def test_a_stall_slo_limits_the_streams_stalls():
    """``stall_p99:2000``: 99 % of the streams' stalls within 2 s. Streams judged and none
    stalled meet it (no stall has no percentile); streams too short to judge do not say."""
    slo = parse_slo("stall_p99:2000")
    assert key_of(slo) == "stall_p99_s"
    assert misses([slo], {"stall_p99_s": 8.0}) == ["STALL p99 8000 ms > 2000 ms"]
    assert meets([slo], {"stall_p99_s": 1.5})
    assert value_ms(slo, {"stall_p99_s": None, "stalled_stream_share": 0.0}) == 0.0
    assert misses([slo], {"stall_p99_s": None, "stalled_stream_share": None}) == [
        "STALL p99 not measured"
    ]
    with pytest.raises(SloError, match="the percentile is p99, not p50"):
        parse_slo("stall_p50:2000")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("ttft_p95:1", "the percentile is p50, p90, p99, not p95"),
        ("foo_p50:1", "the metric is one of ttft, tpot, itl, e2el, stall, not 'foo'"),
        ("ttft_p90:-5", "the limit is a time above 0 ms, not '-5'"),
        ("ttft_p90:0", "the limit is a time above 0 ms"),
        ("ttft_p90:abc", "the limit is a time in ms, not 'abc'"),
        ("ttft_p90:nan", "the limit is a time above 0 ms"),
        ("ttft:2000", "write METRIC_PCT:MS"),
    ],
)
def test_a_bad_slo_is_one_error(text, said):
    with pytest.raises(SloError) as caught:
        parse_slo(text)
    assert said in str(caught.value)


def test_slos_given_twice_or_not_at_all_are_refused():
    with pytest.raises(SloError, match="ttft_p90 is given twice"):
        parse_slos(["ttft_p90:1", "ttft_p90:2"])
    with pytest.raises(SloError, match="give at least one --slo"):
        parse_slos([])


def test_draft_counts_are_searched_only_where_every_combination_drafts():
    with pytest.raises(SpaceError, match="draft_max needs a draft model in every combination"):
        parse_space("slots=1; draft_max=2,4", draft_model="d.gguf")
    with pytest.raises(SpaceError, match="draft_min needs a draft model"):
        parse_space("draft_min=1")
    space = parse_space("slots=1; draft_model=d.gguf; draft_max=2,4")
    assert [c["draft_max"] for c in space.candidates()] == [2, 4]
