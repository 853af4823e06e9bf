"""torch's intra-op threads, per size of work: few for one query, many for a batch of texts.

One query is a small forward pass: on a shared CPU more threads than free cores make it wait
on the busiest core (25 ms with one thread against 190+ ms with two on a busy 2-core host). A
batch of documents is large enough to use every core (on the same host, quiet: 141 documents/s
with one thread, 270 with two). torch's setting is per process, so a batch raises it for its
duration and the last batch to finish puts the query setting back; a query that arrives
meanwhile runs with the batch's threads. Several networks on one query (the associative
encoder's E and E_θ) run at once, one per free core (`each_model`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

BATCH_MIN = 8  # fewer texts than this are encoded like a query
_lock = threading.Lock()
_running = 0  # batches encoding now
_query = 0  # threads for queries and small batches; 0 until configured
_documents = 0
_torch_default = 0  # torch's own count, read once before the first change
T = TypeVar("T")


def configure(query_threads: int, document_threads: int) -> None:
    """Remember both settings (0: torch's own default) and apply the query one now."""
    global _query, _documents, _torch_default
    import torch

    with _lock:
        if not _torch_default:
            _torch_default = torch.get_num_threads()
        _query = query_threads if query_threads > 0 else _torch_default
        _documents = document_threads if document_threads > 0 else _torch_default
        if _running == 0:
            torch.set_num_threads(_query)


@contextmanager
def for_batch(count: int) -> Iterator[None]:
    """Encode `count` texts with the document threads when they are a batch (BATCH_MIN or more):
    documents on import and reindex, and any batch the trainer or an evaluation encodes."""
    global _running
    if count < BATCH_MIN or not _documents or _documents == _query:
        yield
        return
    import torch

    with _lock:
        _running += 1
        if _running == 1:
            torch.set_num_threads(_documents)
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0:
                torch.set_num_threads(_query)


_side: ThreadPoolExecutor | None = None


def _pin_query_threads() -> None:
    import torch

    torch.set_num_threads(_query or 1)  # a worker keeps the count it starts with


def each_model(forward: Callable[[Any], T], models: Sequence[Any], count: int, on_cpu: bool = True) -> list[T]:
    """forward(model) for every model, in order. For a query (fewer than BATCH_MIN texts) on the
    CPU with a core free per model, the passes run at once: the associative encoder's E(q) and
    E_θ(q) then cost about one pass of wall time instead of two (1.39x against 1.99x measured,
    one thread each on 2 cores). torch releases the GIL inside its kernels."""
    global _side
    # os.cpu_count() is a system call (45 µs): asked last, so the frozen encoder's one model never pays it
    if (len(models) < 2 or count >= BATCH_MIN or not on_cpu or _running
            or (_query or 1) * len(models) > (os.cpu_count() or 1)):
        return [forward(model) for model in models]
    with _lock:
        if _side is None:
            _side = ThreadPoolExecutor(max_workers=os.cpu_count(), thread_name_prefix="dcpm-encode",
                                       initializer=_pin_query_threads)
    later = [_side.submit(forward, model) for model in models[1:]]
    return [forward(models[0]), *(future.result() for future in later)]
