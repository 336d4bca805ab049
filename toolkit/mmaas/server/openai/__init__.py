"""The OpenAI-compatible front end (docs/openai.md): chat completions for every served
generation model over the one request path, on the HTTP port; independent of the KServe
front ends (an import-linter contract)."""
