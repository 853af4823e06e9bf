"""When Qdrant's ACORN traversal pays: speed and recall@10 of one user's dense query on the embedded
shard, with ACORN always, only for searches narrowed beyond user and kind (the default,
dcpm.index.base.needs_acorn), and never.

What it measures
    Synthetic clustered unit vectors (384 dimensions, 200 centres, no model), so the index alone
    is timed: a target user and a second user of --size points each and 20 small users of
    --size / 20, written through the product's index (dcpm.index.open_index), one HNSW build.
    Two big users matter: ACORN engages when a filter keeps under 40% of a segment, which a
    user that is half of the shard never is and any user of a shard of many users always is.
    100 random queries per scope (the user alone; the user's facts, a kind with a payload index;
    an unindexed metadata value held by a quarter of the user's points), against the exact top 10
    computed with numpy.

Run
    . .venv/bin/activate
    python scripts/bench_acorn.py                   # 30,000 per big user: about 5 minutes
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=30_000)
    args = parser.parse_args()
    import dcpm.index.edge as edge
    from dcpm.config import Settings
    from dcpm.embedding.base import SparseVector
    from dcpm.index import IndexPoint, Scope, open_index
    from dcpm.index.base import DENSE, OPEN_END, Equals, metadata_key

    rng = np.random.default_rng(0)
    centres = rng.standard_normal((200, 384)).astype(np.float32)

    def vectors(n: int) -> np.ndarray:
        v = centres[rng.integers(0, 200, n)] + 0.6 * rng.standard_normal((n, 384)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    parent = Path(tempfile.mkdtemp(prefix="dcpm-acorn-"))
    variants = {"always": (True, lambda scope: True), "when filtered": (True, edge.needs_acorn),
                "never": (False, edge.needs_acorn)}
    index = {name: open_index(Settings(data_dir=parent / str(n), acorn=acorn), 384, True)
             for n, (name, (acorn, _)) in enumerate(variants.items())}
    target: list[tuple[str, np.ndarray, str, str]] = []
    users = [("target", args.size), ("second", args.size)] + [(f"small-{k}", args.size // 20) for k in range(20)]
    for user, count in users:
        for start in range(0, count, 1000):
            block, points = vectors(min(1000, count - start)), []
            for v in block:
                kind, topic = ("fact" if rng.random() < 0.15 else "raw"), ("pets" if rng.random() < 0.25 else "other")
                point_id = str(uuid.uuid4())
                points.append(IndexPoint(point_id, v, SparseVector([1], [1.0]), {
                    "user_id": user, "kind": kind, "session_id": "", "valid_from": 0.0, "valid_to": OPEN_END,
                    "metadata": {"topic": topic}}))
                if user == "target":
                    target.append((point_id, v, kind, topic))
            for shard in index.values():
                shard.upsert(points)
    for shard in index.values():
        shard.optimize()
    ids = [t[0] for t in target]
    matrix = np.stack([t[1] for t in target])
    kinds, topics = np.array([t[2] for t in target]), np.array([t[3] for t in target])
    queries = vectors(100)
    scopes = [("user", Scope(user_id="target"), np.ones(len(ids), bool)),
              ("user + kind fact (15%)", Scope(user_id="target", kinds=("fact",)), kinds == "fact"),
              ("user + metadata (25%)", Scope(user_id="target", filters=(Equals(metadata_key("topic"), "pets"),)),
               topics == "pets")]
    print(f"| scope | {' | '.join(variants)} |\n| --- |" + " --- |" * len(variants))
    for label, scope, mask in scopes:
        cells = []
        for name, (_, rule) in variants.items():
            edge.needs_acorn, found, spent = rule, [], []
            for v in queries:
                started = time.perf_counter()
                hits = index[name].query(DENSE, v, scope, 10)
                spent.append(time.perf_counter() - started)
                sims = matrix @ v
                sims[~mask] = -9.0
                exact = {ids[i] for i in np.argsort(-sims)[:10]}
                found.append(len(exact & {h.id for h in hits}) / 10)
            cells.append(f"{np.median(spent) * 1000:.2f} ms, recall {np.mean(found):.3f}")
        print(f"| {label} | {' | '.join(cells)} |")
    for shard in index.values():
        shard.close()


if __name__ == "__main__":
    main()
