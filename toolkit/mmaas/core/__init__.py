"""The foundation every step imports (and the runtime image carries): one exception tree,
subprocesses, digests, atomic files, the manifest (the build <-> serve contract), the typed
build request (the plan <-> builder-stage contract), the one profile rule set, datatypes,
sample inputs and model directories. Imports nothing else of mmaas."""
