"""Test and demo scaffolding: tiny random-weight models and a synthetic clip (not for production)."""
