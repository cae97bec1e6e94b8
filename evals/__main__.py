"""``python -m evals SUITE``: see :mod:`evals.cli`."""

from evals.cli import main

main()
