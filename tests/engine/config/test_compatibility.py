"""Nothing a user has stops working: every shipped experiment and one file per documented
field load to the configurations they came to before the schema moved to pydantic
(``tests/data/experiment_compat.json``, written by ``compat_cases.py`` from the code of the
day), and the configurations a session stored then read back to the same settings; a
workload is of the kind its fields said, with that kind's own fields."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.config.compat_cases import EXPECTED, cases
from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import RunConfig, WorkloadSettings, parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import fields_of, from_stored
from workbench.engine.config.workloads import TraceWorkload, kind_of

DATA = json.loads(EXPECTED.read_text(encoding="utf-8"))
DEFAULTS: dict[str, dict[str, Any]] = DATA["defaults"]
CASES = cases()


ADDED = {
    table: {f.name: f.default for f in fields_of(cls) if f.name not in DEFAULTS[table]}
    for table, cls in (("server", ServerSettings), ("workload", TraceWorkload))
}
"""Fields declared since the data was written: a file of the day, which did not give them,
comes to their defaults (``kv_unified_per_slot``: none; ``trace_duration_s``: 0, to the
end)."""


def _full(config: dict[str, Any], table: str) -> dict[str, Any]:
    """A stored configuration of the day: every field, the defaults where unlike none."""
    return {**ADDED[table], **DEFAULTS[table], **config[table]}


def _same(config: RunConfig, expected: dict[str, Any]) -> None:
    """``config`` holds what ``expected`` (a configuration as it was stored) held: the same
    index, label and server, a workload of the kind its fields said, and each field of that
    kind the value it had (the fields of another kind, which a configuration held and its
    run ignored, are no longer there)."""
    found = json.loads(json.dumps(config.to_dict()))
    assert (found["index"], found["label"]) == (expected["index"], expected["label"])
    assert found["server"] == _full(expected, "server")
    workload = _full(expected, "workload")
    assert type(config.workload) is kind_of(workload)
    assert {k: v for k, v in workload.items() if k in found["workload"]} == found["workload"]


def test_every_case_of_the_expected_data_is_still_a_case():
    assert set(CASES) == set(DATA["cases"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_file_loads_to_the_configurations_it_came_to_before(name: str):
    expected = DATA["cases"][name]
    experiment = parse_experiment(CASES[name])
    assert list(experiment.sweep_axes) == expected["axes"]
    assert experiment.count() == expected["count"]
    for external, key in ((False, "configs"), (True, "external")):
        found = experiment.configs(external=external)
        assert len(found) == len(expected[key])
        for config, was in zip(found, expected[key], strict=True):
            _same(config, was)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_configuration_stored_before_reads_back_to_the_same_settings(name: str):
    """A session of the day stored every field of both tables; each reads back to the
    settings the file comes to now."""
    for was, config in zip(
        DATA["cases"][name]["configs"], parse_experiment(CASES[name]).configs(), strict=True
    ):
        assert from_stored(ServerSettings, _full(was, "server")) == config.server
        assert from_stored(WorkloadSettings, _full(was, "workload")) == config.workload


def test_a_stored_experiment_that_held_another_kinds_fields_reads_back():
    """A session kept its experiment's text as written, when a workload could hold every
    kind's fields (the form wrote them all): read back, those fields are left out, as its run
    ignored them; a file that mixes kinds today is refused naming the field."""
    text = '[workload]\nrequests = 3\nusers = 5\ntime_scale = 2.0\nkind = "requests"\n'
    (config,) = parse_experiment(text, stored=True).configs()
    assert config.workload.per_repeat == 3 and not hasattr(config.workload, "users")
    with pytest.raises(ExperimentError, match=r"\[workload\] users is a field of kind = "):
        parse_experiment(text)


def test_a_file_the_old_form_saved_with_every_kinds_defaults_still_loads():
    """The window's form once saved every kind's fields, the others at their defaults: such a
    file still loads (they mean nothing for its kind and are left out); another kind's field
    set to anything else is a mix, refused naming it."""
    old_form = (
        '[workload]\nkind = "requests"\nrequests = 8\nusers = 4\nturns = 3\n'
        'think_time_s = 0.0\nconversations_file = ""\ntrace = ""\n'
    )
    experiment = parse_experiment(old_form)
    assert set(experiment.workload) == {"kind", "requests"}
    (config,) = experiment.configs()
    assert config.workload.per_repeat == 8
    with pytest.raises(ExperimentError, match=r"\[workload\] turns is a field of kind = "):
        parse_experiment(old_form.replace("turns = 3", "turns = 2"))
    with pytest.raises(ExperimentError, match=r"\[workload\] users is a field of kind = "):
        parse_experiment(old_form.replace("users = 4", "users = true"))  # true is not 4
