"""Prompts that fit the model's context (`llm_context_tokens`): what a prompt's variable parts
may take once the system prompt, the answer's schema and room for the answer are counted.

Tokens are estimated, not counted: the served model's tokenizer is unknown here and loading one
per endpoint would cost more than the call. One token per three UTF-8 bytes over-counts English
(about four characters a token) and stays safe for accented and CJK text, so an estimate that
fits is a prompt that fits. Only the copy sent to the LLM is cut; the store keeps every turn whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from pydantic import BaseModel

BYTES_PER_TOKEN = 3
CHAT_OVERHEAD_TOKENS = 32  # role markers and the chat template around the two messages
MIN_ROOM_BYTES = 1_000  # a context too small for the fixed parts still gets this much text
CUT = " [...]"


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def size(lines: Sequence[str]) -> int:
    """Bytes the lines take joined by newlines (one per line, counted generously)."""
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


@dataclass(frozen=True)
class Budget:
    context_tokens: int
    answer_tokens: int

    def room(self, system: str, answer: type[BaseModel]) -> int:
        """Bytes left for the user message. The schema is counted even where the server takes it
        as `response_format` rather than in the prompt."""
        fixed = estimate_tokens(system) + _schema_tokens(answer) + self.answer_tokens + CHAT_OVERHEAD_TOKENS
        return max(MIN_ROOM_BYTES, (self.context_tokens - fixed) * BYTES_PER_TOKEN)


@lru_cache(maxsize=None)
def _schema_tokens(answer: type[BaseModel]) -> int:
    """A prompt's answer schema never changes: estimated once per answer model, not per request."""
    return estimate_tokens(json.dumps(answer.model_json_schema()))


def cut(text: str, max_bytes: int) -> str:
    """`text` in at most `max_bytes` UTF-8 bytes, marked where it was cut."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    if max_bytes <= len(CUT):
        return data[:max(max_bytes, 0)].decode("utf-8", "ignore")
    return data[:max_bytes - len(CUT)].decode("utf-8", "ignore") + CUT


def fit(lines: Sequence[str], room: int) -> list[str]:
    """Cut the longest lines first until all fit in `room` bytes: short lines stay whole and the
    long ones share what is left equally (water-filling)."""
    if size(lines) <= room:
        return list(lines)
    sizes = sorted(len(line.encode("utf-8")) + 1 for line in lines)
    left, cap = max(room, 0), 0
    for taken, line_size in enumerate(sizes):
        share = left // (len(sizes) - taken)
        if line_size > share:
            cap = share
            break
        left -= line_size
    return [cut(line, cap - 1) for line in lines]


def latest(lines: Sequence[str], room: int) -> list[str]:
    """The most recent whole lines (the list is oldest first) that fit in `room` bytes."""
    kept: list[str] = []
    for line in reversed(lines):
        if size(kept) + size([line]) > room:
            break
        kept.append(line)
    return list(reversed(kept))
