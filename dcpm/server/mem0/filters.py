"""Mem0's entity ids and `filters` read as dcpm's: whose memories a request is about (the owner),
which session, and which metadata conditions. Pure functions over plain data.

Owners. Every memory has one owner, dcpm's user. `user_id` is the owner when given. A request
with only an `agent_id` (Mem0's agent memories) or only an `app_id` is about a separate owner
derived from it, `agent:<agent_id>` or `app:<app_id>`, isolated from every user like another
user (the native API and the CLI reach it by that id). An `agent_id` or `app_id` given beside
the owner is a namespace: an add records it in the memories' metadata under keys of dcpm's own
(`dcpm_agent_id`, `dcpm_app_id`, which a client's metadata may not use, so a client's own
`agent_id` key stays plain metadata), and search and listing then select by it like any
metadata filter. `run_id` is dcpm's session.

Filters. Plain keys and an AND list of them; `{"metadata": {...}}` holds metadata conditions in
dcpm's metadata-filter form (dcpm.api.models.filters: a value, a list meaning one of, or `eq`,
`ne`, `in`, `nin`). OR, NOT and filters on other fields are refused rather than widened.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from dcpm.api.models import MetadataFilter, parse_metadata_filter
from dcpm.domain import USER_ID_CHARS, check_user_id
from dcpm.errors import Invalid
from dcpm.stored_values import OWN_PREFIX

WILDCARD = "*"
MAX_FILTER_DEPTH = 8
ENTITIES = ("user_id", "agent_id", "app_id", "run_id")
NAMESPACES = ("agent_id", "app_id")  # kept in the metadata when they are not the owner
RECORDED_AS = {key: OWN_PREFIX + key for key in NAMESPACES}  # the metadata key dcpm keeps each under
OWNER_PREFIXES = {"agent_id": "agent:", "app_id": "app:"}


@dataclass(frozen=True)
class Scope:
    user_id: str  # the owner: the user, or the owner id derived from an agent or an app
    run_id: str | None = None
    namespace: dict[str, str] = field(default_factory=dict)  # agent_id / app_id beside the owner
    metadata: MetadataFilter | None = None  # the caller's metadata conditions, namespaces included


def recorded(namespace: dict[str, str]) -> dict[str, str]:
    """Namespaces as an add records them in the metadata, and search and listing select them."""
    return {RECORDED_AS[key]: value for key, value in namespace.items()}


def owner_id(entity: str, value: str) -> str:
    """The owner id of an agent's or an app's own memories (a user's is the user id itself)."""
    prefix = OWNER_PREFIXES.get(entity, "")
    try:
        return check_user_id(prefix + check_user_id(value))
    except Invalid:  # an agent's or app's id holds its prefix within an owner id's length
        raise Invalid(f"{entity} must be 1-{USER_ID_CHARS - len(prefix)} characters of letters, digits and "
                      "_ . : @ -, starting with a letter or digit") from None


def entities_of_owner(owner: str) -> tuple[str, str]:
    """Which Mem0 entity an owner id stands for, and its name: ("agent_id", "bot") for agent:bot."""
    for entity, prefix in OWNER_PREFIXES.items():
        if owner.startswith(prefix):
            return entity, owner.removeprefix(prefix)
    return "user_id", owner


def scope_of(filters: dict[str, Any] | None, **top_level: str | None) -> Scope:
    """The owner, session, namespaces and metadata conditions of a request, from Mem0 `filters`
    and top-level entity ids (see the module's docstring for what each means)."""
    terms = [(key, value) for key, value in top_level.items() if value is not None]
    terms += list(_filter_terms(filters or {}))
    values: dict[str, set[str]] = {}
    metadata: list[dict[str, Any]] = []
    for key, value in terms:
        if key == "metadata":
            if not isinstance(value, dict):
                raise Invalid("the metadata filter takes an object of metadata keys")
            metadata.append(value)
            continue
        if value == WILDCARD:
            continue
        if key not in ENTITIES:
            raise Invalid(f"unsupported filter {key!r}: dcpm filters by {', '.join(ENTITIES)} and metadata")
        if not isinstance(value, str):
            raise Invalid(f"filter {key!r} must be a plain string; operators such as 'in' apply to metadata only")
        values.setdefault(key, set()).add(value)
    for key, found in values.items():
        if len(found) > 1:
            raise Invalid(f"name one {key}: dcpm keeps each owner's memories apart")
    named = {key: next(iter(found)) for key, found in values.items()}
    owner = next((key for key in ("user_id", "agent_id", "app_id") if key in named), None)
    if owner is None:
        raise Invalid("name one user_id (or an agent_id or app_id of its own), in filters or at the top level")
    namespace = {key: named[key] for key in NAMESPACES if key in named and key != owner}
    metadata.append(recorded(namespace))
    return Scope(user_id=owner_id(owner, named[owner]), run_id=named.get("run_id"), namespace=namespace,
                 metadata=_merged(metadata))


def _merged(parts: list[dict[str, Any]]) -> MetadataFilter | None:
    """Metadata conditions from several AND parts as one filter: each key's conditions as
    operators, refused when two parts give the same operator on one key."""
    merged: dict[str, dict[str, Any]] = {}
    for part in parts:
        for name, condition in part.items():
            if isinstance(condition, dict):
                operators = condition
            else:
                operators = {"in" if isinstance(condition, list) else "eq": condition}
            given = merged.setdefault(name, {})
            for operator, value in operators.items():
                if operator in given:
                    raise Invalid(f"metadata key {name!r} is filtered twice with {operator!r}; give it once")
                given[operator] = value
    return parse_metadata_filter(json.dumps(merged)) if merged else None


def query_filters(text: str | None) -> dict[str, Any] | None:
    """`filters` sent as a query parameter: MemoryClient.delete_all puts the dict there, and httpx
    writes it as Python's repr, not JSON, so both are read (as literals only, never evaluated)."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):  # TypeError: {[]: 1}
            raise Invalid("filters must be a JSON object") from None
    if not isinstance(parsed, dict):
        raise Invalid("filters must be a JSON object")
    return parsed


def _filter_terms(filters: dict[str, Any], depth: int = 0) -> Iterable[tuple[str, Any]]:
    if depth > MAX_FILTER_DEPTH:  # a hostile nesting would otherwise exhaust the stack (a 500)
        raise Invalid(f"filters nest deeper than {MAX_FILTER_DEPTH} levels")
    for key, value in filters.items():
        if key == "AND":
            if not isinstance(value, list) or not all(isinstance(part, dict) for part in value):
                raise Invalid("AND takes a list of filter objects")
            for part in value:
                yield from _filter_terms(part, depth + 1)
        elif key in ("OR", "NOT"):
            raise Invalid(f"{key} filters are not supported: give conditions that must all hold (AND)")
        else:
            yield key, value
