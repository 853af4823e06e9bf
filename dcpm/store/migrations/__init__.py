"""Alembic environment and versions for the relational store."""
