"""The text a model reads from each MCP tool: a few plain lines in the style of the HTTP API's
context block (dcpm.read.context_block), with the memory ids the other tools take. Rendered from
the structured results, so the text and the structured content never disagree."""

from __future__ import annotations

from dcpm.mcp.results import Deleted, Listing, Memory, MemoryDetail, Saved, SearchResult

NO_HITS = "No memories about the user match this search."
CHANGES = {"ADD": "added", "SUPERSEDE": "revised", "UPDATE": "updated", "NONE": "already known"}


def memory_line(memory: Memory, *, with_chain: bool = True) -> str:
    """`- [date] (kind) text (earlier: ...) [id ...]`; a raw turn reads `- [date] speaker: text`."""
    if memory.kind == "raw":
        return f"- [{memory.date}] {memory.speaker or 'user'}: {memory.text} [id {memory.id}]"
    kind = memory.kind if memory.current is not False else f"{memory.kind}, replaced"
    line = f"- [{memory.date}] ({kind}) {memory.text}"
    ids = [link.id for link in memory.chain or []]
    if with_chain and memory.id in ids:
        earlier = [link.text for link in (memory.chain or [])[: ids.index(memory.id)]]
        if earlier:
            line += f" (earlier: {'; '.join(earlier)})"
    if memory.now is not None:
        line += f" (now: {memory.now.text})"
    return f"{line} [id {memory.id}]"


def search_text(result: SearchResult) -> str:
    if not result.hits:
        return NO_HITS
    lines = ["Memories about the user, best match first:"] + [memory_line(hit) for hit in result.hits]
    if result.nodes:
        lines.append("Patterns inferred over many memories:")
        lines += [f"- ({node.kind.replace('_', ' ')}{', ' + node.domain if node.domain else ''}) {node.text}"
                  for node in result.nodes]
    return "\n".join(lines)


def detail_text(detail: MemoryDetail) -> str:
    memory = detail.memory
    lines = [memory_line(memory, with_chain=False)[2:]]
    if memory.chain:
        lines.append("Revisions, oldest first:")
        lines += [f"- [{link.date}] {link.text} [id {link.id}]{' (current)' if link.current else ''}"
                  for link in memory.chain]
    if detail.history:
        texts = {link.id: link.text for link in memory.chain or []} | {memory.id: memory.text}
        lines.append("History:")
        lines += [f"- [{event.at.date()}] {event.action}: {texts.get(event.item_id, f'id {event.item_id}')}"
                  for event in detail.history]
    return "\n".join(lines)


def listing_text(listing: Listing) -> str:
    if not listing.items:
        return (f"No memories past the first {listing.offset} (the user has {listing.total})." if listing.total
                else "No memories stored for the user yet.")
    first, last = listing.offset + 1, listing.offset + len(listing.items)
    lines = [f"Memories {first}-{last} of {listing.total}, oldest first:"]
    return "\n".join(lines + [memory_line(memory) for memory in listing.items])


def saved_text(saved: Saved) -> str:
    changes = [change for change in saved.changes if change.op != "RAW"]
    if saved.status != "done":
        head = f"Saved: {saved.message}." if saved.message else "Saved."
    else:
        head = "Saved. Extracted:" if changes else "Saved; nothing new to remember was extracted."
    lines = [head]
    for change in changes:
        line = f"- {CHANGES.get(change.op, change.op.lower())} ({change.kind}) {change.text} [id {change.id}]"
        if change.op == "SUPERSEDE" and change.replaces:
            line += f", replacing id {change.replaces}"
        lines.append(line)
    return "\n".join(lines)


def deleted_text(deleted: Deleted) -> str:
    count = len(deleted.deleted)
    text = f"Deleted {count} {'memory' if count == 1 else 'memories'}: {', '.join(deleted.deleted)}."
    if deleted.relinked:
        text += f" Relinked in the chain: {', '.join(deleted.relinked)}."
    return text
