#!/usr/bin/env bash
# The test command: prepare the machine (scripts/setup.sh), then run every test with the
# project's venv, Docker-marked ones included. Extra arguments go to pytest, e.g.
#   scripts/test.sh -m "not docker"      scripts/test.sh tests/test_spec_load.py -x
# Exits with pytest's exit code; "no tests collected" (pytest's 5) is reported as a failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The BuildKit-capable client installed by setup.sh (Debian's docker.io); mmaas and the
# test fixtures read it from here.
export MMAAS_DOCKER=${MMAAS_DOCKER:-/usr/bin/docker}
export MMAAS_BASE_IMAGE=${MMAAS_BASE_IMAGE:-mmaas/base:bookworm}

bash "$ROOT/scripts/setup.sh" --dev

cd "$ROOT"
extra=()
if [[ ${CI:-} == true ]]; then
  extra+=(--durations=15)
fi
status=0
"$ROOT/.venv/bin/pytest" "${extra[@]}" "$@" || status=$?
if ((status == 5)); then
  echo "test: pytest collected no tests (exit 5): check the arguments and tests/; this is a failure" >&2
fi
exit "$status"
