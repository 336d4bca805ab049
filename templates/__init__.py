"""The Dockerfile templates and the image pins, shipped in the mmaas wheel as the package
data of ``mmaas.templates`` (read with ``importlib.resources``; see setup.py)."""
