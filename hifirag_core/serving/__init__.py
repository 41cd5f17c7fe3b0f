"""Serving the pipeline over HTTP with the MMU-RAGent contract: the contract, the service and its HTTP app,
what a client is shown, the service's place in the warehouse, and its settings. What runs a question
is injected (``service.QuestionAnswerer``): ``flows/service.py`` gives the Prefect one. A client for any
service speaking the contract is ``hifirag_core.evaluation.remote``."""
