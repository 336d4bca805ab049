"""Closed-loop load against a KServe v2 server (`mmaas bench`, scripts/bench_runtime.py)."""
