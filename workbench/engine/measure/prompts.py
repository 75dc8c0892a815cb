"""Prompts for a workload: a built-in set, unique per request, or a user's file.

Unique prompts matter: a warm prefix cache lets the server skip prefill and silently flatters
TTFT. Built-in prompts start with the request's number, so no two share a prefix beyond the
chat template.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import workload_file

_SUBJECTS = (
    "a lighthouse keeper who finds a message in a bottle",
    "the history of the printing press",
    "how a refrigerator moves heat",
    "a city built on the back of a giant turtle",
    "why the sky looks blue at noon and red at sunset",
    "a chess match between two old friends",
    "the life cycle of a monarch butterfly",
    "a robot learning to bake bread",
    "the first expedition to the South Pole",
    "how vaccines train the immune system",
    "a market day in a mountain village",
    "the invention of the telephone",
    "a detective who can hear colours",
    "how rainbows form after a storm",
    "a train journey across a snowy continent",
    "the rules of a made-up board game",
    "a gardener who grows glass flowers",
    "how bridges carry heavy loads",
    "the migration of humpback whales",
    "a library that rearranges itself at night",
)
_TASKS = (
    "Write a short story about {}.",
    "Explain {} to a ten-year-old.",
    "Write a poem about {}.",
    "Describe {} in vivid detail.",
    "List five surprising facts about {}.",
    "Write a diary entry about {}.",
)


def builtin_prompt(index: int) -> str:
    subject = _SUBJECTS[index % len(_SUBJECTS)]
    task = _TASKS[(index // len(_SUBJECTS)) % len(_TASKS)]
    return f"Request {index}. " + task.format(subject)


class PromptSource:
    """Prompt number ``i`` for any ``i``: a file's prompts are reused in turn if too few."""

    def __init__(self, prompts: list[str] | None = None, origin: str = "builtin") -> None:
        self._prompts = prompts
        self.origin = origin

    def get(self, index: int) -> str:
        if self._prompts is None:
            return builtin_prompt(index)
        return self._prompts[index % len(self._prompts)]

    def tokens(self, index: int) -> int | None:
        """The prompt's length by the server's count: not known for prompts as written
        (``sized_prompts.SizedPrompts`` knows it for the ones it built)."""
        return None

    @property
    def size(self) -> int | None:
        return None if self._prompts is None else len(self._prompts)


MAX_PROMPT_FILE_BYTES = 64 * 2**20


def load_prompts(spec: str, base_dir: Path | None = None) -> PromptSource:
    """``builtin``, a ``.jsonl`` file (objects with a "prompt" string), or a text file with
    one prompt per line. Relative paths are taken from the experiment file's folder."""
    if spec == "builtin":
        return PromptSource()
    path = workload_file("prompts", spec, base_dir)
    try:
        if not path.is_file():  # a FIFO or a device would block or never end
            raise ExperimentError(f"[workload] prompts: {path} is not a regular file")
        if path.stat().st_size > MAX_PROMPT_FILE_BYTES:
            raise ExperimentError(
                f"[workload] prompts: {path} is over {MAX_PROMPT_FILE_BYTES // 2**20} MiB"
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"[workload] prompts: cannot read {path}: {exc}") from None
    prompts: list[str] = []
    if path.suffix == ".jsonl":
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ExperimentError(f"{path}:{number}: not valid JSON: {exc}") from None
            if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
                raise ExperimentError(f'{path}:{number}: expected an object with a "prompt" string')
            prompts.append(item["prompt"])
    else:
        prompts = [line.strip() for line in text.splitlines() if line.strip()]
    if not prompts:
        raise ExperimentError(f"[workload] prompts: {path} holds no prompts")
    return PromptSource(prompts, str(path))
