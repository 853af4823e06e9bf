"""Per-user consent for the inferred layers (DCPM ethics statement): core schemas are off until
the user opts in; schemas and intentions can be switched off too, hiding them at once."""

from __future__ import annotations

from sqlalchemy.orm import Session

from dcpm.domain import NodeKind
from dcpm.store.models import Consent, utcnow

LAYERS = {"schemas": NodeKind.SCHEMA, "intentions": NodeKind.INTENTION, "core_schemas": NodeKind.CORE_SCHEMA}


def consent_of(session: Session, user_id: str) -> Consent:
    return session.get(Consent, user_id) or Consent(user_id=user_id, schemas=True, intentions=True,
                                                    core_schemas=False)


def set_consent(session: Session, user_id: str, **layers: bool | None) -> Consent:
    consent = session.get(Consent, user_id)
    if consent is None:
        consent = Consent(user_id=user_id, schemas=True, intentions=True, core_schemas=False)
        session.add(consent)
    for layer, value in layers.items():
        if value is not None:
            setattr(consent, layer, value)
    consent.updated_at = utcnow()
    return consent


def visible_kinds(consent: Consent) -> set[NodeKind]:
    return {kind for layer, kind in LAYERS.items() if getattr(consent, layer)}
