import numpy as np

from dcpm.consolidation.clustering import two_stage_dbscan
from dcpm.consolidation.sweep import collisions


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def blob(center, count, spread, seed):
    rng = np.random.default_rng(seed)
    return unit(np.asarray(center) + rng.normal(0, spread, size=(count, len(center))))


def test_two_separate_groups_and_a_stray_point():
    vectors = np.vstack([blob([1, 0, 0, 0], 5, 0.05, 1), blob([0, 1, 0, 0], 4, 0.05, 2), unit([[0, 0, 1, 0]])])
    clusters = two_stage_dbscan(vectors, 0.35, 0.25, 3, 40)
    assert sorted(map(sorted, clusters)) == [[0, 1, 2, 3, 4], [5, 6, 7, 8]]


def test_oversized_cluster_is_split_by_the_tighter_pass():
    # Two tight sub-groups close enough to merge at eps 0.35 but not at 0.25.
    a = blob([1.0, 0.0, 0, 0], 6, 0.01, 3)
    b = blob([1.0, 1.1, 0, 0], 6, 0.01, 4)
    vectors = np.vstack([a, b])
    assert len(two_stage_dbscan(vectors, 0.35, 0.25, 3, max_cluster_size=100)) == 1
    split = two_stage_dbscan(vectors, 0.35, 0.25, 3, max_cluster_size=8)
    assert sorted(map(sorted, split)) == [list(range(6)), list(range(6, 12))]


def test_too_few_points_give_no_cluster():
    assert two_stage_dbscan(unit([[1, 0], [1, 0.01]]), 0.35, 0.25, 3, 40) == []


def test_collisions_need_other_domain_close_behaviour_and_distant_meaning():
    behaviour = unit([[1, 0], [1, 0.05], [1, 0.02], [0, 1]])
    text = unit([[1, 0, 0], [0, 1, 0], [0.1, 1, 0], [0, 0, 1]])
    domains = ["fitness", "money", "fitness", "food"]
    # 0-1 collide; 0-2 share a domain; 1-2 mean the same thing; 3 behaves differently
    assert collisions(domains, behaviour, text, 0.72, 0.40) == [[0, 1]]


def test_collision_groups_are_connected_components():
    behaviour = unit([[1, 0], [1, 0.01], [1, 0.02]])
    text = unit([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    assert collisions(["a", "b", "c"], behaviour, text, 0.72, 0.40) == [[0, 1, 2]]
