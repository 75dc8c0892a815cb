"""Prompts of an exact length in tokens, as the served model's own tokenizer counts them.

A prompt's length decides its prefill time and whether a request fits a slot's context, so
``input_tokens`` is hit exactly for the model being served rather than estimated from words:
the server's ``/tokenize`` counts, ``/apply-template`` shows what the chat template wraps
around the text (its tokens take context like any other, so they are part of the count),
and ``/detokenize`` cuts the padding at a token boundary. Each prompt keeps its own opening
(a built-in prompt starts with its request's number) and is padded with synthetic text of
its own, so no two prompts share a prefix beyond the template and the prompt cache cannot
serve one from another.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.net.bounded_http import post_json

# Plain words for the padding: common, mostly one token each, no markup the template or the
# tokenizer could treat specially.
_WORD_LIST = (
    "the of and to in is was that for on with as by at from this are be it an or which "
    "river stone light house market garden winter summer morning evening window letter "
    "road bridge field forest mountain valley harbour island village city tower street "
    "teacher farmer sailor doctor painter miller baker keeper traveller neighbour friend "
    "walked carried opened closed watched listened remembered followed answered waited "
    "quiet bright narrow heavy early late warm cold old new small large distant careful "
    "slowly quickly often never always again together before after under over between "
    "bread water salt iron paper clock bell lamp rope boat cart wheel door key map coin"
)
_WORDS = _WORD_LIST.split()
TOKENIZE_DEADLINE_S = 30.0
MAX_ANSWER_BYTES = 16 * 2**20
MAX_TRIES = 8


class TokenizerUnavailable(WorkbenchError):
    """The server has no usable ``/tokenize`` (an external server of another kind)."""


def padding(seed: int, words: int) -> str:
    """``words`` words of synthetic sentences, the same for the same seed."""
    rng = random.Random(seed)
    sentences, left = [], words
    while left > 0:
        n = min(left, rng.randint(6, 14))
        chosen = [rng.choice(_WORDS) for _ in range(n)]
        sentences.append(" ".join(chosen).capitalize() + ".")
        left -= n
    return " ".join(sentences)


class ServerTokenizer:
    """The served model's tokenizer, through the server's own endpoints."""

    def __init__(self, base_url: str, endpoint: str, headers: dict[str, str] | None = None):
        self.base_url = base_url
        self.chat = endpoint == "chat"
        self.headers = headers

    async def _call(self, path: str, payload: dict[str, Any]) -> Any:
        answer = await post_json(
            self.base_url, path, payload, self.headers, MAX_ANSWER_BYTES, TOKENIZE_DEADLINE_S
        )
        if answer is None:
            raise TokenizerUnavailable(f"{path} did not answer within {TOKENIZE_DEADLINE_S:g} s")
        if answer.status != 200:
            raise TokenizerUnavailable(f"{path} answered HTTP {answer.status}")
        try:
            return json.loads(answer.body)
        except json.JSONDecodeError:
            raise TokenizerUnavailable(f"{path} answered something that is not JSON") from None

    async def tokens(self, text: str) -> list[int]:
        """The ids of ``text`` alone (no special tokens added or parsed)."""
        found = await self._call(
            "/tokenize", {"content": text, "add_special": False, "parse_special": False}
        )
        ids = found.get("tokens") if isinstance(found, dict) else None
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise TokenizerUnavailable("/tokenize answered without a list of token ids")
        return ids

    async def text(self, ids: list[int]) -> str:
        found = await self._call("/detokenize", {"tokens": ids})
        content = found.get("content") if isinstance(found, dict) else None
        if not isinstance(content, str):
            raise TokenizerUnavailable("/detokenize answered without text")
        return content

    async def count(self, prompt: str) -> int:
        """Tokens the server will process for ``prompt`` sent to this endpoint: for chat,
        the chat template's text included, special tokens as the server adds them."""
        if self.chat:
            return len(await self.chat_ids([{"role": "user", "content": prompt}]))
        return len(await self._prompt_ids(prompt))

    async def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The ids the server processes for ``messages`` sent to the chat endpoint."""
        found = await self._call("/apply-template", {"messages": messages})
        text = found.get("prompt") if isinstance(found, dict) else None
        if not isinstance(text, str):
            raise TokenizerUnavailable("/apply-template answered without a prompt")
        return await self._prompt_ids(text)

    async def _prompt_ids(self, text: str) -> list[int]:
        found = await self._call(
            "/tokenize", {"content": text, "add_special": True, "parse_special": True}
        )
        ids = found.get("tokens") if isinstance(found, dict) else None
        if not isinstance(ids, list):
            raise TokenizerUnavailable("/tokenize answered without a list of token ids")
        return ids


@dataclass(frozen=True)
class SizedPrompt:
    text: str
    tokens: int | None  # as the server counts the whole prompt; None: estimated, not counted


async def sized_prompt(
    tokenizer: ServerTokenizer, opening: str, target: int, seed: int, alone: bool = False
) -> SizedPrompt:
    """``opening`` padded (or cut) so that the whole prompt counts ``target`` tokens (or,
    ``alone``, its text by itself: a conversation's message, whose template tokens depend on
    where it stands).

    Cutting the token ids of opening plus padding and counting the result converges in one
    or two steps (the template adds a fixed number); a cut whose text re-tokenizes
    differently can miss by a token, and then the nearest is kept with its true count."""
    body_ids = await tokenizer.tokens(f"{opening}\n\n{padding(seed, target)}")
    keep = min(len(body_ids), target)
    best: SizedPrompt | None = None
    tried: set[int] = set()
    for _ in range(MAX_TRIES):
        tried.add(keep)
        text = await tokenizer.text(body_ids[:keep])
        counted = len(await tokenizer.tokens(text)) if alone else await tokenizer.count(text)
        if best is None or abs(counted - target) < abs(best.tokens - target):
            best = SizedPrompt(text, counted)
        if counted == target:
            break
        keep = max(1, min(len(body_ids), keep + target - counted))
        if keep in tried:
            break
    assert best is not None
    return best


async def template_overhead(tokenizer: ServerTokenizer) -> int:
    """Tokens the endpoint adds around a prompt (the chat template, special tokens): the
    part of ``input_tokens`` that is not the text."""
    sample = "Request 0."
    return await tokenizer.count(sample) - len(await tokenizer.tokens(sample))


class SizedPrompts:
    """The prompts of one configuration's requests, each sized; a ``PromptSource`` for
    ``plan_records``."""

    def __init__(self, base: PromptSource, built: dict[int, SizedPrompt]) -> None:
        self.base = base
        self.built = built

    def get(self, index: int) -> str:
        found = self.built.get(index)
        return self.base.get(index) if found is None else found.text

    def tokens(self, index: int) -> int | None:
        found = self.built.get(index)
        return None if found is None else found.tokens


async def shared_prefix(tokenizer: ServerTokenizer, tokens: int, seed: int) -> str:
    """Text of exactly ``tokens`` tokens (alone, as the tokenizer reads it), the same for every
    request of a configuration: the part a prompt cache can reuse."""
    ids = await tokenizer.tokens("System instructions. " + padding(seed, tokens))
    return await tokenizer.text(ids[:tokens])


class HashedBlocks:
    """A recorded trace's prompt blocks: the text of each hash id, ``tokens`` long by the
    server's tokenizer, made from the id alone (and the seed and repeat), so rows that share
    ids open with the same text, token for token. Each block starts a word with a space, so
    the tokenizer never merges two blocks' tokens and a block counts the same wherever it
    stands. Repeats get their own blocks: a repeat's cache hits are its own rows'."""

    def __init__(self, tokenizer: ServerTokenizer, tokens: int, seed: int) -> None:
        self.tokenizer, self.tokens, self.seed = tokenizer, tokens, seed
        self._made: dict[tuple[int, int], str] = {}

    async def opening(self, hash_ids: Sequence[int], target: int, repeat: int) -> str:
        """The blocks of ``hash_ids`` in order, as many as a prompt of ``target`` tokens can
        hold (the last is cut to fit when the prompt is sized)."""
        return "".join(
            [await self._block(h, repeat) for h in hash_ids[: -(-target // self.tokens)]]
        )

    async def _block(self, hash_id: int, repeat: int) -> str:
        if (hash_id, repeat) not in self._made:
            key = f"{self.seed}:{repeat}:{hash_id}".encode()
            seed = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
            ids = await self.tokenizer.tokens(" " + padding(seed, self.tokens + 8))
            self._made[hash_id, repeat] = await self.tokenizer.text(ids[: self.tokens])
        return self._made[hash_id, repeat]


def approximate_prompts(
    base: PromptSource,
    targets: dict[int, int],
    seed: int,
    count: Callable[[str], int] | None = None,
) -> SizedPrompts:
    """Prompts of about ``targets[i]`` tokens for a server without a tokenizer endpoint,
    padded to length by ``count`` (an estimate from the model file's vocabulary) or, without
    one, a word per token wanted (the padding's words are common, mostly one token each).
    The chat template is not counted, and their length is not known (``tokens`` None): the
    server's own count comes back in each answer's usage."""
    built = {}
    for i, target in targets.items():
        opening = base.get(i)
        words = max(0, target - len(opening.split()))
        text = f"{opening}\n\n{padding(seed + i, words)}"
        for _ in range(MAX_TRIES if count is not None else 0):
            missing = target - count(text)
            if missing == 0 or words + missing < 0:
                break
            words += missing
            text = f"{opening}\n\n{padding(seed + i, words)}"
        built[i] = SizedPrompt(text, None)
    return SizedPrompts(base, built)


MIN_DRAWN_TOKENS = 64
"""The shortest prompt a spread may draw: room for the chat template and a question."""


def input_lengths(workload: WorkloadSettings, count: int) -> list[int]:
    """The prompt length of each of a configuration's ``count`` requests, in order:
    ``input_tokens``, or drawn around it as ``input_spread`` says. Request ``k`` of every
    configuration draws from ``seed + k``, so a sweep gives each configuration the same
    lengths; none is shorter than ``MIN_DRAWN_TOKENS`` (or the shared prefix and a question)."""
    mean, spread = workload.input_tokens, workload.input_spread_tokens
    if not mean or workload.input_spread == "fixed" or not spread:
        return [mean] * count
    least = max(MIN_DRAWN_TOKENS, workload.shared_prefix_tokens + MIN_DRAWN_TOKENS)
    lengths = []
    for k in range(count):
        rng = random.Random(workload.seed + k)
        if workload.input_spread == "uniform":
            drawn = rng.uniform(mean - spread, mean + spread)
        else:
            drawn = rng.gauss(mean, spread)
        lengths.append(max(least, round(drawn)))
    return lengths


async def size_prompts(
    tokenizer: ServerTokenizer,
    base: PromptSource,
    targets: dict[int, int],
    seed: int,
    prefix: str = "",
    alone: bool = False,
) -> SizedPrompts:
    """Request ``i``'s prompt for every ``i`` of ``targets``: ``prefix`` (shared by all),
    then ``base.get(i)``, sized to ``targets[i]`` tokens (the text ``alone``, or as the
    endpoint sends it) with padding seeded by ``seed + i`` (or as it is, counted, when that
    is 0)."""
    built = {}
    for i, target in targets.items():
        opening = f"{prefix}\n\n{base.get(i)}" if prefix else base.get(i)
        if target:
            built[i] = await sized_prompt(tokenizer, opening, target, seed + i, alone)
        else:
            built[i] = SizedPrompt(opening, await tokenizer.count(opening))
    return SizedPrompts(base, built)
