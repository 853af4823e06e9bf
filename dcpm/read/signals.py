"""Read-path signals beside relevance (AssoMem 3.2.3, the LLM-free parts): temporal alignment
with the time a query names, temporal intent, and importance as personalized PageRank over a
graph of the candidates. Each returns one value in [0, 1] per candidate, so a caller can blend
`(1 - w) * relevance + w * signal` and a query the signal says nothing about keeps its order.

AssoMem embeds temporal tokens with TimeLlaMA and runs PPR over an LLM-built clue graph; here
the query's time expression becomes a span of days and the graph's edges come from what the
store already knows (same session and nearby turns, similar vectors, shared rare words).
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
from dateutil.relativedelta import relativedelta

MONTHS = {name: n for n, name in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"), 1)}
MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
YEAR = r"((?:19|20)\d\d)"
DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9, "ten": 10, "few": 3, "couple of": 2, "several": 3}
SEASONS = {"spring": (3, 5), "summer": (6, 8), "fall": (9, 11), "autumn": (9, 11), "winter": (12, 14)}
UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}

# dateparser's search_dates reads "may" and "march" in any sentence as months and is slow on the
# hot read path; the expressions people use to place a memory in time are few, so they are listed.
_DAY_MONTH_YEAR = re.compile(rf"\b{DAY}\s+(?:of\s+)?{MONTH},?\s+{YEAR}\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{MONTH}\s+{DAY},?\s*{YEAR}\b", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b{MONTH}\s+{DAY}\b(?!,?\s*\d)", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{MONTH},?\s+(?:of\s+)?{YEAR}\b", re.IGNORECASE)
_SEASON_YEAR = re.compile(rf"\b(spring|summer|fall|autumn|winter)\s+(?:of\s+)?{YEAR}\b", re.IGNORECASE)
_BARE_MONTH = re.compile(rf"\b(?:in|during|of|since|early|late|mid|mid-|end of|beginning of)\s+{MONTH}\b",
                         re.IGNORECASE)
_BARE_YEAR = re.compile(rf"\b(?:in|during|of|since|by)\s+{YEAR}\b", re.IGNORECASE)
_AGO = re.compile(r"\b(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of|several)\s+"
                  r"(day|week|month|year)s?\s+ago\b", re.IGNORECASE)
# "today", "tonight" and "this week" name the present: the current conversation, not a memory to
# look back for (a message saying "three more sign-ups this week!" is no question about this week).
_RELATIVE = re.compile(r"\b(yesterday|last night|(?:last|past)\s+(?:week(?:end)?|month|year))\b", re.IGNORECASE)
_BEFORE = re.compile(r"\b(?:before|prior to|leading up to)\s*$", re.IGNORECASE)
_AFTER = re.compile(r"\b(?:after|since|following)\s*$", re.IGNORECASE)
_INTENT = re.compile(r"^\s*(when\b|how long\b|how many (days|weeks|months|years)\b|(what|which) "
                     r"(year|month|day|week|date|time)\b)|\bwhat (year|month|date)\b", re.IGNORECASE)
_MENTION = re.compile(rf"\b(yesterday|today|tonight|tomorrow|ago|last (night|week(end)?|month|year|summer|"
                      rf"winter|spring|fall|friday|saturday|sunday|monday|tuesday|wednesday|thursday)|"
                      rf"next (week(end)?|month|year)|this (week(end)?|month|year)|recently|{MONTH}|{YEAR}|"
                      rf"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Span:
    """The days a query points at, [start, end), naive UTC."""

    start: datetime
    end: datetime


def naive_utc(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc).replace(tzinfo=None) if moment.tzinfo else moment


def _day(year: int, month: int, day: int) -> Span:
    start = datetime(year, month, min(max(day, 1), calendar.monthrange(year, month)[1]))
    return Span(start, start + timedelta(days=1))


def _month_span(year: int, month: int) -> Span:
    start = datetime(year, month, 1)
    return Span(start, start + relativedelta(months=1))


def _past_year(month: int, now: datetime) -> int:
    """The year of the most recent `month` not after now (a bare 'in May' asked in June 2023)."""
    return now.year if month <= now.month else now.year - 1


def _nudge(span: Span, query: str, at: int) -> Span:
    """'the week before August 3' points at the days leading up to the date; 'after' at those following."""
    if _BEFORE.search(query[:at]):
        return Span(span.start - timedelta(days=7), span.end)
    if _AFTER.search(query[:at]):
        return Span(span.start, span.end + timedelta(days=7))
    return span


def _absolute(query: str, now: datetime) -> list[Span]:
    spans: list[Span] = []
    taken: list[tuple[int, int]] = []

    def free(match: re.Match) -> bool:
        return all(match.end() <= a or match.start() >= b for a, b in taken)

    def add(match: re.Match, span: Callable[[], Span]) -> None:
        made = _on_the_calendar(lambda: _nudge(span(), query, match.start()))
        if made is not None:
            taken.append(match.span())
            spans.append(made)

    for m in _DAY_MONTH_YEAR.finditer(query):
        add(m, lambda: _day(int(m.group(3)), MONTHS[m.group(2).lower()], int(m.group(1))))
    for m in filter(free, _MONTH_DAY_YEAR.finditer(query)):
        add(m, lambda: _day(int(m.group(3)), MONTHS[m.group(1).lower()], int(m.group(2))))
    for m in filter(free, _MONTH_YEAR.finditer(query)):
        add(m, lambda: _month_span(int(m.group(2)), MONTHS[m.group(1).lower()]))
    for m in filter(free, _SEASON_YEAR.finditer(query)):
        first, last = SEASONS[m.group(1).lower()]
        add(m, lambda: _months(datetime(int(m.group(2)), first, 1), last - first + 1))
    for m in filter(free, _MONTH_DAY.finditer(query)):
        month = MONTHS[m.group(1).lower()]
        add(m, lambda: _day(_past_year(month, now), month, int(m.group(2))))
    for m in filter(free, _BARE_MONTH.finditer(query)):
        month = MONTHS[m.group(1).lower()]
        if month != now.month:  # "in june" said in June is the present, not a month to look back to
            add(m, lambda: _month_span(_past_year(month, now), month))
    for m in filter(free, _BARE_YEAR.finditer(query)):
        add(m, lambda: Span(datetime(int(m.group(1)), 1, 1), datetime(int(m.group(1)) + 1, 1, 1)))
    return spans


def _months(start: datetime, months: int) -> Span:
    return Span(start, start + relativedelta(months=months))


def _on_the_calendar(make: Callable[[], Span]) -> Span | None:
    """The span `make` builds; None when it would reach past year 1 or 9999 ("December 31" asked
    as of 9999-12-31, "yesterday" as of 0001-01-01, "3000 years ago"): nothing to align to."""
    try:
        return make()
    except (OverflowError, ValueError):
        return None


def _relative(query: str, now: datetime) -> list[Span]:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    spans = []
    for m in _AGO.finditer(query):
        count = int(m.group(1)) if m.group(1).isdigit() else NUMBER_WORDS[m.group(1).lower()]
        days = UNIT_DAYS[m.group(2).lower()]
        spans.append(_on_the_calendar(lambda: _around(today - timedelta(days=count * days), max(days // 2, 1))))
    for m in _RELATIVE.finditer(query):
        spans.append(_on_the_calendar(lambda: _relative_span(" ".join(m.group(1).lower().split()), today)))
    return [span for span in spans if span is not None]


def _around(centre: datetime, half_days: int) -> Span:
    return Span(centre - timedelta(days=half_days), centre + timedelta(days=half_days))


def _relative_span(phrase: str, today: datetime) -> Span:
    if phrase in ("yesterday", "last night"):
        return Span(today - timedelta(days=1), today)
    if phrase.endswith(("weekend", "week")):
        return Span(today - timedelta(days=14), today)
    if phrase.endswith("month"):
        return Span(today.replace(day=1) - relativedelta(months=1), today)
    if phrase == "last year":
        return Span(datetime(today.year - 1, 1, 1), datetime(today.year, 1, 1))
    return Span(today - timedelta(days=365), today)


def referred_span(query: str, now: datetime) -> Span | None:
    """The past span of days the query names; None when it names none, or only the present
    ('today', 'this week') or the future.
    An absolute date wins over a relative phrase ('last weekend before April 10, 2023'); several
    absolute ones ('between August 11 and August 15 2023') are covered by one span."""
    now = naive_utc(now)
    spans = _absolute(query, now) or _relative(query, now)
    spans = [s for s in spans if s.start <= now]
    if not spans:
        return None
    return Span(min(s.start for s in spans), max(s.end for s in spans))


def temporal_alignment(query: str, now: datetime, times: Sequence[datetime | None],
                       tolerance_days: float = 14.0) -> np.ndarray:
    """1 for a candidate stamped inside the span the query names, decaying as exp(-days outside /
    tolerance); all zeros when the query names no time (or a candidate has no timestamp)."""
    span = referred_span(query, now)
    out = np.zeros(len(times))
    if span is None:
        return out
    for n, moment in enumerate(times):
        if moment is None:
            continue
        moment = naive_utc(moment)
        outside = max((span.start - moment).total_seconds(), (moment - span.end).total_seconds(), 0.0)
        out[n] = math.exp(-outside / 86400.0 / tolerance_days)
    return out


def asks_when(query: str) -> bool:
    """A question whose answer is a time ('When did...', 'How long...', 'Which month...')."""
    return bool(_INTENT.search(query))


def temporal_mentions(query: str, texts: Sequence[str]) -> np.ndarray:
    """For a 'when' question, 1 for a candidate that places something in time ('last week', 'in
    May', 'two years ago'), the turn the answer is read from; zeros for any other question."""
    if not asks_when(query):
        return np.zeros(len(texts))
    return np.array([1.0 if _MENTION.search(text) else 0.0 for text in texts])


# --- importance -------------------------------------------------------------------------------
def nearby_turn_edges(positions: Sequence[tuple[str | None, int]], window: int = 2) -> list[tuple[int, int]]:
    """Candidates said in the same session at most `window` turns apart (co-occurrence)."""
    edges = []
    for i, (session_i, at_i) in enumerate(positions):
        for j in range(i + 1, len(positions)):
            session_j, at_j = positions[j]
            if session_i is not None and session_i == session_j and abs(at_i - at_j) <= window:
                edges.append((i, j))
    return edges


def similarity_edges(vectors: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """AssoMem's similarity edges (eq. 1): unit-norm candidate vectors with cosine above `threshold`."""
    return edges_above(vectors @ vectors.T, threshold)


def edges_above(cosine: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """The pairs of a candidates' cosine matrix above `threshold`."""
    rows, cols = np.nonzero(np.triu(cosine > threshold, k=1))
    return list(zip(rows.tolist(), cols.tolist(), strict=True))


def personalized_pagerank(seeds: np.ndarray, edges: Iterable[tuple[int, int]], damping: float = 0.85,
                          iterations: int = 50, tolerance: float = 1e-9) -> np.ndarray:
    """AssoMem eq. 2, r <- d M r + (1 - d) t, with t the seeds normalized to sum 1 and M the
    column-normalized undirected adjacency; a node without edges gives its mass back to t.
    Power iteration by hand: the graph is the k candidates of one query, a dense k x k matrix,
    where networkx's general graph costs more than the walk."""
    n = len(seeds)
    teleport = np.clip(np.asarray(seeds, dtype=float), 0.0, None)
    if n == 0 or teleport.sum() <= 0:
        return np.zeros(n)
    teleport /= teleport.sum()
    adjacency = np.zeros((n, n))
    for i, j in edges:
        if i != j:
            adjacency[i, j] = adjacency[j, i] = 1.0
    degree = adjacency.sum(axis=0)
    walk = np.divide(adjacency, degree, out=np.zeros_like(adjacency), where=degree > 0)
    dangling = degree == 0
    rank = teleport.copy()
    for _ in range(iterations):
        following = damping * (walk @ rank + rank[dangling].sum() * teleport) + (1 - damping) * teleport
        if np.abs(following - rank).sum() < tolerance:
            return following
        rank = following
    return rank


def cooccurrence_importance(seed_scores: np.ndarray, edges: Iterable[tuple[int, int]],
                            damping: float = 0.85) -> np.ndarray:
    """PPR seeded by the relevance scores, scaled so the most important candidate is 1."""
    rank = personalized_pagerank(seed_scores, edges, damping)
    top = rank.max() if len(rank) else 0.0
    return rank / top if top > 0 else rank


def names_time(query: str, now: datetime) -> bool:
    """Whether `time_signal` can say anything about this query (a cheap test before any look-up)."""
    return asks_when(query) or referred_span(query, now) is not None


def time_signal(query: str, now: datetime, times: Sequence[datetime | None], texts: Sequence[str],
                tolerance_days: float = 7.0) -> np.ndarray:
    """The temporal signal measured to help (scripts/eval_signals.py, "time"): alignment with the
    time the query names, or, for a "when" question, whether the candidate places something in time."""
    return np.maximum(temporal_alignment(query, now, times, tolerance_days), temporal_mentions(query, texts))


def reranked(relevance: Sequence[float], signal: np.ndarray, weight: float) -> list[int]:
    """Candidate indices by (1 - weight) * relevance + weight * signal, best first; ties keep their order."""
    final = (1 - weight) * np.asarray(relevance, dtype=float) + weight * signal
    return np.argsort(-final, kind="stable").tolist()
