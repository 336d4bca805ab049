"""Continuous integration: which models a push changed, GitHub event payloads, git queries,
runner labels per back end, job summaries and local runs under act."""
