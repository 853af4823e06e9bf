"""Relational store: the source of truth (raw inputs, items, chains, revisions, events)."""
