"""Which weights an embedder runs: the identity that vector indexes and adapters are pinned to.

A model folder is known by its name and two digests of `model.safetensors`:
- the first form, kept so that indexes and adapters recorded with it still match: the first MiB
  of the file and its size. A change to tensors past the first MiB that keeps the size (a LoRA
  merged into the attention layers, a fine-tune of the top layers) left it unchanged;
- a digest of the file's header (every tensor's name, dtype, shape and place) and of the first,
  middle and last 4 KiB of every tensor's bytes. Changing a tensor changes its bytes nearly
  everywhere, so this tells such models apart while reading a few MiB, not the gigabytes of
  bge-m3, at every start.

A fingerprint reads `name:FIRST.TENSORS`; one recorded in the first form (`name:FIRST`) matches
the model whose first part it equals, and is then rewritten in full by whoever recorded it. A hub
name is looked up in the local hub cache (never on the network); a model without safetensors
there (a pickle checkpoint) is known by its name alone, and a record of a name alone matches any
weights of that name."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

SAMPLE = 4096
FIRST_FORM_BYTES = 1 << 20


def weights_fingerprint(path: str, name: str) -> str:
    weights = Path(path) / "model.safetensors"
    if not weights.is_file():
        weights = _hub_cached(path)
    if weights is None:
        return name
    with weights.open("rb") as handle:
        first = _first_form(handle, weights.stat().st_size)
        tensors = _tensor_digest(handle)
    return f"{Path(name).name}:{first}.{tensors}"


def same_weights(recorded: str, current: str) -> bool:
    """Whether a recorded fingerprint names the weights `current` describes; a first-form or a
    name-only record is judged by the part it has."""
    if recorded == current:
        return True
    name, _, digest = recorded.rpartition(":")
    if not name:
        return current.rpartition(":")[0] == Path(recorded).name
    return "." not in digest and current.rsplit(".", 1)[0] == recorded


def _hub_cached(name: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(name, "model.safetensors")
    except Exception:  # not a repo id, or no hub library: known by name then
        return None
    return Path(found) if isinstance(found, str) else None


def _first_form(handle, size: int) -> str:  # type: ignore[no-untyped-def]
    digest = hashlib.sha256(handle.read(FIRST_FORM_BYTES))
    digest.update(str(size).encode())
    return digest.hexdigest()[:16]


def _tensor_digest(handle) -> str:  # type: ignore[no-untyped-def]
    handle.seek(0)
    (header_size,) = struct.unpack("<Q", handle.read(8))
    header_bytes = handle.read(header_size)
    digest = hashlib.sha256(header_bytes)
    data_start = 8 + header_size
    tensors = {key: value for key, value in json.loads(header_bytes).items() if key != "__metadata__"}
    for key in sorted(tensors):
        begin, end = tensors[key]["data_offsets"]
        middle = (begin + end) // 2
        for start in sorted({begin, max(begin, middle - SAMPLE // 2), max(begin, end - SAMPLE)}):
            handle.seek(data_start + start)
            digest.update(handle.read(min(SAMPLE, end - start)))
    return digest.hexdigest()[:16]
