"""The rendered, token-budgeted context block an assistant pastes into its prompt."""

from __future__ import annotations

from collections.abc import Sequence

from dcpm.api.models import NodeHit, SearchHit
from dcpm.domain import ItemKind

# Four characters per token is the usual estimate for English with BPE tokenizers; close enough
# for a budget, and it keeps the read path free of a tokenizer dependency.
CHARS_PER_TOKEN = 4
LEADING_HITS = 3  # patterns go right after the best few hits, so a tight budget still shows them


def estimate_tokens(text: str) -> int:
    return max(1, (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)


def render_line(hit: SearchHit) -> str:
    when = hit.timestamp.strftime("%Y-%m-%d")
    if hit.kind == ItemKind.RAW:
        who = hit.speaker or hit.role or "user"
        return f"- [{when}] {who}: {hit.text}"
    line = f"- [{when}] ({hit.kind}) {hit.text}"
    chain = hit.chain or []
    position = next((n for n, link in enumerate(chain) if link.id == hit.id), None)
    own = chain[position] if position is not None else None
    if hit.current is not None or (own is not None and not own.current):
        # an old revision: say that it was replaced and by what, never list it as its own past
        line += f" (replaced {own.valid_to:%Y-%m-%d})" if own is not None and own.valid_to else " (replaced)"
        if hit.current is not None:
            line += f" -> now: {hit.current.text}"
    elif position:
        line += f" (earlier: {'; '.join(link.text for link in chain[:position])})"
    return line


def render_context(hits: Sequence[SearchHit], budget_tokens: int, nodes: Sequence[NodeHit] = ()) -> str:
    """The best hits, the patterns they support, then the rest, until the budget is spent; an
    empty string when nothing fits."""
    header = "Relevant memories about the user:"
    lines = [header]
    used = estimate_tokens(header)
    node_lines = [f"- (pattern, {n.kind.replace('_', ' ')}) {n.text}" for n in nodes]
    hit_lines = [render_line(hit) for hit in hits]
    for line in hit_lines[:LEADING_HITS] + node_lines + hit_lines[LEADING_HITS:]:
        cost = estimate_tokens(line)
        if used + cost > budget_tokens:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines) if len(lines) > 1 else ""
