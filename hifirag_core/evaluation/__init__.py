"""Evaluation: score answer runs, compare them with paired intervals, gate regressions, report."""
