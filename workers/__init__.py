"""Process entry points for background work (consolidation, adapter training)."""
