"""The scheduler model does not model speculative decoding: a configuration with a draft
model is refused in one line, and the draft settings are among those a calibration holds
for (another draft is another step cost)."""

from __future__ import annotations

import pytest

from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.predict.calibration import held_settings
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.sweep import predict_experiment

FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5))


def test_a_draft_model_is_not_predicted():
    text = (
        '[server]\ndraft_model = ["", "d.gguf"]\n'
        "[workload]\nrequests = 2\ninput_tokens = 100\nmax_tokens = 5\nwarmup = 0\n"
    )
    with pytest.raises(ExperimentError) as refused:
        predict_experiment(parse_experiment(text), FLAT, PromptSource(), template_tokens=0)
    assert str(refused.value) == (
        "[draft=d.gguf] the scheduler model does not predict speculative decoding "
        "(a draft_model) yet"
    )


def test_a_calibration_holds_for_its_draft_settings():
    plain = held_settings(ServerSettings())
    drafted = held_settings(ServerSettings(draft_model="/d.gguf", draft_max=8))
    assert not {"draft_model", "draft_max", "draft_min"} & set(plain)  # as stored before them
    assert (drafted["draft_model"], drafted["draft_max"]) == ("/d.gguf", 8)
    older = held_settings({"cont_batching": True})  # a calibration's from before the drafts
    assert older == plain
