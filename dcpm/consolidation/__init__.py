"""System 2, the nighttime consolidation (DCPM 2.3): triage and clustering (phase 1), the
induction agent (phase 2) and the cross-domain sweep (phase 3)."""
