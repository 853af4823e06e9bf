"""Gauges read from the store when Prometheus scrapes /metrics, so they hold for every process
sharing the store and need nothing kept up to date in between: raw inputs by status, `failed`
included (inputs the writer gave up on after `writer_max_attempts`; `dcpm backfill
--retry-failed` tries them again)."""

from __future__ import annotations

from typing import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector
from sqlalchemy import func, select

from dcpm.domain import RawStatus
from dcpm.store.db import Database
from dcpm.store.models import RawInput


class RawInputsByStatus(Collector):
    def __init__(self, db: Database):
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self.db.session() as session:
            counts = dict(session.execute(select(RawInput.status, func.count()).group_by(RawInput.status)).all())
        gauge = GaugeMetricFamily("dcpm_raw_inputs", "Raw inputs in the store by status (failed: given up on)",
                                  labels=["status"])
        for status in RawStatus:
            gauge.add_metric([status.value], counts.get(status.value, 0))
        yield gauge


def scrape(db: Database) -> bytes:
    """The process's metrics (dcpm.metrics) followed by the store's gauges. The store's have a
    registry of their own: several apps in one process (tests) would clash in the global one."""
    store = CollectorRegistry(auto_describe=False)
    store.register(RawInputsByStatus(db))
    return generate_latest(REGISTRY) + generate_latest(store)
