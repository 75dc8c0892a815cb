"""Counting tokens from a model file's own vocabulary, for servers that cannot count and for
predictions made before a server starts: byte-level BPE (SmolLM2) and SentencePiece (Gemma 3),
each held to the pinned build's own count."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import gguf
import pytest

from tests.engine.models.made_models import written
from workbench.engine.base.errors import ModelFileError
from workbench.engine.measure.prompts import builtin_prompt
from workbench.engine.measure.sized_prompts import ServerTokenizer, padding
from workbench.engine.models.gguf_tokenizer import BpeEstimator, SpmEstimator, estimator_for

# What the real llama-server's /tokenize counted for each (SmolLM2-135M), measured once:
# the live comparison is test_the_estimate_is_the_servers_own_count below.
COUNTED = {
    "Hello, world! It's 2026; numbers 12345 and 3.14.": 26,
    "  indented\n\tcode = f(x) + g(y)  # comment": 19,
    "héllo naïve café — ünïcode ✓ 日本語": 22,
}


def test_the_default_models_vocabulary_counts_as_its_server_does(model_path) -> None:
    count = estimator_for(model_path)
    assert {text: count(text) for text in COUNTED} == COUNTED


def test_merges_apply_by_rank() -> None:
    estimator = BpeEstimator(("a b", "b c", "ab c"))
    assert estimator.count("abc") == 1  # a+b first (rank 0), then ab+c
    assert estimator.count("bca") == 2  # bc, a
    assert estimator.count("xyz") == 3  # no merges: a token per byte
    assert estimator.count("") == 0


def _vocabulary(path: Path, kind: str, **arrays: list) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(kind)
    for key, values in arrays.items():
        writer.add_array(f"tokenizer.ggml.{key}", values)
    return written(writer, path)


def test_a_tokenizer_of_another_kind_or_without_its_arrays_is_refused(tmp_path: Path) -> None:
    bert = _vocabulary(tmp_path / "wp.gguf", "bert", tokens=["[CLS]", "a"])
    with pytest.raises(ModelFileError, match=r"\(bert\) is neither a byte-level BPE"):
        estimator_for(bert)
    no_merges = _vocabulary(tmp_path / "bpe.gguf", "gpt2", tokens=["a"])
    with pytest.raises(ModelFileError, match="has no merges"):
        estimator_for(no_merges)
    no_scores = _vocabulary(tmp_path / "sp.gguf", "llama", tokens=["<s>", "a"])
    with pytest.raises(ModelFileError, match="no tokens or scores"):
        estimator_for(no_scores)


def test_sentencepiece_merges_the_best_scored_pair_first() -> None:
    """The pair whose joined text scores highest merges first (llama.cpp's
    ``llm_tokenizer_spm_session``); what no token covers is a token a byte; a user-defined
    token is cut out whole first; spaces are ``▁``."""
    tokens = ("a", "b", "c", "d", "ab", "bc", "cd", "\u2581", "\u2581a", "\n\n")
    types = (1,) * 9 + (4,)
    scores = (0.0, 0.0, 0.0, 0.0, -1.0, -0.5, -0.4, 0.0, -0.1, 0.0)
    count = SpmEstimator(tokens, scores, types, space_prefix=False).count
    assert count("abcd") == 2  # cd first, then ab: b+c never forms
    better_bc = (0.0, 0.0, 0.0, 0.0, -1.0, -0.3, -0.4, 0.0, -0.1, 0.0)
    assert SpmEstimator(tokens, better_bc, types, space_prefix=False).count("abcd") == 3
    assert count("ab") == 1 and count("") == 0
    assert count("xé") == 3  # no token: one a byte (é is two)
    assert count(" a") == 1  # ▁a
    assert count("a\n\nb") == 3  # a, the cut-out \n\n, b
    prefixed = SpmEstimator(tokens, scores, types, space_prefix=True).count
    assert prefixed("a") == 1  # ▁a: the prefix opens the text


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

    count = estimator_for(model_path)
    assert [count(t) for t in texts] == asyncio.run(counted())


TRICKY = [
    "Hi  there",
    "  leading spaces and trailing  ",
    "def f(x):\n    return x**2\n\n\ttab",
    "naïve café — ünïcödé 日本語のテキスト 🙂🙂",
    "x \n y  \n\n  z",
]


@pytest.mark.server
def test_a_sentencepiece_count_is_llama_tokenizes_own(server_binary, gemma3_path) -> None:
    """Gemma 3's SentencePiece vocabulary counted as the pinned build's ``llama-tokenize``
    counts (no server needed; the BOS left out): runs of spaces and newlines are Gemma's
    user-defined tokens, cut out before the merges."""
    tokenize = Path(server_binary).with_name("llama-tokenize")
    texts = [builtin_prompt(i) + "\n\n" + padding(i, 400) for i in range(3)] + TRICKY

    def counted(text: str) -> int:
        out = subprocess.run(
            [tokenize, "-m", gemma3_path, "--stdin", "--ids", "--log-disable", "--no-bos"],
            input=text, capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        return len(json.loads(out.strip().splitlines()[-1]))

    count = estimator_for(gemma3_path)
    assert [count(t) for t in texts] == [counted(t) for t in texts]
