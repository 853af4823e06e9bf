"""Metadata filters: conditions on the metadata a memory was stored with, in Mem0's operator
names, shared by search and listing. Search hands them to the vector index as payload filters,
listing to the store as JSON conditions, so both select the same memories."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from dcpm.domain import INT64_RANGE
from dcpm.errors import invalid_from
from dcpm.index.base import Condition, Equals, NotEquals, OneOf, metadata_key

# Exact values only: a keyword, an integer (of 64 bits, as stored) or a boolean, compared type
# included ("3" is not 3).
Int64 = Annotated[StrictInt, Field(ge=INT64_RANGE[0], le=INT64_RANGE[1])]
MetadataValue = StrictStr | StrictBool | Int64
# A metadata key as a payload path segment: no dots or brackets, which the index reads as nesting.
MetadataName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_\-]{1,64}$")]
ValueList = Annotated[list[StrictStr], Field(min_length=1)] | Annotated[list[Int64], Field(min_length=1)]


class MetadataOperators(BaseModel):
    """Operators on one metadata key, all of which must hold. `ne` and `nin` also match memories
    without the key (they hold no such value)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    eq: MetadataValue | None = None
    ne: MetadataValue | None = None
    in_: ValueList | None = Field(None, alias="in", description="One of these (all strings or all integers).")
    nin: ValueList | None = Field(None, description="None of these.")

    @model_validator(mode="after")
    def _some_operator(self) -> MetadataOperators:
        """No operator with a value ({} or {"eq": null}) would be no condition on the key, so every
        memory would match: refused rather than widened."""
        if self.eq is None and self.ne is None and self.in_ is None and self.nin is None:
            raise ValueError("give the key one of eq, ne, in or nin with a value (null is none); "
                             "an empty condition would match every memory")
        return self


def _shape(condition: object) -> str:
    """Which form a key's condition takes, so a mistake is reported against that form only."""
    if isinstance(condition, (dict, MetadataOperators)):
        return "operators"
    return "one of" if isinstance(condition, list) else "value"


MetadataCondition = Annotated[Annotated[MetadataValue, Tag("value")] | Annotated[ValueList, Tag("one of")]
                              | Annotated[MetadataOperators, Tag("operators")], Discriminator(_shape)]
# Values of one filter, every key and list together: each is a term of the listing's SQL (SQLite
# refuses expressions past 1,000 deep) and each `nin` value a condition of its own in search.
MAX_FILTER_VALUES = 256


def _values_of(condition: object) -> int:
    if isinstance(condition, MetadataOperators):
        return (condition.eq is not None) + (condition.ne is not None) + len(condition.in_ or ()) + len(
            condition.nin or ())
    return len(condition) if isinstance(condition, list) else 1


def _bounded(filters: dict[str, object]) -> dict[str, object]:
    held = sum(_values_of(condition) for condition in filters.values())
    if held > MAX_FILTER_VALUES:
        raise ValueError(f"a metadata filter holds at most {MAX_FILTER_VALUES} values, every key and list "
                         f"together; this one holds {held}")
    return filters


MetadataFilter = Annotated[dict[MetadataName, MetadataCondition], AfterValidator(_bounded)]
METADATA_FILTER_HELP = ('Metadata conditions, all of which must hold: {"food": "pizza"}, {"food": ["a", "b"]} '
                        '(one of), or operators {"food": {"eq"|"ne": value, "in"|"nin": [values]}}.')


def metadata_conditions(filters: MetadataFilter | None) -> tuple[Condition, ...]:
    """What a metadata filter means as index conditions on `metadata.<key>` payload fields; a
    filter given as plain data (an in-process caller's) is validated first."""
    conditions: list[Condition] = []
    for name, wanted in _checked(filters).items():
        key = metadata_key(name)
        if isinstance(wanted, MetadataOperators):
            if wanted.eq is not None:
                conditions.append(Equals(key, wanted.eq))
            if wanted.ne is not None:
                conditions.append(NotEquals(key, wanted.ne))
            if wanted.in_ is not None:
                conditions.append(OneOf(key, tuple(wanted.in_)))
            conditions += [NotEquals(key, value) for value in wanted.nin or ()]
        elif isinstance(wanted, list):
            conditions.append(OneOf(key, tuple(wanted)))
        else:
            conditions.append(Equals(key, wanted))
    return tuple(conditions)


_FILTER = TypeAdapter(MetadataFilter)


def metadata_filter_json(filters: MetadataFilter) -> str:
    """A metadata filter as the JSON text a query parameter carries (operators by Mem0's names)."""
    return _FILTER.dump_json(_checked(filters), exclude_none=True).decode()


def parse_metadata_filter(text: str | None) -> MetadataFilter | None:
    """A metadata filter from a query parameter's JSON text; Invalid (a 422) saying what is wrong."""
    if not text:
        return None
    try:
        return _FILTER.validate_json(text)
    except ValidationError as exc:
        raise _invalid(exc) from None


def _checked(filters: MetadataFilter | None) -> MetadataFilter:
    try:
        return _FILTER.validate_python(filters or {})
    except ValidationError as exc:
        raise _invalid(exc) from None


def _invalid(exc: ValidationError) -> Exception:
    return invalid_from([{**error, "loc": ("metadata", *error["loc"])} for error in exc.errors()])
