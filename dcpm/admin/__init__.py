"""Operations on stored memories by id: hard delete (`delete`) and manual edits (`edit`).

Both run under the user's writer lease, so they never interleave with System 1 or with each
other, and both keep supersedes chains consistent.
"""
