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


def passes_by_thread(monkeypatch, cores: int, count: int, on_cpu: bool = True) -> list[str]:
    """The thread each of two models' passes ran on, on a machine of `cores` cores."""
    monkeypatch.setattr(threads.os, "cpu_count", lambda: cores)
    both_started = threading.Barrier(2, timeout=0.5)

    def forward(model: str) -> str:
        try:
            both_started.wait()  # returns only if the other pass runs at the same time
        except threading.BrokenBarrierError:
            pass
        return f"{model}@{threading.current_thread().name}"

    return threads.each_model(forward, ["E", "E_theta"], count, on_cpu)


def test_a_query_runs_its_models_at_once_when_each_has_a_core(restore_threads, monkeypatch):
    threads.configure(query_threads=1, document_threads=2)
    frozen, adapted = passes_by_thread(monkeypatch, cores=2, count=1)
    assert frozen.startswith("E@") and adapted.startswith("E_theta@")  # in the models' order
    assert frozen.split("@")[1] != adapted.split("@")[1]


@pytest.mark.parametrize("cores, count, on_cpu", [(1, 1, True), (2, 64, True), (2, 1, False)],
                         ids=["no spare core", "a batch", "on the GPU"])
def test_otherwise_the_models_run_in_turn_on_the_callers_thread(restore_threads, monkeypatch, cores, count, on_cpu):
    threads.configure(query_threads=1, document_threads=2)
    caller = threading.current_thread().name
    assert passes_by_thread(monkeypatch, cores, count, on_cpu) == [f"E@{caller}", f"E_theta@{caller}"]
