"""Scripts that build the evaluation sets and fit the calibrated settings (run by hand; see each docstring)."""
