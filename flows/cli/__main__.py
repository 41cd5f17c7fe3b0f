"""``python -m flows.cli``: the ``hifirag`` command."""

from flows.cli import main

main()
