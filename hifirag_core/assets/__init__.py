"""Files the package ships, read through ``hifirag_core.resources``: ``prompts`` and ``views`` link to the
repository's ``prompts/`` and ``warehouse/views/``, ``examples.sql`` to ``warehouse/examples.sql`` (a wheel
holds copies)."""
