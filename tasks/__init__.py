"""Thin Prefect tasks made from the stage specs (``tasks.stages``), and the run ledger on the Prefect server (``tasks.limits``)."""
