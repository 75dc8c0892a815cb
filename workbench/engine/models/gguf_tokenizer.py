"""An estimate of a text's length in tokens from a model file's own vocabulary, for a server
that cannot count for us (an external server without ``/tokenize``).

Byte-level BPE (``tokenizer.ggml.model = "gpt2"``: GPT-2, SmolLM, Llama 3, Qwen and most
recent models): the text is split into words as GPT-2's pre-tokenizer does (Python's ``re``
has no Unicode letter class, so ``[^\\W\\d_]`` stands in for ``\\p{L}``; models whose own
pre-tokenizer splits digits or punctuation differently come out a little off), each word's
bytes are mapped to the vocabulary's printable stand-ins, and the merges are applied by rank.
Special tokens and the chat template are not counted. SentencePiece vocabularies (``llama``)
are not estimated.
"""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

from workbench.engine.base.errors import ModelFileError
from workbench.engine.models.gguf_header import read_gguf_header

TOKENS, MERGES, MODEL = "tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.model"
WORDS = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")
MAX_WORD_CACHE = 1 << 16


def _byte_stand_ins() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character (the vocabulary's alphabet)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    stand_ins, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            stand_ins[byte] = chr(byte)
        else:
            stand_ins[byte] = chr(256 + extra)
            extra += 1
    return stand_ins


BYTES = _byte_stand_ins()


class BpeEstimator:
    """Counts tokens of plain text as a byte-level BPE model would."""

    def __init__(self, merges: tuple[str, ...]) -> None:
        self.ranks: dict[tuple[str, str], int] = {}
        for rank, merge in enumerate(merges):
            left, _, right = merge.partition(" ")
            if left and right:
                self.ranks.setdefault((left, right), rank)
        self._pieces = functools.lru_cache(maxsize=MAX_WORD_CACHE)(self._word_pieces)

    @classmethod
    def from_model(cls, path: Path) -> BpeEstimator:
        header = read_gguf_header(path, frozenset({MERGES}))
        kind, merges = header.fields.get(MODEL), header.fields.get(MERGES)
        if kind != "gpt2" or not isinstance(merges, tuple) or not merges:
            raise ModelFileError(
                f"{path}: its tokenizer ({kind or 'unnamed'}) is not a byte-level BPE with "
                "merges, which is all this estimate knows"
            )
        return cls(tuple(str(m) for m in merges))

    def count(self, text: str) -> int:
        return sum(self._pieces(word) for word in WORDS.findall(text))

    def _word_pieces(self, word: str) -> int:
        parts = [BYTES[b] for b in word.encode("utf-8")]
        while len(parts) > 1:
            ranked = [
                (self.ranks.get(pair, -1), i) for i, pair in enumerate(itertools.pairwise(parts))
            ]
            known = [(rank, i) for rank, i in ranked if rank >= 0]
            if not known:
                break
            _, i = min(known)
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        return len(parts)
