"""HiFi-RAG's domain: stage records, configuration, backends and algorithms. Never imports Prefect."""
