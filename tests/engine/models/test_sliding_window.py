"""Sliding-window models: which layers are windowed (from the GGUF header, or llama.cpp's
pattern per architecture), the windowed cache's cells, and the KV they add up to, against
what llama-server b11434 logged for Gemma 3 270M and against the real server."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.engine.models.made_models import write_windowed_model
from workbench.cli.main import main
from workbench.engine.models.buffers import Shape
from workbench.engine.models.memory import (
    MIB,
    ModelFacts,
    kv_caches,
    kv_layout,
    read_model_facts,
    server_memory,
)
from workbench.engine.models.sliding_window import (
    SlidingWindow,
    micro_batch,
    swa_pattern,
    windowed_cells,
)

GEMMA3_FULL_LAYERS = (5, 11, 17)  # set_swa_pattern(6) over 18 layers

GEMMA3_270M = ModelFacts(
    "gemma-3-270m-q4_k_m.gguf",
    "gemma3",
    "Gemma 3 270m",
    253 * MIB,
    235 * MIB,
    layers=18,
    kv_heads=(1,) * 18,
    head_k=256,
    head_v=256,
    train_ctx=32768,
    quantization="Q4_K_M",
    shape=Shape(
        vocab=262144, embedding=640, feed_forward=2048, heads=4, head_k=256, repacked_bytes=0
    ),
    window=SlidingWindow(512, tuple(i not in GEMMA3_FULL_LAYERS for i in range(18))),
)

# What llama-server b11434 logged for Gemma 3 270M Q4_K_M (f16 KV): -np, -c, -ub,
# --kv-unified, --swa-full; then its two `llama_kv_cache: size = ...` lines (full layers,
# windowed layers) in MiB, and the windowed cache's cells per stream.
LOGGED = [
    (1, 2048, 512, False, False, 6.0, 15.0, 1024),
    (1, 8192, 512, False, False, 24.0, 15.0, 1024),
    (1, 32768, 512, False, False, 96.0, 15.0, 1024),
    (2, 2048, 512, False, False, 6.0, 30.0, 1024),
    (2, 8192, 512, False, False, 24.0, 30.0, 1024),
    (2, 32768, 512, False, False, 96.0, 30.0, 1024),
    (4, 2048, 512, False, False, 6.0, 30.0, 512),  # never more than the slot's context
    (4, 8192, 512, False, False, 24.0, 60.0, 1024),
    (4, 32768, 512, False, False, 96.0, 60.0, 1024),
    (3, 8192, 512, False, False, 24.75, 45.0, 1024),
    (1, 1000, 512, False, False, 3.0, 15.0, 1024),
    (2, 8192, 128, False, False, 24.0, 22.5, 768),
    (1, 32768, 128, False, False, 96.0, 11.25, 768),
    (4, 8192, 100, False, False, 24.0, 45.0, 768),
    (2, 8192, 512, True, False, 24.0, 22.5, 1536),  # the window of every slot, one stream
    (4, 8192, 512, True, False, 24.0, 37.5, 2560),
    (4, 2048, 512, True, False, 6.0, 30.0, 2048),
    (4, 32768, 128, True, False, 96.0, 33.75, 2304),
    (-1, 8192, 512, False, False, 24.0, 37.5, 2560),
    (2, 8192, 512, False, True, 24.0, 120.0, 4096),
    (4, 32768, 512, True, True, 96.0, 480.0, 32768),
]


def test_llama_cpps_pattern_keeps_every_periods_last_layer_full():
    assert [i for i, w in enumerate(swa_pattern(6, 18)) if not w] == list(GEMMA3_FULL_LAYERS)
    assert swa_pattern(2, 4) == (True, False, True, False)
    assert swa_pattern(0, 3) == (True, True, True)  # 0: every layer windowed


@pytest.mark.parametrize(("slots", "ctx", "ubatch", "unified", "full", "_f", "_w", "cells"), LOGGED)
def test_the_windowed_cells_the_server_logged(slots, ctx, ubatch, unified, full, _f, _w, cells):
    layout = kv_layout(ctx, slots, unified)
    streams = 1 if layout.unified else layout.slots
    got = windowed_cells(layout.total_cells, layout.slots, layout.unified, 512, ubatch, full)
    assert got == cells * streams


@pytest.mark.parametrize(
    ("slots", "ctx", "ubatch", "unified", "full", "full_mib", "windowed_mib", "_c"), LOGGED
)
def test_the_kv_the_server_logged(slots, ctx, ubatch, unified, full, full_mib, windowed_mib, _c):
    caches = kv_caches(GEMMA3_270M, kv_layout(ctx, slots, unified), ubatch=ubatch, swa_full=full)
    assert (caches.full_mib, caches.windowed_mib) == (full_mib, windowed_mib)
    memory = server_memory(GEMMA3_270M, ctx, slots, unified, ubatch=ubatch, swa_full=full)
    assert memory.kv_mib == full_mib + windowed_mib


def test_quantised_kv_in_both_caches():
    """-ctk q8_0 -ctv q8_0 -np 2 -c 8192: the server logged 12.75 + 15.94 MiB."""
    caches = kv_caches(GEMMA3_270M, kv_layout(8192, 2), "q8_0", "q8_0")
    assert (caches.full_mib, round(caches.windowed_mib, 2)) == (12.75, 15.94)


def test_a_model_without_a_window_keeps_the_full_cache_on_every_layer():
    full = replace(GEMMA3_270M, window=None)
    assert server_memory(full, 8192, 2).kv_mib == 144.0  # what the plan said before


def test_the_micro_batch_is_never_more_than_the_batch():
    """-b 256 with the default -ub: the server logged n_ubatch = 256 and a 768-cell window."""
    assert micro_batch(256, None) == 256
    assert micro_batch(None, None) == 512
    assert micro_batch(4096, 1024) == 1024


def test_the_window_from_llama_cpps_pattern_for_the_architecture(tmp_path):
    facts = read_model_facts(write_windowed_model(tmp_path / "g.gguf", "gemma3", 512))
    assert facts.window == GEMMA3_270M.window and facts.window_note == ""
    assert server_memory(facts, 8192, 2).kv_mib == 54.0


def test_the_pattern_key_overrides_the_architectures(tmp_path):
    period = read_model_facts(write_windowed_model(tmp_path / "p.gguf", "gemma3", 512, pattern=3))
    assert period.window.windowed == swa_pattern(3, 18)
    flags = [i % 2 == 0 for i in range(18)]
    listed = read_model_facts(write_windowed_model(tmp_path / "l.gguf", "cohere2", 4096, flags))
    assert listed.window == SlidingWindow(4096, tuple(flags))


def test_gemma2s_window_without_its_key(tmp_path):
    facts = read_model_facts(write_windowed_model(tmp_path / "g2.gguf", "gemma2", None))
    assert facts.window == SlidingWindow(4096, swa_pattern(2, 18))


def test_no_window_or_a_zero_window(tmp_path):
    assert (
        read_model_facts(write_windowed_model(tmp_path / "n.gguf", "gemma3", None)).window is None
    )
    assert read_model_facts(write_windowed_model(tmp_path / "z.gguf", "gemma3", 0)).window is None


def test_an_unknown_architecture_with_a_window_is_an_upper_bound(tmp_path, capsys):
    path = write_windowed_model(tmp_path / "u.gguf", "newarch", 1024)
    facts = read_model_facts(path)
    assert facts.window is None
    assert "'newarch' has a 1024-token sliding window" in facts.window_note
    assert server_memory(facts, 8192, 2).kv_mib == 144.0
    assert main(["plan", str(path), "--ctx", "8192", "--slots", "2", "--memory-gib", "8"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Note: architecture 'newarch'" in out and "an upper bound" in out


def test_the_plan_shows_the_two_caches(tmp_path, capsys):
    path = write_windowed_model(tmp_path / "g.gguf", "gemma3", 512)
    args = ["plan", str(path), "--ctx", "8192", "--slots", "2", "--memory-gib", "8"]
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "18 layers (3 full, 15 with a 512-token window)" in out
    assert "│ 54.0 │" in out
    assert "the 15 windowed layers its 512-token window plus the 512-token micro-batch" in out
    assert main([*args, "--ubatch", "128"]) == 0
    assert "│ 46.5 │" in " ".join(capsys.readouterr().out.split())
    assert main([*args, "--swa-full"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "│ 144.0 │" in out and "the whole context too (--swa-full)" in out
