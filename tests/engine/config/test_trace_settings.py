"""A trace run's settings: ``arrival = "trace"`` and ``trace`` go together, what the trace
gives (arrival times, prompt lengths, shared prefixes) cannot also be set, and a repeat sends
the trace's rows whatever ``requests`` says."""

from __future__ import annotations

import json

import pytest

from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.run.session_setup import RunSetup, _load_traces

TRACE = '[workload]\narrival = "trace"\ntrace = "t.jsonl"\n'


def test_a_trace_run_is_a_workload_like_any_other():
    (config,) = parse_experiment(TRACE + "time_scale = 2.0\nlength_scale = 0.25\n").configs()
    workload = config.workload
    assert (workload.arrival, workload.trace, workload.time_scale) == ("trace", "t.jsonl", 2.0)
    assert (workload.block_size, workload.max_requests, workload.trace_start_s) == (512, 0, 0.0)
    swept = parse_experiment(TRACE + "time_scale = [1.0, 4.0]\n").configs()
    assert [c.label for c in swept] == ["time_scale=1.0", "time_scale=4.0"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[workload]\narrival = "trace"\n', r"arrival = 'trace' needs trace = \"FILE\.jsonl\""),
        ('[workload]\ntrace = "t.jsonl"\n', r'trace is a field of arrival = "trace", not of this'),
        (
            TRACE.replace('"trace"\n', '["trace", "poisson"]\nrate = 2\n', 1),
            r"arrival = 'trace' cannot be swept with other arrivals",
        ),
        (
            TRACE + 'kind = "conversations"\n',
            r'arrival is a field of .* \(kind = "conversations"\)',
        ),
        (TRACE + "input_tokens = 100\n", r'input_tokens is a field of kind = "requests", not of'),
        (TRACE + 'input_spread = "uniform"\n', r'input_spread is a field of kind = "requests"'),
        (TRACE + "shared_prefix_tokens = 64\n", r"shared_prefix_tokens is a field of kind = "),
        (
            TRACE + "rate = 4.0\n",
            r'rate is a field of kind = "requests", not of this workload \(arr',
        ),
        (TRACE + "time_scale = 0\n", r"time_scale must be between"),
        (TRACE + "block_size = 0\n", r"block_size must be between"),
        (TRACE + "max_requests = -1\n", r"max_requests must be between"),
    ],
)
def test_what_a_trace_gives_cannot_be_set_too(text, message):
    with pytest.raises(ExperimentError, match=message):
        parse_experiment(text)


def test_a_repeat_sends_the_traces_rows_whatever_requests_says(tmp_path):
    """The count every front end shows (``per_repeat``) is the rows the trace sends: read at
    setup, up to max_requests."""
    rows = [{"timestamp": 10 * k, "input_length": 50, "output_length": 4} for k in range(30)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = TRACE + "requests = 8\nconcurrency = 4\nmax_requests = [0, 12]\n[server]\nslots = 2\n"
    configs = parse_experiment(text).configs()
    setup = RunSetup(configs, PromptSource(), tmp_path, tmp_path, None)
    _load_traces(setup)
    assert [c.workload.per_repeat for c in setup.configs] == [30, 12]
    assert [len(setup.traces[c.index].rows) for c in setup.configs] == [30, 12]
    assert setup.configs[0].workload.effective_concurrency == 4
