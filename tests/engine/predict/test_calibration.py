"""The calibration's fit on made records of known costs, and its file: stored, read back,
refused when damaged, and found again only for what it holds for."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from tests.made_sessions import HARDWARE, NS
from workbench.engine.base.errors import ImportFileError
from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.base.validation import MAX_NUMBER
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.predict.calibration import (
    MAX_TEXT,
    Calibration,
    CalibrationError,
    ChatTokens,
    Coverage,
    find,
    fit_costs,
    held_settings,
    load,
    machine_identity,
    micro_batch_cost,
    reproduce,
    save,
    small_chunk_cost,
)
from workbench.engine.predict.costs import DecodeCost, MicroBatchCost, PrefillCost, StepCosts
from workbench.engine.predict.probe import phases, probe_settings

COSTS = StepCosts(DecodeCost(8.0, 1.5, 0.002), PrefillCost(12.0, 0.25, 0.0001), 3.0)


def group(
    at_s: float, k: int, prompt: int, tokens: int, cache: int = 0, costs: StepCosts = COSTS
) -> list[RequestRecord]:
    """``k`` requests sent at ``at_s`` whose prompts the server processed in one batch and
    which then generated together, timed exactly as ``costs`` say."""
    # one step for the batch, each prompt attending over its cache and half of itself
    prompt_ms = costs.prefill.ms(prompt, cache) + (k - 1) * (
        costs.prefill.ms(prompt, cache) - costs.prefill.base_ms
    )
    context = k * (prompt + cache + tokens / 2)  # each one's prompt and half its answer
    predicted_ms = (tokens - 1) * costs.decode.step_ms(k, context)  # type: ignore[arg-type]
    first = round((at_s + (costs.request_overhead_ms + prompt_ms) / 1000) * NS)
    last = first + round(predicted_ms * 1e6)
    return [
        RequestRecord(
            0,
            0,
            round(at_s) * 10 + i,
            "p",
            t_submit_ns=round(at_s * NS),
            t_first_token_ns=first,
            t_last_token_ns=last,
            t_done_ns=last,
            ok=True,
            timings={
                "prompt_n": prompt,
                "cache_n": cache,
                "prompt_ms": prompt_ms,
                "predicted_n": tokens,
                "predicted_ms": predicted_ms,
            },
            chunks=[TokenChunk(first, "a"), TokenChunk(last, "b")],
        )
        for i in range(k)
    ]


def probe_like(costs: StepCosts = COSTS) -> list[RequestRecord]:
    """Prompts alone, 1 to 8 generating together, long contexts, cached prompts: each group
    100 s after the one before, so none overlaps another."""
    shapes = [(1, 16, 4, 0), (1, 64, 4, 0), (1, 256, 4, 0), (1, 64, 4, 512)]
    shapes += [(k, 16, 24, 0) for k in (1, 2, 4, 8)] + [(2, 1024, 24, 0), (1, 512, 24, 0)]
    return [r for n, shape in enumerate(shapes) for r in group(100.0 * n, *shape, costs=costs)]


def test_the_fit_recovers_known_costs_exactly():
    fit = fit_costs(probe_like())
    for got, want in ((fit.costs.decode, COSTS.decode), (fit.costs.prefill, COSTS.prefill)):
        assert asdict(got) == pytest.approx(asdict(want), rel=1e-6)
    assert fit.costs.request_overhead_ms == pytest.approx(3.0, abs=1e-6)
    assert fit.quality.decode_worst_error < 1e-6 and fit.quality.prefill_worst_error < 1e-6
    assert (fit.quality.prefill_requests, fit.quality.decode_requests) == (22, 22)


def test_other_costs_are_checked_against_the_same_timings():
    doubled = replace(COSTS, decode=DecodeCost(16.0, 3.0, 0.004))
    quality = reproduce(doubled, probe_like())
    assert quality.decode_median_error == pytest.approx(1.0) and quality.prefill_worst_error < 1e-9


def test_a_prompt_batched_with_others_is_timed_with_the_whole_batch():
    """Four prompts sent together are one step of four prompts' tokens: each one's
    prompt_ms is that step, which a fit per prompt alone would read as 4x the cost."""
    fit = fit_costs(group(0.0, 4, 100, 8) + group(100.0, 1, 300, 8) + group(200.0, 1, 50, 8))
    assert fit.costs.prefill.per_token_ms == pytest.approx(0.25, rel=1e-6)


def interleaved(at_s: float) -> list[RequestRecord]:
    """Two requests generating when a 256-token prompt (asking for one token) arrives: its
    prompt is processed within their decode, whose time it adds to theirs."""
    pair = group(at_s, 2, 16, 24)
    first_s = pair[0].t_first_token_ns / NS
    (prompt,) = group(first_s + 0.05 - COSTS.request_overhead_ms / 1000, 1, 256, 1)
    return [prompt, *slowed(pair, prompt.timings["prompt_ms"])]


def slowed(generating: list[RequestRecord], ms: float) -> list[RequestRecord]:
    """The requests as if a step of ``ms`` more had been among their decode's steps."""
    return [
        replace(
            r,
            t_last_token_ns=r.t_last_token_ns + round(ms * 1e6),
            timings={**r.timings, "predicted_ms": r.timings["predicted_ms"] + ms},
        )
        for r in generating
    ]


def test_a_prompt_interleaved_with_generating_steps_adds_its_time_to_theirs():
    fit = fit_costs(probe_like() + interleaved(2000.0))
    assert asdict(fit.costs.decode) == pytest.approx(asdict(COSTS.decode), rel=1e-6)
    assert fit.quality.decode_worst_error < 1e-6


def test_a_cost_the_data_cannot_tell_apart_is_zero():
    """One sequence of one length throughout: a step's cost is all base, none of it per
    sequence or per context token."""
    records = group(0.0, 1, 16, 10) + group(100.0, 1, 16, 10)
    decode = fit_costs(records).costs.decode
    assert decode.per_sequence_ms == 0.0 and decode.per_context_token_ms == 0.0
    assert decode.base_ms == pytest.approx(COSTS.decode.step_ms(1, 16 + 5), rel=1e-9)


def test_only_measured_successful_requests_with_timings_are_fitted():
    good = probe_like()
    noise = [
        replace(good[0], warmup=True, timings={**good[0].timings, "prompt_ms": 9999.0}),
        replace(good[1], ok=False, timings={**good[1].timings, "prompt_ms": 9999.0}),
        replace(good[2], timings={"prompt_n": "16", "prompt_ms": float("nan")}),
    ]
    assert fit_costs(good + noise).costs == fit_costs(good).costs
    with pytest.raises(CalibrationError, match="no request with the server's timings"):
        fit_costs(noise)


# -- the file ---------------------------------------------------------------------------------

SETTINGS = held_settings(ServerSettings(batch_size=512))


def calibration(**changes) -> Calibration:
    fit = fit_costs(probe_like())
    made = Calibration(
        fit.costs,
        fit.quality,
        machine_identity(HARDWARE),
        "model.gguf (1000 bytes)",
        HARDWARE.llama_server_build,
        SETTINGS,
        "2026-12-02T03:00:00+00:00",
        "probe",
    )
    return replace(made, **changes)


def test_a_calibration_reads_back_as_it_was_stored(tmp_path):
    made = calibration(note="stopped at the 60 s bound", template_tokens=30)
    assert load(save(made, tmp_path)) == made


def test_a_long_identity_reads_back_whole(tmp_path):
    """A machine of many GPUs, a model of a long name: read back as stored, so it still fits."""
    made = calibration(machine="box (64 threads, 512 GiB, " + "NVIDIA H200, " * 20 + ") on h")
    made = replace(made, model="m" * 240 + ".gguf (10 bytes)")
    assert load(save(made, tmp_path)) == made


def full() -> Calibration:
    """A calibration with every field of every record it holds given a value (none None):
    what a change to any field can be tried on."""
    every_setting = ServerSettings(
        batch_size=512,
        ubatch_size=256,
        threads=4,
        gpu_layers=99,
        flash_attn="on",
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        kv_unified=True,
        cont_batching=False,
        draft_model="d.gguf",
        draft_max=8,
        draft_min=1,
    )
    made = calibration(
        build="version: 7000 (abc)",
        settings=held_settings(every_setting),
        note="stopped at the 60 s bound",
        template_tokens=30,
        chat=ChatTokens(prompt=30, system_prompt=14, exchange=11, opening=24, system_opening=8),
        coverage=Coverage(prompt_tokens=256, sequences=8, context_tokens=2048),
    )
    prefill = replace(made.costs.prefill, small_chunk_tokens=64, small_chunk_context_ms=0.003)
    costs = replace(
        made.costs,
        interleaved_ms=-0.5,
        prefill=prefill,
        ubatch_size=256,
        micro_batch=MicroBatchCost(1.5, 0.02, 32),
    )
    return replace(made, costs=costs)


def leaves(node: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every value in a file's document with its place as an error line names it."""
    if isinstance(node, dict):
        return [p for key, v in node.items() for p in leaves(v, f"{path}.{key}" if path else key)]
    return [(path, node)]


def written(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = save(full(), tmp_path)
    return path, json.loads(path.read_text())


def test_every_field_of_every_record_is_written_and_read_back(tmp_path):
    """The file is read against the records themselves: a field added to one is written,
    checked and read back with nothing else changed (``full`` gives it a value; a cost
    below 0 where it may be a saving)."""
    path, document = written(tmp_path)
    assert not [place for place, value in leaves(document) if value is None]
    assert load(path) == full()


SIGNED = ("costs.interleaved_ms", "settings.")  # a saving, and settings as the server takes


def wrong(place: str, value: Any) -> list[Any]:
    """Values of another kind than ``value``'s, or out of what its field may hold."""
    if isinstance(value, bool):
        return ["yes", 1]
    if isinstance(value, str):
        return [7, "x" * (MAX_TEXT + 1)]
    out = ["1", True, float("nan"), [value]]
    if isinstance(value, int):
        out.append(value + 0.5)
    if not place.startswith("settings."):  # every number but a setting is bounded
        out += [1e300, MAX_NUMBER + 1] if isinstance(value, int) else [1e300, float("inf")]
    if not place.startswith(SIGNED):
        out.append(-1)
    return out


def test_every_value_of_a_wrong_kind_or_out_of_bounds_is_refused_where_it_is(tmp_path):
    """Each field's annotation is what the file is checked by: a value of another kind, not
    finite, too large, too long or below 0 where its field is never negative is refused in
    one line naming the file and the field, whatever record the field is in."""
    path, document = written(tmp_path)
    tried = 0
    for place, value in leaves(document):
        for bad in wrong(place, value):
            changed = json.loads(json.dumps(document))
            *above, key = place.split(".")
            node = changed
            for part in above:
                node = node[part]
            node[key] = bad
            path.write_text(json.dumps(changed))
            try:
                load(path)
            except ImportFileError as exc:
                (line,) = str(exc).splitlines()
            else:
                pytest.fail(f"{place} took {bad!r}")
            assert line.startswith(f"{path.name}: {place} "), (place, bad, line)
            tried += 1
    assert tried > 200


def test_a_file_without_build_or_settings_holds_none(tmp_path):
    """Every reader of these files has taken a build or settings left out as none."""
    path = stored(tmp_path, lambda d: (d.pop("build"), d.pop("settings")))
    found = load(path)
    assert found.build is None and found.settings == held_settings({})


def test_the_chat_templates_tokens_are_optional_and_checked(tmp_path):
    """A calibration fitted from a session never measured the template: none, not 0."""
    path = save(calibration(), tmp_path)
    assert load(path).template_tokens is None
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "template_tokens": -3}))
    with pytest.raises(ImportFileError, match="template_tokens"):
        load(path)


def test_its_file_is_named_by_the_model_and_nothing_else_of_its_text(tmp_path):
    path = save(calibration(model="../a b/c.gguf (10 bytes)"), tmp_path)
    assert path.parent == tmp_path and path.name.startswith(".._a_b_c-")


def test_it_is_stored_in_the_workbench_folder_unless_told(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))
    path = save(calibration())
    assert path.parent == tmp_path / "config" / "calibrations"


def test_it_fits_only_its_machine_model_build_and_settings():
    made = calibration()
    same = (made.machine, made.model, made.build)
    assert made.fits(*same, asdict(ServerSettings(batch_size=512, slots=4, ctx=1024)))
    # -b is how many prompt tokens a step takes, a rule of the model: every -b fits
    assert made.fits(*same, asdict(ServerSettings(batch_size=64)))
    # another -ub only where the micro-batch's own cost was measured
    assert not made.fits(*same, asdict(ServerSettings(ubatch_size=256)))
    measured = replace(made, costs=replace(made.costs, micro_batch=MicroBatchCost(2.0, 0.03, 64)))
    assert measured.fits(*same, asdict(ServerSettings(ubatch_size=256)))
    assert not made.fits("another machine", *same[1:], SETTINGS)
    assert not made.fits(made.machine, "other.gguf (1000 bytes)", made.build, SETTINGS)
    assert not made.fits(*same[:2], "version: 7000", SETTINGS)


def test_find_gives_the_stored_calibration_that_fits(tmp_path):
    made = calibration()
    save(made, tmp_path)
    same = (made.machine, made.model, made.build)
    assert find(*same, SETTINGS, tmp_path) == made
    assert find(*same, held_settings(ServerSettings(threads=2)), tmp_path) is None
    path = save(made, tmp_path)
    path.write_text("{")
    assert find(*same, SETTINGS, tmp_path) is None  # damaged: made again


def stored(tmp_path: Path, change) -> Path:
    path = save(calibration(), tmp_path)
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda d: d["costs"]["decode"].update(base_ms="8"),
            "costs.decode.base_ms must be a number, got '8'",
        ),
        (
            lambda d: d["costs"]["decode"].update(base_ms=float("nan")),
            "costs.decode.base_ms must be a finite number, got nan",
        ),
        (
            lambda d: d["costs"]["prefill"].update(per_token_ms=1e300),
            "costs.prefill.per_token_ms must be less than or equal to 10000000, got 1e+300",
        ),
        (
            lambda d: d["costs"].update(request_overhead_ms=-1),
            "costs.request_overhead_ms must be at least 0: a cost is never negative",
        ),
        (
            lambda d: d["costs"]["decode"].pop("per_sequence_ms"),
            "costs.decode.per_sequence_ms is missing",
        ),
        (lambda d: d.update(costs=[1, 2]), "costs must be a table, got [1, 2]"),
        (
            lambda d: d["quality"].update(decode_requests=2.5),
            "quality.decode_requests must be a whole number, got 2.5",
        ),
        (
            lambda d: d["quality"].update(decode_median_error=-0.1),
            "quality.decode_median_error must be greater than or equal to 0, got -0.1",
        ),
        (
            lambda d: d["settings"].update(threads=[1]),
            "settings.threads must be a whole number, got [1]",
        ),
        (
            lambda d: d["settings"].update(kv_unified="yes"),
            "settings.kv_unified must be true or false, got 'yes'",
        ),
        (lambda d: d.update(machine=7), "machine must be text, got 7"),
        (
            lambda d: d.update(version=2),
            "version must be 1 (another workbench's calibration: calibrate again), got 2",
        ),
        (lambda d: d.update(version=None), "version must be a whole number, got None"),
        (lambda d: d.pop("version"), "version is missing"),
    ],
)
def test_a_damaged_or_newer_file_is_one_clear_error(tmp_path, change, said):
    path = stored(tmp_path, change)
    with pytest.raises(ImportFileError) as refused:
        load(path)
    (line,) = str(refused.value).splitlines()
    assert line.startswith(f"{path.name}: {said}")


def test_a_huge_number_in_the_file_is_refused(tmp_path):
    path = stored(tmp_path, lambda d: d["costs"]["decode"].update(base_ms=12345.0))
    path.write_text(path.read_text().replace("12345.0", "1e999"))
    with pytest.raises(ImportFileError, match="base_ms must be a finite number, got inf"):
        load(path)


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.write_text("not json"), "not valid JSON"),
        (lambda p: p.write_text(" " * 70_000 + "{}"), "over the 64 KiB"),
        (lambda p: p.write_text("[]"), "c.json: must be a table, got []"),
        (lambda p: os.mkfifo(p), "not a file"),
        (lambda p: p.mkdir(), "not a file"),
    ],
)
def test_a_file_that_is_no_calibration_is_refused(tmp_path, make, said):
    path = tmp_path / "c.json"
    make(path)
    with pytest.raises(ImportFileError, match=re.escape(said)):
        load(path)


def test_the_probe_measures_each_kind_of_cost_early_and_the_dearest_last():
    assert [p.name for p in phases(8)] == [
        "prompt of 16",
        "1 generating",
        "2 generating",
        "prompt of 64",
        "4 generating",
        "long context",
        "prompt of 256",
        "8 generating",
        "interleaved prompt",
        "prompt of 1536",
    ]
    assert all(p.max_tokens == 1 for p in phases(8) if p.name.startswith("prompt"))
    assert [p.name for p in phases(2) if "generating" in p.name] == ["1 generating", "2 generating"]
    assert probe_settings(ServerSettings(slots=16)).ctx == 16 * 2048


def test_a_calibration_stored_before_the_draft_settings_is_still_found(tmp_path):
    """The draft model's settings are held only when set: a calibration stored before they
    were held (its settings without them, its file named without them) is found again."""
    before_drafts = {
        k: v for k, v in SETTINGS.items() if k not in ("draft_model", "draft_max", "draft_min")
    }
    made = calibration(settings=before_drafts)
    key = json.dumps([made.machine, made.model, made.build, before_drafts], sort_keys=True)
    name = f"model-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
    save(made, tmp_path).rename(tmp_path / name)
    same = (made.machine, made.model, made.build)
    assert find(*same, held_settings(ServerSettings(batch_size=512)), tmp_path) == made
    drafting = held_settings(ServerSettings(batch_size=512, draft_model="d.gguf", draft_max=4))
    assert drafting["draft_model"] == "d.gguf" and find(*same, drafting, tmp_path) is None


def test_a_prompt_longer_than_the_batch_pays_its_base_once_a_step():
    """At -b 256 the probe's 1,536-token prompt takes 6 steps, each with its base: fitted
    at that -b the costs come back exactly; taken as one step they do not."""
    records = [*probe_like(), *group(2000.0, 1, 1536, 1)]
    chunked = []
    for r in records:  # a group's prompts are processed together: their tokens share steps
        together = sum(o.timings["prompt_n"] for o in records if o.t_submit_ns == r.t_submit_ns)
        steps = -(-together // 256)
        extra = (steps - 1) * COSTS.prefill.base_ms
        chunked.append(
            replace(r, timings={**r.timings, "prompt_ms": r.timings["prompt_ms"] + extra})
        )
    fit = fit_costs(chunked, batch_size=256)
    assert asdict(fit.costs.prefill) == pytest.approx(asdict(COSTS.prefill), rel=1e-6)
    assert fit_costs(chunked).quality.prefill_worst_error > 0.01


def test_a_small_chunks_cost_is_read_from_prompts_extended_on_a_cache():
    """The probe's last prompt sent again, 48 tokens longer each time, beside 48 tokens
    alone: each one's cost a token less the lone one's, over the cache it attended, is its
    token pairs'."""
    small = replace(
        COSTS.prefill,
        small_chunk_tokens=63,
        small_chunk_context_ms=3 * COSTS.prefill.per_token_context_ms,
    )
    extended = [
        r
        for n, cache in enumerate((1536, 1600, 1664))
        for r in group(1000.0 + 100 * n, 1, 48, 1, cache, replace(COSTS, prefill=small))
    ]
    alone = group(900.0, 1, 48, 1, 0, replace(COSTS, prefill=small))
    found = small_chunk_cost(COSTS.prefill, alone + extended, 63)
    assert found.small_chunk_tokens == 63
    assert found.small_chunk_context_ms == pytest.approx(small.small_chunk_context_ms)
    # without the chunk alone, the fitted cost of one stands for it
    guessed = small_chunk_cost(COSTS.prefill, extended, 63)
    assert guessed.small_chunk_context_ms == pytest.approx(small.small_chunk_context_ms, rel=0.05)
    # fresh prompts tell nothing of it
    assert small_chunk_cost(COSTS.prefill, probe_like()[:3], 63) == COSTS.prefill


def test_a_micro_batchs_cost_is_read_from_the_same_prompts_at_two_ub():
    """Two prompts alone at -ub 512 and at 64: their differences are what their extra
    micro-batches cost, a base each and a cost per token of the cache each starts on."""
    truth = MicroBatchCost(1.7, 0.028, 64)
    at_512, at_64 = [], []
    for n, prompt in enumerate((256, 1024)):
        (one,) = group(100.0 * n, 1, prompt, 1)
        at_512.append(one)
        extra = truth.ms(prompt, 0, 64) - truth.ms(prompt, 0, 512)
        timings = {**one.timings, "prompt_ms": one.timings["prompt_ms"] + extra}
        at_64.append(replace(one, timings=timings))
    found = micro_batch_cost(at_512, 512, at_64, 64)
    assert found is not None and asdict(found) == pytest.approx(asdict(truth), rel=1e-6)
    # measured the other way round (a small -ub first), the same costs
    backwards = micro_batch_cost(at_64, 64, at_512, 512)
    assert backwards is not None
    assert asdict(backwards) == pytest.approx(asdict(replace(truth, measured_at=512)))
    # one prompt length tells base and context apart no more
    assert micro_batch_cost(at_512[:1], 512, at_64[:1], 64) is None
