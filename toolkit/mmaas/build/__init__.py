"""ModelSpec -> image: the spec checks every verb injects (spec_checks.py: the back ends'
host parts and the pipeline kinds), typed requests, the pure build plan, rendering, the
image wheels, the only Docker caller, the compile build of one engine (compile.py), the
pipeline (compile, then package), label checks, the local compile of `mmaas serve`,
registry pushes, host diagnostics and the engine cache (cache/)."""
