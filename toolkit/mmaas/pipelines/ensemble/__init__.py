"""The ``ensemble`` pipeline kind: engines run as steps in order, wired by tensor names
(Triton's ensemble scheduling). ``spec`` holds the settings, the wiring rules and the
served signature (host side); ``runtime`` the executor (in the image)."""
