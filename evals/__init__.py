"""Benchmarks and probes (``python -m evals.<name>``); figures in evals/README.md."""
