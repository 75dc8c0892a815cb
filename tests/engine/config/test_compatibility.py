"""Nothing a user has stops working: every shipped experiment and one file per documented
field load to the configurations they came to before the schema moved to pydantic
(``tests/data/experiment_compat.json``, written by ``compat_cases.py`` from the code of the
day), and the configurations a session stored then read back to the same settings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.config.compat_cases import EXPECTED, cases
from workbench.engine.config.experiment import ServerSettings, WorkloadSettings, parse_experiment
from workbench.engine.config.settings import from_stored

DATA = json.loads(EXPECTED.read_text(encoding="utf-8"))
DEFAULTS: dict[str, dict[str, Any]] = DATA["defaults"]
CASES = cases()


def _full(config: dict[str, Any], table: str) -> dict[str, Any]:
    """A stored configuration of the day: every field, the defaults where unlike none."""
    return {**DEFAULTS[table], **config[table]}


def _same(found: dict[str, Any], expected: dict[str, Any]) -> None:
    """``found`` (a configuration as it is stored now) holds what ``expected`` held: the
    same index, label and server, and for the workload, each field it has the value it had,
    and every field that was unlike its default is still there (one kind's fields alone
    need not hold the others' defaults)."""
    assert (found["index"], found["label"]) == (expected["index"], expected["label"])
    assert found["server"] == _full(expected, "server")
    workload = _full(expected, "workload")
    assert {k: v for k, v in workload.items() if k in found["workload"]} == found["workload"]
    assert set(expected["workload"]) <= set(found["workload"])


def test_every_case_of_the_expected_data_is_still_a_case():
    assert set(CASES) == set(DATA["cases"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_file_loads_to_the_configurations_it_came_to_before(name: str):
    expected = DATA["cases"][name]
    experiment = parse_experiment(CASES[name])
    assert list(experiment.sweep_axes) == expected["axes"]
    assert experiment.count() == expected["count"]
    for external, key in ((False, "configs"), (True, "external")):
        found = [c.to_dict() for c in experiment.configs(external=external)]
        assert len(found) == len(expected[key])
        for config, was in zip(found, expected[key], strict=True):
            _same(json.loads(json.dumps(config)), was)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_configuration_stored_before_reads_back_to_the_same_settings(name: str):
    """A session of the day stored every field of both tables; each reads back to the
    settings the file comes to now."""
    for was, config in zip(
        DATA["cases"][name]["configs"], parse_experiment(CASES[name]).configs(), strict=True
    ):
        assert from_stored(ServerSettings, _full(was, "server")) == config.server
        assert from_stored(WorkloadSettings, _full(was, "workload")) == config.workload
