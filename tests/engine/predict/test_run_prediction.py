"""A run's prediction from this machine's stored calibrations only: each configuration
predicted with the one that holds for its own settings, the others left out with one line
of why, never a probe."""

from __future__ import annotations

import pickle

import pytest

from tests.made_sessions import HARDWARE
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.events import PredictionMade
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.predict import probe
from workbench.engine.predict.calibration import (
    Calibration,
    FitQuality,
    held_settings,
    machine_identity,
    model_identity,
    save,
)
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.run_prediction import predict_run

# A generating step costs 10 ms; a prompt 0.5 ms a token: a 100-token prompt 50 ms.
FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5))


def configs(server: str, workload: str = "input_tokens = 100\narrival = 'poisson'\nrate = 4.0\n"):
    return parse_experiment(
        f"name = 'p'\n[server]\nmodel = 'm.gguf'\nctx = 4096\n{server}\n"
        "[workload]\nrequests = 2\nmax_tokens = 5\nwarmup = 1\n" + workload
    ).configs()


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def stored(model, folder, **settings) -> Calibration:
    """This machine's calibration for ``model`` with ``settings``, saved in ``folder``."""
    made = Calibration(
        FLAT,
        FitQuality(1, 0.0, 0.0, 1, 0.0, 0.0),
        machine_identity(HARDWARE),
        model_identity(model),
        HARDWARE.llama_server_build,
        held_settings(ServerSettings(**settings)),
        "2026-12-02T03:00:00+00:00",
        "probe",
        template_tokens=30,
    )
    save(made, folder)
    return made


def test_every_b_is_predicted_from_one_calibration(tmp_path, model, monkeypatch):
    """-b is how many prompt tokens a step takes: the model's rule, not a cost, so one
    calibration predicts a sweep of it, each value's steps by its own chunks."""
    monkeypatch.setattr(probe, "probe", None)
    stored(model, tmp_path)
    sweep = configs("slots = 2\nbatch_size = [2048, 256]", "input_tokens = 1500\narrival = 'burst'")
    prediction = predict_run(sweep, HARDWARE, {"m.gguf": model}, PromptSource(), folder=tmp_path)
    assert prediction.left_out == ()
    whole, chunked = prediction.configs
    assert whole.calibration == chunked.calibration
    # at -b 256 the first request generates while the second's prompt is still in steps
    assert chunked.summary.value("ttft_p90_s") > whole.summary.value("ttft_p90_s")


def test_each_configuration_is_predicted_from_the_calibration_of_its_own_settings(
    tmp_path, model, monkeypatch
):
    monkeypatch.setattr(probe, "probe", None)  # a run's prediction never probes
    stored(model, tmp_path, ubatch_size=512)
    sweep = configs("slots = [1, 2]\nubatch_size = [512, 256]")
    prediction = predict_run(sweep, HARDWARE, {"m.gguf": model}, PromptSource(), folder=tmp_path)
    assert [c.label for c in prediction.configs] == ["np=1 ubatch_size=512", "np=2 ubatch_size=512"]
    assert prediction.left_out == (
        "np=1 ubatch_size=256: no calibration for m.gguf with ubatch_size=256",
        "np=2 ubatch_size=256: no calibration for m.gguf with ubatch_size=256",
    )
    one = prediction.configs[0]
    # where its costs came from: the file, and what makes them doubtful (one request fitted)
    assert one.calibration.startswith(
        f"probe on {machine_identity(HARDWARE)}, made 2026-12-02T03:00:00+00:00, m-"
    )
    assert one.calibration.endswith(
        ".json (doubtful: fitted to 1 generating requests, fewer than the 8 that tell a fit's "
        "error on requests it was not fitted to)"
    )
    assert one.summary.value("requests") == 2
    # The warm-up (repeat -1) and both requests, each repeat's times from its first due time.
    assert [(r.repeat, r.index) for r in one.requests] == [(-1, 0), (0, 0), (0, 1)]
    warm, first, second = one.requests
    assert warm.sent_s == first.sent_s == 0.0
    assert first.first_token_s == pytest.approx(0.05)  # its 100-token prompt
    assert second.sent_s > 0 and second.end_s > second.first_token_s > second.sent_s
    assert first.slot == second.slot == 0  # one slot
    assert prediction.headline().endswith("(2 not predicted)")


def test_without_a_calibration_nothing_is_predicted_and_each_says_why(tmp_path, model):
    prediction = predict_run(
        configs("slots = 2\nthreads = 4"), HARDWARE, {"m.gguf": model}, PromptSource(),
        folder=tmp_path,
    )  # fmt: skip
    assert prediction.configs == ()
    assert prediction.headline() == "no prediction: np=2: no calibration for m.gguf with threads=4"


def test_what_the_model_does_not_predict_is_left_out_by_name(tmp_path, model):
    stored(model, tmp_path)
    conversations = configs("slots = 2", "kind = 'conversations'\n")
    prediction = predict_run(
        conversations, HARDWARE, {"m.gguf": model}, PromptSource(), folder=tmp_path
    )
    (why,) = prediction.left_out
    assert why.startswith("np=2: the scheduler model does not predict conversations")


def test_the_prediction_crosses_to_the_window_s_process(tmp_path, model):
    """The window runs the engine in a child process: the event is pickled on its way."""
    stored(model, tmp_path)
    prediction = predict_run(
        configs("slots = 2"), HARDWARE, {"m.gguf": model}, PromptSource(), folder=tmp_path
    )
    event = PredictionMade(prediction)
    back = pickle.loads(pickle.dumps(event))
    assert back == event and back.prediction.configs[0].summary.value("ttft_p50_s") is not None
