"""Serving the pipeline over HTTP with the MMU-RAGent contract: the contract, what a client is shown, the
service's place in the warehouse, and its settings. The ASGI app that drives the Prefect tasks is
``flows/service.py``; a client for any service speaking the contract is ``hifirag_core.evaluation.remote``."""
