"""Counting tokens from a model file's own vocabulary, for servers that cannot count."""

from __future__ import annotations

import asyncio
from pathlib import Path

import gguf
import pytest

from workbench.engine.base.errors import ModelFileError
from workbench.engine.measure.prompts import builtin_prompt
from workbench.engine.measure.sized_prompts import ServerTokenizer, padding
from workbench.engine.models.gguf_tokenizer import BpeEstimator

# What the real llama-server's /tokenize counted for each (SmolLM2-135M), measured once:
# the live comparison is test_the_estimate_is_the_servers_own_count below.
COUNTED = {
    "Hello, world! It's 2026; numbers 12345 and 3.14.": 26,
    "  indented\n\tcode = f(x) + g(y)  # comment": 19,
    "héllo naïve café — ünïcode ✓ 日本語": 22,
}


def test_the_default_models_vocabulary_counts_as_its_server_does(model_path) -> None:
    estimator = BpeEstimator.from_model(model_path)
    assert {text: estimator.count(text) for text in COUNTED} == COUNTED


def test_merges_apply_by_rank() -> None:
    estimator = BpeEstimator(("a b", "b c", "ab c"))
    assert estimator.count("abc") == 1  # a+b first (rank 0), then ab+c
    assert estimator.count("bca") == 2  # bc, a
    assert estimator.count("xyz") == 3  # no merges: a token per byte
    assert estimator.count("") == 0


def test_a_model_without_byte_level_merges_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sp.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "a"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelFileError, match=r"\(llama\) is not a byte-level BPE"):
        BpeEstimator.from_model(path)


@pytest.mark.server
def test_the_estimate_is_the_servers_own_count(server_binary, model_path, tmp_path) -> None:
    from workbench.engine.config.server_settings import ServerSettings
    from workbench.engine.server.llama_server import LlamaServer

    texts = [builtin_prompt(i) + "\n\n" + padding(i, 400) for i in range(4)]
    texts += list(COUNTED)

    async def counted() -> list[int]:
        settings = ServerSettings(slots=1, ctx=2048)
        server = LlamaServer(server_binary, model_path, settings, tmp_path / "s.log")
        await server.start()
        try:
            tokenizer = ServerTokenizer(server.base_url, "completion")
            return [len(await tokenizer.tokens(t)) for t in texts]
        finally:
            await asyncio.to_thread(server.stop)

    estimator = BpeEstimator.from_model(model_path)
    assert [estimator.count(t) for t in texts] == asyncio.run(counted())
