#!/usr/bin/env bash
# The real clients mmaas's tests drive (nobody here wrote them); safe to run again (fast
# when done). scripts/setup.sh runs it after `pip install -e '.[dev]'`, which brings the
# Python ones (tritonclient[grpc,http], grpcurl, libcudart for perf_analyzer).
#
#   install_clients.sh VENV [KSERVE_VENV [OPENAI_VENV]]
#
#   - perf_analyzer 2.51.0, Triton's load tool: the binary of the tritonclient==2.51.0 wheel
#     (2.52-2.60 need a newer glibc than Debian 12's 2.36, later wheels have none), unpacked
#     to VENV/libexec/perf_analyzer-2.51.0; VENV/bin/perf_analyzer is a wrapper that puts
#     libcudart.so.12 (PyPI nvidia-cuda-runtime-cu12, in the dev extra) on LD_LIBRARY_PATH.
#     It needs Debian's libb64-0d (setup.sh installs it). The wheel is never installed: it
#     pins numpy<2 and protobuf<5.
#   - promtool (`promtool check metrics`): only /usr/bin/promtool of Debian's `prometheus`
#     package, unpacked with `apt-get download` + `dpkg-deb` into VENV/bin (installing the
#     package would add a daemon, a system user and ~100 MB of web assets).
#   - the KServe SDK in KSERVE_VENV (default: VENV-kserve), a venv of its own: kserve 0.21
#     pins protobuf<7, the project's grpcio-health-checking/-reflection need protobuf>=7.
#     Pinned by scripts/kserve-requirements.txt.
#   - the OpenAI clients (the openai SDK, langchain-openai, litellm) in OPENAI_VENV
#     (VENV-openai), a venv of their own, pinned by scripts/openai-requirements.txt.
# Environment: MMAAS_PYTHON (interpreter for KSERVE_VENV, default python3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PA_VERSION=2.51.0
PYTHON=${MMAAS_PYTHON:-python3}

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

(($# >= 1 && $# <= 3)) || die "usage: install_clients.sh VENV [KSERVE_VENV [OPENAI_VENV]]"
VENV=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such venv (create it first)"
KSERVE_VENV=${2:-$VENV-kserve}
OPENAI_VENV=${3:-$VENV-openai}
[[ -x $VENV/bin/python ]] || die "$VENV/bin/python missing: not a venv"

perf_analyzer_works() {
  # --version prints "Perf Analyzer Version 2.51.0 (commit unknown)" and exits 1
  [[ -x $VENV/bin/perf_analyzer ]] &&
    [[ $("$VENV/bin/perf_analyzer" --version 2>&1 || true) == *"Version $PA_VERSION"* ]]
}

unpack_perf_analyzer() {  # unpack_perf_analyzer DIR: the binary of the pinned wheel into DIR
  local libexec=$1 tmp
  tmp=$(mktemp -d)
  "$VENV/bin/python" -m pip download --disable-pip-version-check -q --no-deps \
    --only-binary=:all: -d "$tmp" "tritonclient==$PA_VERSION" >/dev/null 2>&1 ||
    { rm -rf "$tmp"; die "pip download tritonclient==$PA_VERSION failed"; }
  mkdir -p "$libexec"
  "$VENV/bin/python" - "$tmp"/tritonclient-*.whl "$libexec/perf_analyzer.tmp" "$PA_VERSION" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    data = wheel.read(f"tritonclient-{sys.argv[3]}.data/data/bin/perf_analyzer")
with open(sys.argv[2], "wb") as out:
    out.write(data)
PY
  chmod 755 "$libexec/perf_analyzer.tmp"
  mv "$libexec/perf_analyzer.tmp" "$libexec/perf_analyzer"
  rm -rf "$tmp"
}

ensure_perf_analyzer() {
  if perf_analyzer_works; then
    say "perf_analyzer $PA_VERSION present"
    return
  fi
  local libexec=$VENV/libexec/perf_analyzer-$PA_VERSION cudart
  if [[ ! -x $libexec/perf_analyzer ]]; then
    say "unpacking perf_analyzer from the tritonclient==$PA_VERSION wheel"
    unpack_perf_analyzer "$libexec"
  fi
  cudart=$("$VENV/bin/python" -c \
    'import nvidia.cuda_runtime as c, os; print(os.path.join(list(c.__path__)[0], "lib"))') ||
    die "nvidia-cuda-runtime-cu12 is missing from $VENV (the dev extra installs it)"
  [[ -f $cudart/libcudart.so.12 ]] || die "libcudart.so.12 not in $cudart"
  cat >"$VENV/bin/perf_analyzer.tmp" <<WRAPPER
#!/bin/sh
# perf_analyzer $PA_VERSION (from the tritonclient==$PA_VERSION wheel), made by scripts/install_clients.sh
LD_LIBRARY_PATH="$cudart\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$libexec/perf_analyzer" "\$@"
WRAPPER
  chmod 755 "$VENV/bin/perf_analyzer.tmp"
  mv "$VENV/bin/perf_analyzer.tmp" "$VENV/bin/perf_analyzer"
  perf_analyzer_works ||
    die "$VENV/bin/perf_analyzer does not start: $("$VENV/bin/perf_analyzer" --version 2>&1 | tail -n 1)"
  say "perf_analyzer $PA_VERSION ready ($VENV/bin/perf_analyzer)"
}

ensure_promtool() {
  if [[ -x $VENV/bin/promtool ]] && "$VENV/bin/promtool" --version >/dev/null 2>&1; then
    say "promtool present"
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  say "unpacking promtool from Debian's prometheus package"
  if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
    apt-get update -qq
    (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1) ||
      { rm -rf "$tmp"; die "apt-get download prometheus failed"; }
  fi
  dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool
  mv "$tmp/usr/bin/promtool" "$VENV/bin/promtool"
  rm -rf "$tmp"
}

ensure_venv() {  # ensure_venv NAME DIR REQUIREMENTS IMPORT: a client venv, pinned, checked
  local name=$1 dir=$2 requirements=$3 check=$4 stamp=$2/.mmaas-installed want log
  want=$(cat "$requirements" <("$PYTHON" --version 2>&1) | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
    say "$name present ($dir)"
    return
  fi
  [[ -x $dir/bin/python ]] || "$PYTHON" -m venv "$dir"
  say "pip install $name into $dir (log: $dir/pip-install.log)"
  log=$dir/pip-install.log
  if ! "$dir/bin/python" -m pip install --disable-pip-version-check -r "$requirements" \
      >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" | tail -n 20 >&2
    die "pip install $name failed; full log: $log"
  fi
  "$dir/bin/python" -c "$check" || die "$name does not import in $dir"
  echo "$want" >"$stamp"
}

main() {
  ensure_perf_analyzer
  ensure_promtool
  ensure_venv "the KServe SDK" "$KSERVE_VENV" "$ROOT/scripts/kserve-requirements.txt" \
    'from kserve import InferenceRESTClient, InferenceGRPCClient'
  ensure_venv "the OpenAI clients" "$OPENAI_VENV" "$ROOT/scripts/openai-requirements.txt" \
    'import openai, langchain_openai, litellm'
}

main
