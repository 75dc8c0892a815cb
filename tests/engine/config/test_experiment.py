"""Experiment files: parsing, validation messages that name the field, sweep expansion."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import RequestsWorkload, load_experiment, parse_experiment
from workbench.engine.config.server_settings import ServerSettings

ROOT = Path(__file__).parents[3]
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.toml"))


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_shipped_experiment_loads(path: Path) -> None:
    experiment = load_experiment(path)
    assert experiment.name
    assert experiment.description
    assert experiment.path == str(path)
    assert experiment.source == path.read_text(encoding="utf-8")
    configs = experiment.configs()
    assert len(configs) >= 2  # every shipped experiment compares something
    assert [c.index for c in configs] == list(range(len(configs)))
    assert len({c.label for c in configs}) == len(configs)
    # external mode: no server can be set, so the server axes collapse; workload axes stay
    external = [c.label for c in experiment.configs(external=True)]
    if any(axis.startswith("workload.") for axis in experiment.sweep_axes):
        assert len(external) >= 2 and "external" not in external
    else:
        assert external == ["external"]


def test_reference_lab_expands_to_three_slot_counts() -> None:
    experiment = load_experiment(Path(__file__).parents[3] / "experiments" / "slots-1-2-4.toml")
    configs = experiment.configs()
    assert [c.server.slots for c in configs] == [1, 2, 4]
    assert [c.label for c in configs] == ["np=1", "np=2", "np=4"]
    assert experiment.sweep_axes == ("server.slots",)
    for c in configs:
        assert c.server.ctx == 8192
        assert c.workload.requests == 8 and c.workload.concurrency == 8
        assert c.workload.max_tokens == 64 and c.workload.ignore_eos is True


def test_defaults_fill_what_the_file_leaves_out() -> None:
    (config,) = parse_experiment("[server]\nslots = 2\n").configs()
    assert config.server == ServerSettings(slots=2)
    assert config.workload == RequestsWorkload()
    assert config.label == "np=2"  # no axis: named as a slots sweep names the same slots
    (swept, _) = parse_experiment("[server]\nslots = [2, 4]\n").configs()
    assert swept.label == config.label
    assert config.to_dict()["server"]["slots"] == 2


def test_name_defaults_to_the_file_stem(tmp_path: Path) -> None:
    path = tmp_path / "my-test.toml"
    path.write_text("[workload]\nrequests = 2\n", encoding="utf-8")
    experiment = load_experiment(path)
    assert experiment.name == "my-test"
    assert experiment.description == ""


def test_sweep_is_the_product_with_server_axes_outermost() -> None:
    text = """
[server]
slots = [1, 2]
cont_batching = [true, false]
[workload]
concurrency = [1, 8]
"""
    experiment = parse_experiment(text)
    assert experiment.sweep_axes == ("server.slots", "server.cont_batching", "workload.concurrency")
    configs = experiment.configs()
    got = [(c.server.slots, c.server.cont_batching, c.workload.concurrency) for c in configs]
    assert got == [
        (1, True, 1),
        (1, True, 8),
        (1, False, 1),
        (1, False, 8),
        (2, True, 1),
        (2, True, 8),
        (2, False, 1),
        (2, False, 8),
    ]
    assert configs[0].label == "np=1 cb=on concurrency=1"
    assert configs[7].label == "np=2 cb=off concurrency=8"
    external = experiment.configs(external=True)
    assert [c.workload.concurrency for c in external] == [1, 8]
    assert [c.label for c in external] == ["concurrency=1", "concurrency=8"]
    assert all(c.server.slots == 1 for c in external)  # back to the default


def test_extra_args_list_is_one_value_not_a_sweep() -> None:
    experiment = parse_experiment('[server]\nextra_args = ["--flash-attn", "on"]\n')
    assert experiment.sweep_axes == ()
    (config,) = experiment.configs()
    assert config.server.extra_args == ("--flash-attn", "on")


def test_extra_args_list_of_lists_is_a_sweep() -> None:
    experiment = parse_experiment('[server]\nextra_args = [["--flash-attn", "on"], []]\n')
    assert experiment.sweep_axes == ("server.extra_args",)
    configs = experiment.configs()
    assert [c.server.extra_args for c in configs] == [("--flash-attn", "on"), ()]
    assert [c.label for c in configs] == ["extra_args=--flash-attn on", "extra_args=none"]


def test_with_overrides_replaces_and_validates() -> None:
    experiment = parse_experiment("[server]\nslots = [1, 2, 4]\n")
    single = experiment.with_overrides({"slots": 2, "model": "/models/x.gguf"})
    assert [c.server.slots for c in single.configs()] == [2]
    assert single.configs()[0].server.model == "/models/x.gguf"
    assert [c.server.slots for c in experiment.configs()] == [1, 2, 4]  # unchanged
    with pytest.raises(ExperimentError, match=r"slots must be between 1 and 1024"):
        experiment.with_overrides({"slots": 0})


# -- errors: each names the file and the field ---------------------------------------------
@pytest.mark.parametrize(
    ("text", "message"),
    [
        # unknown fields, with a suggestion when one is close
        ("[server]\nsolts = 2", r"\[server\] unknown field 'solts' \(did you mean 'slots'\?\)"),
        ("[workload]\nmax_token = 9", r"unknown field 'max_token' \(did you mean 'max_tokens'\?\)"),
        ("[workload]\nzzzz = 1", r"\[workload\] unknown field 'zzzz'$"),
        ("nme = 'x'", r"unknown top-level field 'nme' \(did you mean 'name'\?\)"),
        # wrong types; a bool is not a number even though Python says it is an int
        ("[server]\nslots = true", r"\[server\] slots must be a whole number, got True"),
        ("[server]\nslots = [1, true]", r"\[server\] slots must be a whole number, got True"),
        ("[workload]\ntemperature = false", r"\[workload\] temperature must be .*, got False"),
        ("[workload]\nrequests = 1.5", r"\[workload\] requests must be a whole number, got 1.5"),
        ("[workload]\nrate = '2'", r"\[workload\] rate must be .*, got '2'"),
        ("[server]\ncont_batching = 1", r"\[server\] cont_batching must be true or false, got 1"),
        ("[server]\nslots = [[1, 2]]", r"\[server\] slots must be a whole number, got \[1, 2\]"),
        ("name = 3", r": name must be text, got 3"),
        ("server = 3", r": server must be a table, got 3"),
        # out of range
        (
            "[server]\nslots = 0",
            r"\[server\] slots must be between 1 and 1024 \(or -1 for auto\), got 0",
        ),
        (
            "[server]\nctx = -1",
            r"\[server\] ctx must be between 0 and 10000000 \(0 = the model's own\), got -1",
        ),
        ("[server]\nport = 70000", r"\[server\] port must be between 1 and 65535 \(a TCP port\)"),
        ("[server]\ncache_type_k = 'q3'", r"\[server\] cache_type_k must be one of .*got 'q3'"),
        ("[workload]\nrequests = 0", r"\[workload\] requests must be between 1 and 100000, got 0"),
        ("[workload]\nconcurrency = -2", r"\[workload\] concurrency must be between 0 and"),
        ("[workload]\nmax_tokens = [64, 0]", r"\[workload\] max_tokens must be between 1 and"),
        # upper bounds: a typo must not ask for 2**63 requests or an endless schedule
        ("[workload]\nrequests = 9223372036854775807", r"requests must be between 1 and 100000"),
        ("[workload]\nrate = 1e-300", r"rate must be between 0.001 and 100000"),
        ("[workload]\nrepeats = 100000", r"repeats must be between 1 and 1000"),
        ("[workload]\nwarmup = 5000", r"warmup must be between 0 and 1000"),
        (
            "[workload]\nmax_tokens = 10000000",
            r"max_tokens must be between 1 and 1000000, got 10000000",
        ),
        ("[server]\nslots = 100000", r"slots must be between 1 and 1024"),
        (
            "[workload]\narrival = 'fixed'\nrate = 0.001\nrequests = 1000",
            r"1000 requests at 0.001/s would take 278 hours to send",
        ),
        ("[workload]\narrival = 'uniform'", r"\[workload\] arrival must be one of burst, poisson"),
        ("[workload]\nendpoint = 'embeddings'", r"\[workload\] endpoint must be one of chat"),
        (
            "[workload]\nrequest_timeout_s = 0",
            r"\[workload\] request_timeout_s must be between 0.1",
        ),
        # empty sweep
        ("[server]\nslots = []", r"\[server\] slots: a sweep list must not be empty"),
        # arrivals that need a rate
        (
            "[workload]\narrival = 'poisson'",
            r"arrival 'poisson', 'gamma' or 'fixed' needs rate > 0",
        ),
        ("[workload]\narrival = 'fixed'\nrate = 0", r"needs rate > 0"),
        ("[workload]\narrival = ['burst', 'poisson']\nrate = [0, 2]", r"needs rate > 0"),
        # extra_args: a list of strings, or a list of such lists
        ("[server]\nextra_args = '-fa'", r"\[server\] extra_args must be a list of strings"),
        ("[server]\nextra_args = 1", r"\[server\] extra_args must be a list of strings"),
        ("[server]\nextra_args = [['-fa'], '-v']", r"extra_args must be a list of strings"),
        ("[server]\nextra_args = [['-t', 4]]", r"extra_args must be a list of strings"),
        # not TOML at all
        ("[server\nslots = 1", r"not valid TOML"),
        ("[server]\nslots = 1\nslots = 2", r"not valid TOML"),
    ],
)
def test_invalid_experiment_names_the_field(text: str, message: str) -> None:
    with pytest.raises(ExperimentError, match=message) as info:
        parse_experiment(text, path="exp/bad.toml")
    assert str(info.value).startswith("exp/bad.toml: ")


def test_valid_rate_with_poisson_and_fixed() -> None:
    experiment = parse_experiment("[workload]\narrival = ['poisson', 'fixed']\nrate = 2.5\n")
    assert [c.workload.arrival for c in experiment.configs()] == ["poisson", "fixed"]
    assert experiment.configs()[0].workload.rate == 2.5


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ExperimentError, match="experiment file not found") as info:
        load_experiment(missing)
    assert str(missing) in str(info.value)


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"name = '\xe9'\n")
    with pytest.raises(ExperimentError, match="cannot read experiment file"):
        load_experiment(path)


def test_bad_toml_in_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[workload]\nrequests = = 3\n", encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"broken\.toml: not valid TOML"):
        load_experiment(path)


def test_concurrency_can_follow_the_slots_of_each_configuration() -> None:
    """A linked axis: as many requests in flight as the configuration has slots, instead of
    every (slots, concurrency) pair."""
    experiment = parse_experiment(
        '[server]\nslots = [1, 2, 4, -1]\n[workload]\nrequests = 8\nconcurrency = "slots"\n'
    )
    configs = experiment.configs()
    assert [(c.label, c.workload.concurrency) for c in configs] == [
        ("np=1", 1),
        ("np=2", 2),
        ("np=4", 4),
        ("np=-1", 0),  # auto slots: no fixed count, so no client-side limit
    ]
    assert [c.workload.effective_concurrency for c in configs] == [1, 2, 4, 8]
    assert [c.workload.concurrency for c in experiment.configs(external=True)] == [0]
    assert parse_experiment(experiment.to_toml()).workload["concurrency"] == "slots"
    with pytest.raises(ExperimentError, match=r"concurrency must be a whole number, got 'slot'"):
        parse_experiment('[workload]\nconcurrency = "slot"\n')


def test_zipped_axes_step_together() -> None:
    experiment = parse_experiment(
        'zip = ["server.slots", "workload.concurrency"]\n'
        "[server]\nslots = [1, 2, 4]\nctx = [4096, 8192]\n"
        "[workload]\nrequests = 8\nconcurrency = [1, 2, 4]\n"
    )
    configs = experiment.configs()
    assert [(c.server.ctx, c.server.slots, c.workload.concurrency) for c in configs] == [
        (ctx, n, n) for n in (1, 2, 4) for ctx in (4096, 8192)
    ]  # 6, not 18; slots stays the outer axis, as the file orders them
    assert configs[0].label == "np=1 c=4096 concurrency=1"
    assert experiment.zipped == ("server.slots", "workload.concurrency")
    again = parse_experiment(experiment.to_toml())
    assert [c.label for c in again.configs()] == [c.label for c in configs]
    # External mode: the server axis collapses, the workload one sweeps alone.
    assert [c.workload.concurrency for c in experiment.configs(external=True)] == [1, 2, 4]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('zip = ["server.slots"]\n[server]\nslots = [1, 2]\n', "two or more different axes"),
        ('zip = "server.slots"\n', "zip must be a list, got 'server.slots'"),
        (
            'zip = ["server.slots", "workload.requests"]\n[server]\nslots = [1, 2]\n',
            "'workload.requests' is not a sweep axis of this experiment (its axes: server.slots)",
        ),
        (
            'zip = ["server.slots", "workload.requests"]\n'
            "[server]\nslots = [1, 2]\n[workload]\nrequests = [4, 8, 16]\n",
            "as many values each (server.slots has 2, workload.requests has 3)",
        ),
    ],
)
def test_a_bad_zip_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(ExperimentError, match=re.escape(message)):
        parse_experiment(text)


def test_overrides_keep_the_zip_and_check_it() -> None:
    experiment = parse_experiment(
        'zip = ["server.slots", "workload.concurrency"]\n'
        "[server]\nslots = [1, 2]\n[workload]\nconcurrency = [1, 2]\n"
    )
    assert len(experiment.with_overrides({"slots": [2, 4]}).configs()) == 2
    with pytest.raises(ExperimentError, match="as many values each"):
        experiment.with_overrides({"slots": [1, 2, 4]})
