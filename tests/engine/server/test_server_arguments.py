"""Flags from settings and exit statuses in words: pure functions of the supervisor."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.server.llama_server import describe_exit, server_arguments


def test_flags_follow_the_settings():
    settings = ServerSettings(
        slots=4,
        ctx=4096,
        cont_batching=False,
        kv_unified=True,
        cache_type_k="q8_0",
        threads=2,
        batch_size=512,
        ubatch_size=128,
        gpu_layers=99,
        extra_args=("--flash-attn", "on"),
    )
    args = server_arguments(settings, Path("/m.gguf"), 9000)
    text = " ".join(args)
    for expected in (
        "-m /m.gguf",
        "--port 9000",
        "-np 4",
        "-c 4096",
        "-nocb",
        "--kv-unified",
        "-ctk q8_0",
        "-t 2",
        "-b 512",
        "-ub 128",
        "-ngl 99",
        "--metrics",
        "--cache-ram 0",
        "-lv 4",
    ):
        assert expected in text
    assert args[-2:] == ["--flash-attn", "on"]  # extra flags come last and win
    default = " ".join(server_arguments(ServerSettings(), Path("/m.gguf"), 1))
    assert "-cb" in default.split() and "kv-unified" not in default and "-ctk" not in default


def test_exit_statuses_in_words():
    assert "SIGILL" in describe_exit(-4) and "mno-amx" in describe_exit(-4)
    assert "SIGILL" in describe_exit(132)
    assert "SIGKILL" in describe_exit(-9) and "out-of-memory" in describe_exit(-9)
    assert describe_exit(1) == "exited with status 1"
    assert describe_exit(255) == "exited with status 255"
