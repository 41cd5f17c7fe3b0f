"""Thin Prefect tasks made from the stage specs (``tasks.stage_tasks``), and the run ledger on the Prefect server (``tasks.shared_limits``)."""
