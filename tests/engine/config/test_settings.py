"""The settings schema: each field declared once, and everything derived from it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.base.validation import validated
from workbench.engine.config.experiment import (
    SETTINGS,
    RequestsWorkload,
    WorkloadSettings,
    experiment_to_toml,
    parse_experiment,
    short_name,
)
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import (
    field_named,
    fields_of,
    from_stored,
    seconds_from_text,
)
from workbench.engine.config.workloads import Workload


def test_every_field_is_declared_with_its_kind() -> None:
    kinds = {f.name: (f.kind, f.optional) for cls in SETTINGS for f in fields_of(cls)}
    assert kinds["slots"] == (int, False)
    assert kinds["flash_attn"] == (str, True)
    assert field_named(ServerSettings, "flash_attn").choices == ("on", "off", "auto")
    assert field_named(ServerSettings, "ctx").range.high == 10_000_000
    assert kinds["kv_unified"] == (bool, True)
    assert kinds["rate"] == (float, False)
    assert kinds["extra_args"] == (tuple, False)
    assert kinds["cache_type_k"] == (str, True)
    assert all(f.setting.label and f.setting.help for cls in SETTINGS for f in fields_of(cls))


@pytest.mark.parametrize(
    ("table", "key", "value", "message"),
    [
        ("server", "slots", "two", "[server] slots must be a whole number, got 'two'"),
        ("server", "slots", True, "[server] slots must be a whole number, got True"),
        ("server", "slots", 0, "[server] slots must be between 1 and 1024 (or -1 for auto), got 0"),
        ("server", "cache_type_k", "q9", "[server] cache_type_k must be one of f32"),
        ("server", "model", "", "[server] model must not be empty, got ''"),
        ("server", "extra_args", ["-x", 1], "[server] extra_args must be a list of strings"),
        ("workload", "rate", "fast", "[workload] rate must be a number, got 'fast'"),
        ("workload", "prompts", "", "[workload] prompts must be 'builtin' or a file path"),
    ],
)
def test_values_are_checked_from_the_declaration(table, key, value, message) -> None:
    cls = ServerSettings if table == "server" else WorkloadSettings
    with pytest.raises(ExperimentError) as caught:
        field_named(cls, key).validated(value)
    assert str(caught.value).startswith(message)
    with pytest.raises(ExperimentError) as in_a_file:
        parse_experiment(experiment_to_toml("n", "", *_tables(table, key, value)))
    assert str(in_a_file.value).startswith(f"<experiment>: {message}")


def _tables(table: str, key: str, value: object) -> tuple[dict, dict]:
    return ({key: value}, {}) if table == "server" else ({}, {key: value})


def test_slots_minus_one_and_sweeps_are_allowed() -> None:
    assert field_named(ServerSettings, "slots").validated(-1) == -1
    assert field_named(WorkloadSettings, "concurrency").validated("slots") == "slots"
    text = '[server]\nslots = [1, 2, 4]\nextra_args = [["-a"], ["-b", "1"]]\n'
    assert len(parse_experiment(text).configs()) == 6
    with pytest.raises(ExperimentError, match=r"\[workload\] requests: a sweep list must not"):
        parse_experiment("[workload]\nrequests = []\n")


def test_a_flags_text_becomes_the_value_a_file_would_hold() -> None:
    assert field_named(ServerSettings, "slots").from_text(" 4 ") == 4
    assert field_named(ServerSettings, "kv_unified").from_text("off") is False
    assert field_named(WorkloadSettings, "rate").from_text("2.5") == 2.5
    assert field_named(WorkloadSettings, "concurrency").from_text("slots") == "slots"
    for name, text, why in [
        ("slots", "two", "'two' is not a whole number"),
        ("slots", "1.5", "'1.5' is not a whole number"),
        ("cont_batching", "maybe", "'maybe' is not on or off"),
        ("startup_timeout_s", "inf", "'inf' is not a finite number"),
    ]:
        with pytest.raises(ValueError, match=why):
            field_named(ServerSettings, name).from_text(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), (" 90s ", 90), ("1.5m", 90), ("10M", 600), ("1h", 3600), ("-5", -5), ("0", 0)],
)
def test_a_time_is_typed_in_seconds_minutes_or_hours(text, seconds) -> None:
    """A sign is read: the bound it breaks says what is allowed, not the form."""
    assert seconds_from_text(text) == seconds


@pytest.mark.parametrize("text", ["", "10x", "1e3", "nan", "inf", "1h30m", "h", "--5"])
def test_what_is_no_time_says_how_one_is_typed(text) -> None:
    with pytest.raises(ValueError, match=r"is not a time \(90, 90s, 10m or 1h\)"):
        seconds_from_text(text)


def test_a_description_with_control_characters_is_written_so_it_reads_back() -> None:
    description = 'pasted\r\nfrom a "web" page\twith \\ and \x07'
    text = experiment_to_toml("n", description, {"slots": [1, 2], "extra_args": ("-x",)}, {})
    experiment = parse_experiment(text)
    assert experiment.description == description
    assert experiment.server == {"slots": [1, 2], "extra_args": ["-x"]}
    assert tomllib.loads(text)["server"]["slots"] == [1, 2]


def test_a_stored_configuration_reads_back_with_defaults_and_without_bad_values() -> None:
    stored = {
        "slots": 4,
        "ctx": "huge",
        "threads": None,
        "port": 0,
        "extra_args": ["-x"],
        "from_a_newer_version": 1,
    }
    settings = from_stored(ServerSettings, stored)
    assert settings.slots == 4
    assert settings.ctx == field_named(ServerSettings, "ctx").default  # "huge" is not an int
    assert settings.threads is None and settings.port is None  # 0 is no port: the default
    assert settings.extra_args == ("-x",)
    assert from_stored(WorkloadSettings, {}) == RequestsWorkload()


def test_labels_use_the_declared_short_names() -> None:
    assert short_name("slots") == "np" and short_name("concurrency") == "concurrency"
    experiment = parse_experiment("[server]\nslots = [1, 2]\nkv_unified = [true, false]\n")
    assert [c.label for c in experiment.configs()][:2] == ["np=1 kvu=on", "np=1 kvu=off"]


def test_a_setting_added_to_the_schema_reaches_the_command_line_and_labels() -> None:
    from workbench.engine.server.llama_server import server_arguments

    experiment = parse_experiment('[server]\nflash_attn = ["on", "off"]\n')
    on, off = experiment.configs()
    assert [on.label, off.label] == ["fa=on", "fa=off"]
    args = server_arguments(on.server, Path("/m.gguf"), 1)
    assert args[args.index("-fa") + 1] == "on"
    assert "-fa" not in server_arguments(ServerSettings(), Path("/m.gguf"), 1)
    with pytest.raises(ExperimentError, match="flash_attn must be one of on, off, auto"):
        parse_experiment('[server]\nflash_attn = "yes"\n')


def test_the_k_and_v_cache_types_are_named_alike() -> None:
    """``--cache-type-k`` once read "KV cache type" beside ``--cache-type-v``'s "V cache
    type"."""
    k, v = (field_named(ServerSettings, f"cache_type_{x}").setting.label for x in "kv")
    assert (k, v) == ("K cache type", "V cache type")


@pytest.mark.parametrize("value", [None, 3, "requests", [1]])
def test_a_workload_that_is_no_table_is_refused_in_one_line(value):
    """A wire message's job may carry anything where its workload goes (found by fuzzing:
    ``null`` raised a TypeError from the union's tag)."""
    with pytest.raises(WorkbenchError) as raised:
        validated(Workload, value, "job", WorkbenchError)
    assert str(raised.value).startswith("job: a workload is a table of its settings, got ")
