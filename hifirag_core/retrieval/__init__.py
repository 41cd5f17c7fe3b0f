"""Scoring text against a question: MiniLM's forward pass (``minilm``), embeddings with their disk cache
(``embeddings``), and BM25, cosine, their blend and MMR over small candidate sets (``scoring``)."""
