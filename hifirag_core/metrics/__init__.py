"""Evaluation metrics: pure functions over answers, references and rankings."""
