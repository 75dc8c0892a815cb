"""The tune's session experiment: the runs so far as one sweep, configuration k being run k,
its label naming what differs."""

from __future__ import annotations

from workbench.engine.tune.server_measure import Run, zipped_experiment


def test_each_run_is_its_configuration_in_order():
    poisson = {"arrival": "poisson", "stop_when_saturated": True, "max_tokens": 8}
    runs = [
        Run({"slots": 2}, {**poisson, "rate": 1.5, "requests": 23}),
        Run({"slots": 2}, {**poisson, "rate": 3.0, "requests": 45}),
        Run({"slots": 2}, {**poisson, "rate": 2.1, "requests": 32}),
    ]
    configs = zipped_experiment("tune-rate", runs).configs()
    assert [(c.workload.rate, c.workload.requests) for c in configs] == [
        (1.5, 23),
        (3.0, 45),
        (2.1, 32),
    ]
    assert all(c.server.slots == 2 and c.workload.arrival == "poisson" for c in configs)
    assert configs[1].label == "requests=45 rate=3.0"


def test_one_setting_that_differs_is_a_plain_axis_and_none_one_configuration():
    one = zipped_experiment("tune", [Run({"slots": 1}, {}), Run({"slots": 4}, {})])
    assert [c.label for c in one.configs()] == ["np=1", "np=4"]
    alone = zipped_experiment("tune", [Run({"slots": 4, "threads": 2}, {"max_tokens": 8})])
    (config,) = alone.configs()
    assert (config.server.slots, config.server.threads, config.workload.max_tokens) == (4, 2, 8)


def test_a_named_setting_labels_the_first_run_too():
    """The tune's sessions name what a run tried from its first configuration on (a rate
    probe's rate, a candidate's space settings), not the default ``np=N``."""
    probe = Run({"slots": 2}, {"arrival": "poisson", "rate": 1.5}, ("workload.rate",))
    (config,) = zipped_experiment("tune-rate", [probe]).configs()
    assert config.label == "rate=1.5"
    candidate = Run({"slots": 2, "threads": 1}, {}, ("server.slots", "server.threads"))
    (config,) = zipped_experiment("tune", [candidate]).configs()
    assert config.label == "np=2 threads=1"
