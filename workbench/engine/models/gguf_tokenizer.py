"""A text's length in tokens from a model file's own vocabulary, for a server that cannot
count for us (an external server without ``/tokenize``) and for a prediction made before any
server starts (``estimator_for`` picks the model's kind).

Byte-level BPE (``tokenizer.ggml.model = "gpt2"``: GPT-2, SmolLM, Llama 3, Qwen and most
recent models): the text is split into words as GPT-2's pre-tokenizer does (Python's ``re``
has no Unicode letter class, so ``[^\\W\\d_]`` stands in for ``\\p{L}``; models whose own
pre-tokenizer splits digits or punctuation differently come out a little off), each word's
bytes are mapped to the vocabulary's printable stand-ins, and the merges are applied by rank.
SentencePiece (``tokenizer.ggml.model = "llama"``: Gemma, Llama 2, Mistral's first models)
is counted as llama.cpp's own tokenizer does (src/llama-vocab.cpp): the vocabulary's
user-defined tokens (Gemma's runs of spaces and newlines) are cut out of the text whole first,
the longest first (``tokenizer_st_partition``); in each piece between them
(``llm_tokenizer_spm_session``), spaces become ``▁`` (one in front where the model adds a
space prefix and the piece opens the text or follows a cut-out token), the text's UTF-8
characters are merged pairwise, the pair whose joined text is the vocabulary token of the
highest score first (the leftmost on a tie), and a character no token covers falls back to
one token a byte; a test holds it to ``llama-tokenize``.
Special tokens (the BOS) and the chat template are not counted.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import re
from collections.abc import Callable
from pathlib import Path

from workbench.engine.base.errors import ModelFileError
from workbench.engine.models.gguf_header import read_gguf_header

TOKENS, MERGES, MODEL = "tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.model"
SCORES, TYPES = "tokenizer.ggml.scores", "tokenizer.ggml.token_type"
SPACE_PREFIX = "tokenizer.ggml.add_space_prefix"
USER_DEFINED = 4  # a token type: matched whole before the tokenizer sees the text
SPACE = "\u2581"  # SentencePiece's stand-in for a space
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
    def from_fields(cls, path: Path, fields: dict[str, object]) -> BpeEstimator:
        merges = fields.get(MERGES)
        if not isinstance(merges, tuple) or not merges:
            raise ModelFileError(f"{path}: its byte-level BPE vocabulary has no merges")
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


class SpmEstimator:
    """Counts tokens of plain text as llama.cpp's SentencePiece tokenizer does."""

    def __init__(
        self,
        tokens: tuple[str, ...],
        scores: tuple[float, ...],
        types: tuple[int, ...],
        space_prefix: bool,
    ) -> None:
        self.scores: dict[bytes, float] = {}
        for text, score in zip(tokens, scores, strict=True):
            self.scores.setdefault(text.encode("utf-8"), score)
        kept = {t for t, kind in zip(tokens, types, strict=True) if kind == USER_DEFINED and t}
        self.user_defined = tuple(sorted(kept, key=len, reverse=True))
        self.space_prefix = space_prefix
        self.count = functools.lru_cache(maxsize=MAX_WORD_CACHE)(self._count)

    @classmethod
    def from_model(cls, path: Path, fields: dict[str, object]) -> SpmEstimator:
        tokens, scores = fields.get(TOKENS), fields.get(SCORES)
        types = fields.get(TYPES) or (1,) * len(tokens or ())
        if not isinstance(tokens, tuple) or not isinstance(scores, tuple):
            raise ModelFileError(f"{path}: its SentencePiece vocabulary has no tokens or scores")
        if not len(tokens) == len(scores) == len(types):
            raise ModelFileError(
                f"{path}: its vocabulary's tokens, scores and types differ in count"
            )
        floats = tuple(float(s) for s in scores)
        return cls(tokens, floats, tuple(map(int, types)), fields.get(SPACE_PREFIX) is True)

    def _count(self, text: str) -> int:
        """The length of llama.cpp's tokens for ``text``, the BOS left out."""
        pieces: list[str | None] = [text]  # None: a user-defined token cut out
        for token in self.user_defined:
            cut: list[str | None] = []
            for piece in pieces:
                if piece is None or token not in piece:
                    cut.append(piece)
                    continue
                for i, part in enumerate(piece.split(token)):
                    cut += [None] * (i > 0) + [part] * (part != "")
            pieces = cut
        count, after_token = 0, True
        for piece in pieces:
            if piece is None:
                count, after_token = count + 1, True
            else:
                count += self._spm(piece, self.space_prefix and after_token)
                after_token = False
        return count

    def _spm(self, text: str, prefix: bool) -> int:
        """``llm_tokenizer_spm_session::tokenize``'s output length for one piece."""
        data = ((" " if prefix else "") + text).replace(" ", SPACE).encode("utf-8")
        if not data:
            return 0
        starts = [i for i, byte in enumerate(data) if byte & 0xC0 != 0x80]  # UTF-8 characters
        sizes = [end - start for start, end in itertools.pairwise([*starts, len(data)])]
        after = [*range(1, len(starts)), -1]
        before = list(range(-1, len(starts) - 1))
        queue: list[tuple[float, int, int, int]] = []

        def pair(left: int, right: int) -> None:
            if left < 0 or right < 0:
                return
            joined = data[starts[left] : starts[left] + sizes[left] + sizes[right]]
            score = self.scores.get(joined)
            if score is not None:
                heapq.heappush(queue, (-score, left, right, len(joined)))

        for i in range(1, len(starts)):
            pair(i - 1, i)
        while queue:
            _, left, right, size = heapq.heappop(queue)
            if not sizes[left] or not sizes[right] or sizes[left] + sizes[right] != size:
                continue  # one of the two was merged since
            sizes[left] += sizes[right]
            sizes[right] = 0
            after[left] = after[right]
            if after[right] >= 0:
                before[after[right]] = left
            pair(before[left], left)
            pair(left, after[left])

        # Two symbols merge only into a token, so a symbol left is a token or a single
        # character none covers, which falls back to a token a byte (llama.cpp's
        # ``resegment`` then finds no merge to undo).
        count, symbol = 0, 0
        while symbol != -1:
            piece = data[starts[symbol] : starts[symbol] + sizes[symbol]]
            count += 1 if piece in self.scores else len(piece)
            symbol = after[symbol]
        return count


def estimator_for(path: Path) -> Callable[[str], int]:
    """The token count of plain text for the model at ``path``, by the kind of its
    tokenizer: byte-level BPE or SentencePiece; ModelFileError for any other."""
    header = read_gguf_header(path, frozenset({MERGES, TOKENS, SCORES, TYPES}))
    kind = header.fields.get(MODEL)
    if kind == "gpt2":
        return BpeEstimator.from_fields(path, header.fields).count
    if kind == "llama":
        return SpmEstimator.from_model(path, header.fields).count
    raise ModelFileError(
        f"{path}: its tokenizer ({kind or 'unnamed'}) is neither a byte-level BPE (gpt2) nor "
        "SentencePiece (llama), which are all this count knows"
    )
