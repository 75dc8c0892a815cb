"""``kv_unified_per_slot`` is a server setting like any other: one declaration gives its flag,
form field, sweep axis and command-line flag; its rule makes the pool it names (one unified
pool of slots x the limit), which is then the configuration's ``ctx``
(``test_server_real`` measures the server's own)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workbench.cli.main import build_parser
from workbench.cli.run_commands import experiment_of
from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import field_named, validated_as
from workbench.engine.predict.probe import probe_settings
from workbench.engine.server.llama_server import server_arguments

WORKLOAD = "[workload]\nrequests = 1\nmax_tokens = 4\n"


def settings(**values) -> ServerSettings:
    return validated_as(ServerSettings, values)


@pytest.mark.parametrize(
    ("slots", "per_slot", "pool"), [(2, 1024, 2048), (3, 300, 900), (-1, 512, 2048)]
)
def test_the_pool_is_slots_times_the_limit_and_unified(slots, per_slot, pool):
    s = settings(slots=slots, kv_unified_per_slot=per_slot)
    assert (s.ctx, s.kv_unified) == (pool, True)
    line = " ".join(server_arguments(s, Path("/m.gguf"), 9000))
    assert f"-np {slots} -c {pool} -cb --kv-unified --kv-unified-per-slot {per_slot}" in line


def test_unset_it_changes_nothing():
    s = settings(slots=2)
    assert (s.ctx, s.kv_unified, s.kv_unified_per_slot) == (8192, None, None)
    assert "--kv-unified-per-slot" not in server_arguments(s, Path("/m.gguf"), 9000)


def test_it_is_a_declared_setting_with_its_flag_form_field_and_sweep():
    f = field_named(ServerSettings, "kv_unified_per_slot")
    assert f.setting.flag == "--kv-unified-per-slot" and f.setting.in_form and f.setting.sweeps
    configs = parse_experiment("[server]\nslots = 2\nkv_unified_per_slot = [512, 1024]\n").configs()
    assert [(c.label, c.server.ctx) for c in configs] == [("kvus=512", 1024), ("kvus=1024", 2048)]


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (
            "ctx = 8192\nkv_unified_per_slot = 1024\n",
            "<experiment>: [server] ctx and kv_unified_per_slot cannot both be given: the pool "
            "is slots x kv_unified_per_slot, so leave ctx out",
        ),
        (
            "kv_unified = false\nkv_unified_per_slot = 1024\n",
            "<experiment>: [server] kv_unified = false contradicts kv_unified_per_slot, a "
            "per-slot limit in one unified KV pool: leave kv_unified out",
        ),
        (
            "slots = 1024\nkv_unified_per_slot = 10000\n",
            "<experiment>: [server] kv_unified_per_slot x slots = 10240000 tokens of KV pool, "
            "over the 10000000 a context may be: lower kv_unified_per_slot or slots",
        ),
        (
            "kv_unified_per_slot = 0\n",
            "<experiment>: [server] kv_unified_per_slot must be between 1 and 10000000 "
            "(tokens), got 0",
        ),
    ],
)
def test_what_contradicts_it_is_refused_in_one_line(server, message):
    with pytest.raises(ExperimentError, match=f"^{re.escape(message)}$"):
        parse_experiment("[server]\n" + server + WORKLOAD)


def test_its_command_line_flag_converts_and_is_checked_as_the_file_is(capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--help"])
    assert "--kv-unified-per-slot" in capsys.readouterr().out
    experiment = experiment_of(parser.parse_args(["run", "--kv-unified-per-slot", "512"]))
    assert experiment.server == {"kv_unified_per_slot": 512}
    (config,) = experiment.configs()
    assert (config.server.ctx, config.server.kv_unified_per_slot) == (512, 512)
    with pytest.raises(ExperimentError, match="ctx and kv_unified_per_slot cannot both"):
        experiment_of(parser.parse_args(["run", "--ctx", "4096", "--kv-unified-per-slot", "512"]))


def test_a_probe_measures_its_step_costs_without_the_limit():
    probed = probe_settings(settings(slots=2, kv_unified_per_slot=64))
    assert probed.kv_unified_per_slot is None and probed.kv_unified is True


@pytest.mark.parametrize(("batch", "ubatch", "probed"), [(64, None, 2048), (None, 4096, 4096)])
def test_a_probe_runs_at_a_b_that_keeps_its_prompts_and_micro_batch_whole(batch, ubatch, probed):
    """A calibration holds for every -b at its -ub: the probe never takes -b below either."""
    made = probe_settings(settings(batch_size=batch, ubatch_size=ubatch))
    assert made.batch_size == probed and made.ubatch_size == ubatch
