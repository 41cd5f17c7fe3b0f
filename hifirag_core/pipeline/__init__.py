"""The pipeline: its stages as functions (``stages``) and as data (``specs``), the live objects they use
(``runtime``, built by ``wiring``), a run's plan and bookkeeping (``plan``, ``runs``), reuse of stored
outputs (``reuse``), what a run came to (``tally``) and the named configurations (``variants``)."""
