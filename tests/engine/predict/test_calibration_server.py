"""On the real llama-server: what the timings the calibration fits mean, a calibration
fitted from a real session reproducing that session's timings, and a bounded real probe
whose costs reproduce another real run's."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import replace

import pytest

from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.sized_prompts import ServerTokenizer, sized_prompt
from workbench.engine.predict.calibration import fit_costs, reproduce
from workbench.engine.predict.probe import Phase, probe, send
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.store import open_session

pytestmark = pytest.mark.server
DECODE_TOLERANCE = 0.5


def session_records(path):
    with open_session(path) as session:
        return [r for c in session.configs for r in session.records(c.index)]


async def measured(server_binary, model_path, tmp_path) -> dict:
    """At 4 slots: a prompt sent twice with the cache on; 1, 2 and 4 requests generating
    together; a short and a long prompt alone; each request's timings."""
    settings = replace(ServerSettings(), slots=4, ctx=4 * 2048)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")
    found: dict = {}
    try:
        await server.start()
        tokenizer = ServerTokenizer(server.base_url, "completions")
        deadline = time.monotonic() + 600

        async def group(name: str, lengths: tuple[int, ...], answer: int, cache: bool = False):
            texts = [
                (await sized_prompt(tokenizer, f"{name} {k}.", n, len(found) * 10 + k)).text
                for k, n in enumerate(lengths)
            ]
            sent = await send(server, Phase(name, lengths, answer), texts, 0, deadline, cache)
            assert all(r.ok for r in sent), [r.error for r in sent]
            return sent

        (cached_text,) = [(await sized_prompt(tokenizer, "Cached.", 64, 99)).text]
        for turn in ("first", "again"):
            phase = Phase(turn, (64,), 4)
            (found[turn],) = await send(server, phase, [cached_text], 0, deadline, True)
        for k in (1, 2, 4):
            found[k] = await group(f"k{k}", (16,) * k, 16)
        found["short"] = await group("short", (16,), 16)
        found["long"] = await group("long", (1024,), 16)
    finally:
        await asyncio.to_thread(server.stop)
    return found


@pytest.fixture(scope="module")
def timings(server_binary, model_path, tmp_path_factory) -> dict:
    return asyncio.run(measured(server_binary, model_path, tmp_path_factory.mktemp("fields")))


def test_prompt_n_counts_the_tokens_processed_without_the_cached_ones(timings):
    first, again = timings["first"].timings, timings["again"].timings
    assert (first["prompt_n"], first["cache_n"]) == (64, 0)
    assert again["cache_n"] > 0 and again["prompt_n"] + again["cache_n"] == 64
    assert again["prompt_ms"] < first["prompt_ms"]


def test_predicted_ms_spans_predicted_n_minus_one_steps(timings):
    """From the first token to the last: the client sees the same span between its first
    and last chunk (a token each), and it is ``predicted_n - 1`` steps, not ``predicted_n``
    (3 of 4 tokens: a 33 % longer span). The two readings are compared over every request
    together, not each against a fixed tolerance: on a loaded machine one chunk's delivery
    was 4.6 ms late, over a quarter of a 13 ms step."""
    near = far = 0.0
    for record in [timings["first"], *timings[4]]:
        span_ms = (record.t_last_token_ns - record.t_first_token_ns) / 1e6
        made = record.timings["predicted_n"]
        assert len(record.chunks) == made
        near += abs(record.timings["predicted_ms"] - span_ms)
        far += abs(record.timings["predicted_ms"] - span_ms * made / (made - 1))
    assert near < far / 2


def test_a_step_costs_more_with_more_sequences_generating(timings, capsys):
    """Each request's time a token (``predicted_ms / (predicted_n - 1)``) at 1, 2 and 4
    generating together, and alone with a short and a long context: measured and said;
    only the growth with sequences is asserted (the context's share is the fit's)."""

    def step(records) -> float:
        return statistics.mean(
            r.timings["predicted_ms"] / (r.timings["predicted_n"] - 1) for r in records
        )

    steps = {k: step(timings[k]) for k in (1, 2, 4)}
    short, long = step(timings["short"]), step(timings["long"])
    with capsys.disabled():
        print(
            f"\nms a step: {', '.join(f'{k} generating {v:.1f}' for k, v in steps.items())}; "
            f"alone with 16 tokens {short:.1f}, with 1024 {long:.1f}"
        )
    assert steps[4] > steps[1]


def test_a_fit_of_a_real_session_reproduces_its_timings(recorded_session, capsys):
    """The recorded run (1 and 2 slots, 3 requests of 12 tokens each): the fit comes within
    15 % of each request's own ``predicted_ms`` and 50 % of its ``prompt_ms`` (median;
    measured 1 to 5 % and 6 to 34 % on a shared 2-core machine: its prompts are short, a
    few ms, and their times the noisiest)."""
    fit = fit_costs(session_records(recorded_session))
    with capsys.disabled():
        print(f"\n{fit.quality}")
    assert fit.quality.decode_requests == 6
    assert fit.quality.decode_median_error < 0.15
    assert fit.quality.prefill_median_error < 0.5


async def short_run(server_binary, model_path, tmp_path) -> list:
    """A short real run of its own, at 2 slots: two requests generating together, one alone,
    two together again, 40 prompt tokens and 24 answer tokens each (five requests: the
    median of three 12-token answers once missed by 3 points on a loaded machine)."""
    settings = replace(ServerSettings(), slots=2, ctx=2 * 2048)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "run.log")
    records = []
    try:
        await server.start()
        tokenizer = ServerTokenizer(server.base_url, "completions")
        deadline = time.monotonic() + 300
        for number, phase in enumerate(
            [
                Phase("together", (40, 40), 24),
                Phase("alone", (40,), 24),
                Phase("together again", (40, 40), 24),
            ]
        ):
            texts = [
                (await sized_prompt(tokenizer, f"Run {number}.{k}.", n, 500 + k)).text
                for k, n in enumerate(phase.prompts)
            ]
            records += await send(server, phase, texts, number * 10, deadline)
    finally:
        await asyncio.to_thread(server.stop)
    assert all(r.ok for r in records)
    return records


def test_a_short_probe_keeps_its_bound_and_reproduces_a_real_run(
    server_binary, model_path, tmp_path, capsys
):
    """A probe bounded at 20 s of measuring stops the server and fits what it measured; its
    costs come within DECODE_TOLERANCE of a fresh real run's generating times (median over
    its requests; measured: see the Prediction page). A second probe and run are allowed:
    on this shared machine a request alone once took 2.4 times as long in the run as the
    probe had measured seconds before, and one probe in six split a step's cost between
    its base and its sequences badly (11.6 and 6.6 ms where others fit 1 to 4 and 7 to 12)."""
    errors = []
    for attempt in range(2):
        folder = tmp_path / f"attempt{attempt}"
        folder.mkdir()
        started = time.monotonic()
        probed = asyncio.run(
            probe(server_binary, model_path, ServerSettings(), folder / "probe.log", limit_s=20)
        )
        assert probed.measured_s < 20 + 5  # a request's timeout ends it within moments
        assert time.monotonic() - started < 20 + 60  # the server's start and stop
        assert probed.finished and probed.calibration.source == "probe"
        assert probed.calibration.template_tokens == 30  # SmolLM2's around one user message
        quality = reproduce(
            probed.calibration.costs, asyncio.run(short_run(server_binary, model_path, folder))
        )
        with capsys.disabled():
            print(f"\n{probed.finished}\n{probed.calibration}\nagainst the run: {quality}")
        assert quality.decode_requests == 5
        errors.append(quality.decode_median_error)
        if errors[-1] < DECODE_TOLERANCE:
            break
    assert min(errors) < DECODE_TOLERANCE, errors
