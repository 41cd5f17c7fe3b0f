"""Evaluation metrics: retrieval metrics (``retrieval``) and bootstrap intervals (``bootstrap``)."""
