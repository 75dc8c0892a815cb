"""A run's prediction said in one line, as the window says it when Run is pressed."""

from __future__ import annotations

from workbench.engine.config.experiment import parse_experiment
from workbench.engine.figures.predicted import ConfigPrediction, RunPrediction
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.sweep import predict_experiment

FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5))


def predicted(slots: str) -> list[ConfigPrediction]:
    e = parse_experiment(
        f"name = 'p'\n[server]\nslots = [{slots}]\nctx = 4096\n"
        "[workload]\nrequests = 2\ninput_tokens = 100\nmax_tokens = 5\nwarmup = 0\n"
    )
    return [
        ConfigPrediction(p.config.index, p.config.label, p.summary, (), p.requests_s, "test")
        for p in predict_experiment(e, FLAT, PromptSource(), template_tokens=0)
    ]


def test_the_headline_says_the_time_and_each_configurations_ttft():
    line = RunPrediction(tuple(predicted("1, 2"))).headline()
    # np=1: TTFT 50 and 140 ms, p50 95 ms; np=2: both 100 ms; 0.18 + 0.14 s of requests
    assert line == "about 1 s; np=1 TTFT p50 about 95 ms, np=2 about 100 ms"


def test_a_long_sweep_names_its_first_and_last_and_what_was_left_out():
    line = RunPrediction(tuple(predicted("1, 2, 4, 8")), ("np=16: no calibration",)).headline()
    assert line.startswith("about 1 s; np=1 TTFT p50 about 95 ms, np=8 about ")
    assert line.endswith("(1 not predicted)")


def test_nothing_predicted_says_why():
    line = RunPrediction((), ("np=1: no calibration for this machine",)).headline()
    assert line == "no prediction: np=1: no calibration for this machine"
