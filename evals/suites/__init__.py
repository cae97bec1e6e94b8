"""Evaluation suites (``python -m evals SUITE``): one module per suite, each ``async def run(cfg, report)``."""
