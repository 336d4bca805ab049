#!/usr/bin/env bash
# Prepare this machine for mmaas; safe to run again (fast when done).
#
#   setup.sh          what `mmaas build` and the main job (scripts/demo.sh) need, nothing more
#   setup.sh --dev    that, plus what the tests need (scripts/test.sh runs this)
#
#   1. apt packages: docker.io (engine + BuildKit-capable client /usr/bin/docker),
#      debootstrap (base image); --dev: docker-registry (push/pull tests), libb64-0d
#      (perf_analyzer)  -- only what is missing
#   2. the Docker engine: started in the background when `docker info` fails
#   3. the Python venv .venv with `pip install -e '.[demo]'` (--dev: '.[dev]': torch,
#      transformers, linters, act...); again when pyproject.toml changes
#   4. --dev: the real clients the tests drive (scripts/install_clients.sh): perf_analyzer,
#      promtool, the KServe SDK in .venv-kserve and the OpenAI clients (openai,
#      langchain-openai, litellm) in .venv-openai (tritonclient and grpcurl come with the
#      dev extra)
#   5. the example ONNX models (scripts/fetch_models.py, sha256-checked); --dev: also the
#      test models and qwen-vl's test pictures, and the small Qwen2-VL checkpoint with its
#      engines' ONNX sources and assets (`mmaas convert qwen2-vl models/qwen-vl --if-stale`:
#      again only when the converter's code changed)
#   6. the local base image (scripts/make_base_image.sh) when missing or made by an older recipe
# Environment: MMAAS_DOCKER (client, default /usr/bin/docker), MMAAS_BASE_IMAGE (default
# mmaas/base:bookworm), MMAAS_PYTHON (interpreter for the venv, default python3),
# MMAAS_DOCKERD_LOG (default /var/log/mmaas-dockerd.log), MMAAS_DOCKERD_TIMEOUT (s, default 60).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DOCKER=${MMAAS_DOCKER:-/usr/bin/docker}
BASE_IMAGE=${MMAAS_BASE_IMAGE:-mmaas/base:bookworm}
PYTHON=${MMAAS_PYTHON:-python3}
DOCKERD_LOG=${MMAAS_DOCKERD_LOG:-/var/log/mmaas-dockerd.log}
DOCKERD_TIMEOUT=${MMAAS_DOCKERD_TIMEOUT:-60}
APT_PACKAGES=(docker.io debootstrap)
DEV_APT_PACKAGES=(docker-registry libb64-0d)
VENV=$ROOT/.venv
DEV=0

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

is_installed() {
  [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

ensure_apt_packages() {
  local missing=() package
  for package in "${APT_PACKAGES[@]}"; do
    is_installed "$package" || missing+=("$package")
  done
  if ((${#missing[@]} == 0)); then
    say "apt packages present (${APT_PACKAGES[*]})"
    return
  fi
  [[ $(id -u) == 0 ]] || die "missing ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}"
  say "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
}

# A dockerd that was killed leaves its pid file; dockerd refuses to start while the PID in
# it belongs to any live process, so drop the file when that process is not a dockerd.
remove_stale_pidfile() {
  local pidfile=$1 pid
  [[ -f $pidfile ]] || return 0
  pid=$(<"$pidfile")
  if [[ $(cat "/proc/$pid/comm" 2>/dev/null) != dockerd ]]; then
    rm -f "$pidfile"
  fi
}

ensure_dockerd() {
  if "$DOCKER" info >/dev/null 2>&1; then
    say "docker engine running ($("$DOCKER" version --format '{{.Server.Version}}'))"
    return
  fi
  [[ -z ${DOCKER_HOST:-} ]] || die "DOCKER_HOST=$DOCKER_HOST does not answer; start that engine or unset DOCKER_HOST"
  [[ $(id -u) == 0 ]] || die "the Docker engine is not running; start it as root (dockerd) or run this script as root"
  remove_stale_pidfile /var/run/docker.pid
  say "starting dockerd (log: $DOCKERD_LOG)"
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  local dockerd
  dockerd=$(command -v dockerd || echo /usr/sbin/dockerd)
  setsid "$dockerd" >>"$DOCKERD_LOG" 2>&1 </dev/null 9>&- &
  local pid=$! deadline=$((SECONDS + DOCKERD_TIMEOUT))
  until "$DOCKER" info >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$DOCKERD_LOG" >&2
      die "dockerd exited during start-up; see $DOCKERD_LOG"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 20 "$DOCKERD_LOG" >&2
      die "dockerd (pid $pid) not ready after ${DOCKERD_TIMEOUT} s; see $DOCKERD_LOG"
    fi
    sleep 0.5
  done
  say "docker engine ready (pid $pid)"
}

# The venv holds the extra `demo` (the main job's) or `dev` (the tests', a superset); a
# stamp per extra records what pyproject.toml and setup.py it was installed from.
ensure_venv() {
  local extra=$1 want
  if [[ ! -x $VENV/bin/python ]]; then
    say "creating $VENV with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
  fi
  want=$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" <("$VENV/bin/python" --version) | sha256sum | cut -d' ' -f1)
  if [[ $(cat "$VENV/.mmaas-installed-$extra" 2>/dev/null) == "$want" ||
        ($extra == demo && $(cat "$VENV/.mmaas-installed-dev" 2>/dev/null) == "$want") ]]; then
    say "venv up to date ($VENV)"
    return
  fi
  say "pip install -e '.[$extra]' into $VENV (log: $VENV/pip-install.log)"
  if ! "$VENV/bin/python" -m pip install --disable-pip-version-check -e "${ROOT}[$extra]" \
      >"$VENV/pip-install.log" 2>&1; then
    grep -v "^WARNING: Location 'file:" "$VENV/pip-install.log" | tail -n 30 >&2
    die "pip install -e '.[$extra]' failed; full log: $VENV/pip-install.log"
  fi
  echo "$want" >"$VENV/.mmaas-installed-$extra"
}

ensure_models() {
  say "example models:"
  "$VENV/bin/python" "$ROOT/scripts/fetch_models.py" "$@" | sed 's/^/  /'
}

ensure_qwen_vl() {
  say "qwen-vl: small Qwen2-VL checkpoint + engines' ONNX + assets (mmaas convert qwen2-vl)"
  if ! "$VENV/bin/mmaas" convert qwen2-vl "$ROOT/models/qwen-vl" --if-stale \
      >"$VENV/export-qwen-vl.log" 2>&1; then
    tail -n 20 "$VENV/export-qwen-vl.log" >&2
    die "mmaas convert qwen2-vl failed; full log: $VENV/export-qwen-vl.log"
  fi
  say "  $(grep -E '^qwen-vl export' "$VENV/export-qwen-vl.log" | tail -n 1)"
}

ensure_base_image() {
  local recipe label
  recipe=$(bash "$ROOT/scripts/base_recipe.sh")
  if label=$("$DOCKER" image inspect -f '{{index .Config.Labels "mmaas.base.recipe"}}' \
      "$BASE_IMAGE" 2>/dev/null); then
    if [[ $label == "$recipe" || $label == "<no value>" || -z $label ]]; then
      say "base image $BASE_IMAGE present"
      return
    fi
    say "base image $BASE_IMAGE was made by an older scripts/make_base_image.sh; remaking"
  else
    say "making base image $BASE_IMAGE (debootstrap, about a minute)"
  fi
  MMAAS_DOCKER=$DOCKER bash "$ROOT/scripts/make_base_image.sh" "$BASE_IMAGE"
}

# One set-up at a time per machine: the engine, the base image and .venv are shared.
take_lock() {
  exec 9>"${TMPDIR:-/tmp}/mmaas-setup.lock"
  flock -n 9 && return
  say "waiting for another scripts/setup.sh to finish"
  flock 9
}

main() {
  local started=$SECONDS
  case ${1:-} in
    --dev) DEV=1 ;;
    "") ;;
    *) die "usage: setup.sh [--dev]  (--dev: also what the tests need)" ;;
  esac
  take_lock
  if ((DEV)); then
    APT_PACKAGES+=("${DEV_APT_PACKAGES[@]}")
  fi
  ensure_apt_packages
  ensure_dockerd
  if ((DEV)); then
    ensure_venv dev
    bash "$ROOT/scripts/install_clients.sh" "$VENV" "$ROOT/.venv-kserve" "$ROOT/.venv-openai"
    ensure_models --all
    ensure_qwen_vl
  else
    ensure_venv demo
    ensure_models
  fi
  ensure_base_image
  say "done in $((SECONDS - started)) s"
}

main "$@"
