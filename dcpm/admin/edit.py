"""Manual edits of an item's text (Mem0's `update`): an UPDATE revision, never an overwrite.

The previous text stays in the item's revision history (DCPM 2.2 iv, as System 1's UPDATE does),
and the vector is re-embedded from the new text.
"""

from __future__ import annotations

import uuid

from dcpm.admin.delete import fenced, writer_lease
from dcpm.config import Settings
from dcpm.embedding import Embedder
from dcpm.errors import Conflict, Invalid, NotFound
from dcpm.index import VectorIndex, projection
from dcpm.inspection import find_memory, owner_of
from dcpm.store.db import Database
from dcpm.store.items import update_text
from dcpm.store.models import RawInput
from dcpm.write.raw import check_stored_text


def revise_text(db: Database, index: VectorIndex, embedder: Embedder, settings: Settings, item_id: str,
                text: str) -> None:
    """Give a current item new text. A superseded revision is history and is not edited (Conflict);
    raw turns are immutable ground truth (Invalid)."""
    check_stored_text(text, settings, "the new text")
    user_id = owner_of(db, item_id)
    with writer_lease(db, settings, user_id) as holder:
        with fenced(db, settings, user_id, holder) as session:
            item = find_memory(session, item_id)
            if isinstance(item, RawInput):
                raise Invalid(f"{item_id} is a raw turn; raw turns are kept verbatim and cannot be edited")
            if item is None:  # deleted while we waited for the lease
                raise NotFound(f"no memory with id {item_id}")
            if item.superseded_by_id is not None:
                raise Conflict(f"item {item_id} is superseded by {item.superseded_by_id}; edit the current revision")
            if item.text == text:
                return
            # anticipations were written for the text the LLM read; they may not fit the new one
            update_text(session, item, text, request_id=str(uuid.uuid4()), anticipations=())
            item.indexed_at = None  # a crash before re-embedding leaves it for start-up repair
        projection.index_rows(db, index, embedder, items=[item])
