"""Operations an operator or the user asks for by id (ARCHITECTURE "Admin"): hard delete that
cascades through chains, graph, vectors and logs (`delete`, with the pure chain `relink` and
what a delete does to the graph in `nodes`), text edits kept as UPDATE revisions (`edit`), and
export / restore of one user (`export`).

Deletes and edits run under the user's writer lease, so they never interleave with System 1,
with consolidation's writes or with each other, and they keep supersedes chains consistent.
"""
