"""The counts behind a user's IDF (dcpm.index.user_idf.Frequencies) follow this process's writes
and never keep a count that a write may have raced past."""

from __future__ import annotations

from dcpm.embedding.base import SparseVector
from dcpm.index.user_idf import Frequencies

WORD = 7


class Shard:
    """Points as {id: (user, terms)}, counted the way an index counts them."""

    def __init__(self) -> None:
        self.points: dict[str, tuple[str, list[int]]] = {"a": ("ana", [WORD, 8]), "b": ("ana", [8])}
        self.reads = 0
        self.during_read = None  # run once inside the next count, as another thread's write would

    def count(self, user_id: str) -> int:
        return sum(user == user_id for user, _ in self.points.values())

    def holding(self, user_id: str, term: int) -> int:
        self.reads += 1
        counted = sum(user == user_id and term in terms for user, terms in self.points.values())
        if self.during_read:  # the index has counted; the write lands before the count is kept
            write, self.during_read = self.during_read, None
            write()
        return counted

    def terms_of(self, ids):
        return [self.points[i] for i in ids if i in self.points]


def held(frequencies: Frequencies) -> float:
    return frequencies.weighted(SparseVector([WORD], [1.0]), "ana").values[0]


def write(shard: Shard, frequencies: Frequencies, point_id: str, terms: list[int]) -> None:
    with frequencies.writing([point_id], [("ana", terms)]):
        shard.points[point_id] = ("ana", terms)


def test_counts_follow_a_write_and_match_a_fresh_count():
    shard = Shard()
    frequencies = Frequencies(shard.count, shard.holding, shard.terms_of, refresh_seconds=None)
    held(frequencies)
    write(shard, frequencies, "c", [WORD])  # a new point holding the word
    write(shard, frequencies, "a", [8])  # a point written again without it
    with frequencies.writing(["b"], []):  # a delete
        del shard.points["b"]
    reads = shard.reads
    kept = held(frequencies)
    assert shard.reads == reads  # nothing counted again
    assert kept == held(Frequencies(shard.count, shard.holding, shard.terms_of))  # what a fresh count says


def test_a_count_read_while_a_write_runs_is_not_kept():
    shard = Shard()
    frequencies = Frequencies(shard.count, shard.holding, shard.terms_of, refresh_seconds=None)
    shard.during_read = lambda: write(shard, frequencies, "c", [WORD])
    held(frequencies)  # its count may or may not include the write: it must not be kept
    reads = shard.reads
    assert held(frequencies) == held(Frequencies(shard.count, shard.holding, shard.terms_of))
    assert shard.reads > reads


def test_a_failed_write_forgets_the_counts_it_touched():
    shard = Shard()
    frequencies = Frequencies(shard.count, shard.holding, shard.terms_of, refresh_seconds=None)
    held(frequencies)
    try:
        with frequencies.writing(["c"], [("ana", [WORD])]):
            shard.points["c"] = ("ana", [WORD])  # the write landed, then its caller failed
            raise OSError("disk full")
    except OSError:
        pass
    assert held(frequencies) == held(Frequencies(shard.count, shard.holding, shard.terms_of))
