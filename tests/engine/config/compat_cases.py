"""The experiment files that must load to the same configurations whatever the schema's
implementation: every shipped experiment, and one file per documented field (each in the
workload kind it is documented for, with a sweep of two values where the field sweeps).

``python -m tests.engine.config.compat_cases`` writes their configurations, as the code of
the day expands them, into ``tests/data/experiment_compat.json``: it was run once before the
schema moved to pydantic, and ``test_compatibility.py`` holds every later version to it.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = ROOT / "tests" / "data" / "experiment_compat.json"
SHIPPED = sorted((ROOT / "experiments").glob("*.toml"))

CONVERSATIONS = 'kind = "conversations"\n'
TRACE = 'arrival = "trace"\ntrace = "t.jsonl"\n'
FILE = 'kind = "conversations"\nconversations_file = "chats.jsonl"\n'
DRAFT = 'draft_model = "draft.gguf"\n'

# (field, [server] lines, [workload] lines): each documented field set to a value other than
# its default, beside what its documentation says it needs.
FIELDS: list[tuple[str, str, str]] = [
    ("model", 'model = "m.gguf"\n', ""),
    ("slots", "slots = [-1, 2]\n", ""),
    ("ctx", "ctx = [0, 4096]\n", ""),
    ("cont_batching", "cont_batching = [true, false]\n", ""),
    ("kv_unified", "kv_unified = [true, false]\n", ""),
    ("cache_type_k", 'cache_type_k = ["q8_0", "f16"]\n', ""),
    ("cache_type_v", 'cache_type_v = "q4_0"\n', ""),
    ("threads", "threads = [-1, 3]\n", ""),
    ("batch_size", "batch_size = 1024\n", ""),
    ("ubatch_size", "ubatch_size = [128, 256]\n", ""),
    ("gpu_layers", "gpu_layers = [-1, 0, 99]\n", ""),
    ("flash_attn", 'flash_attn = ["on", "off", "auto"]\n', ""),
    ("port", "port = 8099\n", ""),
    ("cache_ram_mib", "cache_ram_mib = [-1, 256]\n", ""),
    ("cache_idle_slots", "cache_idle_slots = false\ncache_ram_mib = 64\n", ""),
    ("cache_reuse", "cache_reuse = [0, 256]\n", "cache_prompt = true\n"),
    ("draft_model", 'draft_model = ["", "default"]\n', ""),
    ("draft_max", DRAFT + "draft_max = [4, 8]\n", ""),
    ("draft_min", DRAFT + "draft_min = 2\ndraft_max = 6\n", ""),
    ("extra_args", 'extra_args = [["--mlock"], ["-fa", "on"]]\n', ""),
    ("startup_timeout_s", "startup_timeout_s = 30\n", ""),
    ("kind", "", 'kind = ["requests", "conversations"]\n'),
    ("requests", "", "requests = [1, 16]\n"),
    ("users", "slots = 2\n", CONVERSATIONS + "users = [1, 8]\n"),
    ("turns", "", CONVERSATIONS + "turns = 5\n"),
    ("think_time_s", "", CONVERSATIONS + "think_time_s = [0, 1.5]\n"),
    ("think_time_spread", "", CONVERSATIONS + 'think_time_spread = "exponential"\n'),
    ("user_tokens", "", CONVERSATIONS + "user_tokens = [32, 128]\n"),
    ("system_prompt_tokens", "", CONVERSATIONS + "system_prompt_tokens = 100\n"),
    ("conversations_file", "", FILE + "users = 2\n"),
    ("id_slot", "slots = [1, 4]\n", FILE + 'id_slot = ["auto", "conversation"]\n'),
    ("concurrency", "slots = [1, 2]\n", 'concurrency = ["slots", 0, 3]\n'),
    ("arrival", "", 'arrival = ["burst", "poisson", "gamma", "fixed"]\nrate = 2\n'),
    ("rate", "", 'arrival = "poisson"\nrate = [0.5, 4]\n'),
    ("burstiness", "", 'arrival = "gamma"\nrate = 3\nburstiness = [0.5, 2]\n'),
    ("trace", "", TRACE),
    ("time_scale", "", TRACE + "time_scale = [1.0, 4.0]\n"),
    ("length_scale", "", TRACE + "length_scale = 0.25\n"),
    ("block_size", "", TRACE + "block_size = 16\n"),
    ("max_requests", "", TRACE + "max_requests = [0, 12]\n"),
    ("trace_start_s", "", TRACE + "trace_start_s = 2.5\n"),
    ("stop_when_saturated", "", "stop_when_saturated = [false, true]\n"),
    ("max_tokens", "", "max_tokens = [1, 256]\n"),
    ("temperature", "", "temperature = 0.7\n"),
    ("seed", "", "seed = -5\n"),
    ("prompts", "", 'prompts = "prompts.jsonl"\n'),
    ("input_tokens", "", "input_tokens = [0, 300]\n"),
    ("endpoint", "", 'endpoint = ["chat", "completion"]\n'),
    ("input_spread", "", 'input_tokens = 200\ninput_spread = ["uniform", "normal"]\n'),
    (
        "input_spread_tokens",
        "",
        'input_tokens = 200\ninput_spread = "uniform"\ninput_spread_tokens = 50\n',
    ),
    ("shared_prefix_tokens", "", "shared_prefix_tokens = 1000\ncache_prompt = true\n"),
    ("stream", "", "stream = [true, false]\n"),
    ("cache_prompt", "", "cache_prompt = [false, true]\n"),
    ("ignore_eos", "", "ignore_eos = false\n"),
    ("repeats", "", "repeats = 3\n"),
    ("warmup", "", "warmup = [0, 2]\n"),
    ("request_timeout_s", "", "request_timeout_s = 12.5\n"),
    ("model_name", "", 'model_name = "gpt-4o"\n'),
    ("workers", "", "workers = [1, 4]\nrequests = 64\n"),
]


# Sweeps of several axes: the configurations' order and labels follow the fields' order in
# the table, whichever kind each field belongs to.
SWEEPS: list[tuple[str, str, str]] = [
    (
        "requests",
        "slots = [1, 2]\n",
        "workers = [1, 2]\ninput_tokens = [0, 50]\nmax_tokens = [8, 64]\nrequests = [4, 16]\n",
    ),
    (
        "arrivals",
        "",
        'rate = [1, 2]\narrival = ["poisson", "fixed"]\nconcurrency = ["slots", 2]\n'
        "stop_when_saturated = [false, true]\n",
    ),
    (
        "conversations",
        "",
        CONVERSATIONS + "max_tokens = [8, 16]\nturns = [2, 3]\nusers = [1, 4]\n"
        "cache_prompt = [true, false]\n",
    ),
    ("trace", "", TRACE + "warmup = [0, 1]\nmax_requests = [0, 5]\ntime_scale = [1.0, 2.0]\n"),
    (
        "kinds",
        "",
        'users = [1, 2]\nrequests = [3, 5]\nkind = ["requests", "conversations"]\n',
    ),
]


def field_file(server: str, workload: str) -> str:
    return f"[server]\n{server}[workload]\n{workload}"


def cases() -> dict[str, str]:
    """Each case's name and its file's text."""
    found = {f"experiments/{p.name}": p.read_text(encoding="utf-8") for p in SHIPPED}
    found.update({f"field {n}": field_file(s, w) for n, s, w in FIELDS})
    found.update({f"sweep {n}": field_file(s, w) for n, s, w in SWEEPS})
    return found


# Every field's default as the schema had it when the expected data was written: a stored
# configuration holds each field, the expected data only those that differ from these.
DEFAULTS: dict[str, dict[str, object]] = {}


def _unlike_defaults(config: dict[str, object]) -> dict[str, object]:
    out = dict(config)
    for table in ("server", "workload"):
        values = config[table]
        assert isinstance(values, dict)
        out[table] = {k: v for k, v in values.items() if DEFAULTS[table].get(k) != v}
    return out


def expanded(text: str) -> dict[str, object]:
    """What a file comes to: its configurations as a session stores them (the fields unlike
    the defaults), managed and external, and its sweep axes."""
    from workbench.engine.config.experiment import parse_experiment

    experiment = parse_experiment(text)
    return {
        "axes": list(experiment.sweep_axes),
        "count": experiment.count(),
        "configs": [_unlike_defaults(c.to_dict()) for c in experiment.configs()],
        "external": [_unlike_defaults(c.to_dict()) for c in experiment.configs(external=True)],
    }


def main() -> None:
    from dataclasses import asdict

    from workbench.engine.config.experiment import WorkloadSettings
    from workbench.engine.config.server_settings import ServerSettings

    DEFAULTS.update(server=asdict(ServerSettings()), workload=asdict(WorkloadSettings()))
    data = {
        "defaults": DEFAULTS,
        "cases": {name: expanded(text) for name, text in cases().items()},
    }
    EXPECTED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(data['cases'])} cases written to {EXPECTED}")


if __name__ == "__main__":
    main()
