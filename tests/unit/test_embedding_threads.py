"""A batch of documents runs on every configured core, a query on few, and overlapping batches
hand the query setting back only when the last one ends."""

from __future__ import annotations

import threading

import pytest
import torch

from dcpm.embedding import threads


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    threads.configure(before, before)
    torch.set_num_threads(before)


def test_a_batch_uses_the_document_threads_and_gives_the_query_threads_back(restore_threads):
    threads.configure(query_threads=1, document_threads=2)
    assert torch.get_num_threads() == 1
    with threads.for_batch(64):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 1
    with threads.for_batch(1):  # one text is encoded like a query
        assert torch.get_num_threads() == 1


def test_overlapping_batches_restore_the_query_setting_only_after_the_last(restore_threads):
    threads.configure(query_threads=1, document_threads=2)
    first_inside, second_done = threading.Event(), threading.Event()
    seen: list[int] = []

    def first_batch() -> None:
        with threads.for_batch(64):
            first_inside.set()
            second_done.wait(5)
            seen.append(torch.get_num_threads())  # the second batch ended meanwhile

    worker = threading.Thread(target=first_batch)
    worker.start()
    first_inside.wait(5)
    with threads.for_batch(64):
        pass
    second_done.set()
    worker.join(5)
    assert seen == [2] and torch.get_num_threads() == 1
