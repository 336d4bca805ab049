#!/usr/bin/env bash
# Print the recipe digest of mmaas's CPU base image: the sha256 of the script that makes
# it and of its Dockerfile. make_base_image.sh labels the image with it
# (mmaas.base.recipe); setup.sh remakes the image when the label differs.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cat "$ROOT/scripts/make_base_image.sh" "$ROOT/dockerfiles/base-cpu.Dockerfile" | sha256sum | cut -d' ' -f1
