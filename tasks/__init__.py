"""Thin Prefect tasks, one module per stage: retries on IO, caching keyed on exactly what a stage reads."""
