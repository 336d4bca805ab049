#!/usr/bin/env bash
# Make mmaas's local base image (default mmaas/base:bookworm) without pulling anything:
# debootstrap a minimal Debian bookworm (python3, python3-venv, ca-certificates) from the
# Debian mirror named in this machine's apt sources, add the host's CA bundle (so pip and
# other TLS clients inside builds trust a corporate TLS proxy), strip apt lists and docs,
# and build dockerfiles/base-cpu.Dockerfile (FROM scratch, ADD the root file system as one
# layer, environment and labels) from it.
#
# Usage: scripts/make_base_image.sh [IMAGE]      (run as root; needs debootstrap and docker)
#        scripts/make_base_image.sh --print-mirror   (print the Debian mirror it would use)
# Environment:
#   MMAAS_DOCKER          Docker client (default /usr/bin/docker, else `docker` on PATH)
#   MMAAS_DEBIAN_MIRROR   Debian mirror URL (default: read from the apt sources in
#                         $MMAAS_APT_DIR/sources.list[.d], MMAAS_APT_DIR default /etc/apt)
#   MMAAS_DEBIAN_SUITE    Debian suite (default bookworm)
#   MMAAS_CA_BUNDLE       PEM bundle added to the image's trust store
#                         (default /etc/ssl/certs/ca-certificates.crt; "none" to skip)
#   MMAAS_DEBOOTSTRAP_CACHE  where the downloaded .deb files are kept for the next run
#                         (default /var/cache/mmaas/debootstrap)
# The image carries the label mmaas.base.recipe=<sha256 of this script and the Dockerfile>;
# scripts/setup.sh remakes the image when either changes (scripts/base_recipe.sh).
set -euo pipefail

IMAGE=mmaas/base:bookworm
SUITE=${MMAAS_DEBIAN_SUITE:-bookworm}
CA_BUNDLE=${MMAAS_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
PACKAGES=python3,python3-venv,ca-certificates
APT_DIR=${MMAAS_APT_DIR:-/etc/apt}
DEB_CACHE=${MMAAS_DEBOOTSTRAP_CACHE:-/var/cache/mmaas/debootstrap}
DOCKERFILE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/dockerfiles/base-cpu.Dockerfile

say() { printf 'make_base_image: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

docker_client() {
  if [[ -n ${MMAAS_DOCKER:-} ]]; then echo "$MMAAS_DOCKER"
  elif [[ -x /usr/bin/docker ]]; then echo /usr/bin/docker
  else command -v docker || die "no Docker client found; run scripts/setup.sh"
  fi
}

# Print the first `deb` URI of the apt sources whose suites include $1 (deb822 .sources
# files first, then one-line .list files).
mirror_for_suite() {
  local suite=$1 file
  for file in "$APT_DIR"/sources.list.d/*.sources; do
    [[ -f $file ]] || continue
    awk -v suite="$suite" 'BEGIN { RS = ""; FS = "\n" }
      { uris = ""; suites = ""; types = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) uris = substr($i, 6)
          else if ($i ~ /^Suites:/) suites = substr($i, 8)
          else if ($i ~ /^Types:/) types = substr($i, 7)
        }
        if ((" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ")) {
          split(uris, u, " "); print u[1]; exit
        } }' "$file"
  done
  for file in "$APT_DIR"/sources.list "$APT_DIR"/sources.list.d/*.list; do
    [[ -f $file ]] || continue
    awk -v suite="$suite" '$1 == "deb" {
        i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit } }' "$file"
  done
}

debian_mirror() {
  if [[ -n ${MMAAS_DEBIAN_MIRROR:-} ]]; then echo "$MMAAS_DEBIAN_MIRROR"; return; fi
  local mirror
  mirror=$(mirror_for_suite "$SUITE" | head -n 1)
  [[ -n $mirror ]] || mirror=$(mirror_for_suite "$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)" | head -n 1)
  [[ -n $mirror ]] || die "no Debian mirror found in $APT_DIR/sources.list[.d]; set MMAAS_DEBIAN_MIRROR=URL"
  echo "$mirror"
}

# Add the CA bundle as a local CA (survives later update-ca-certificates runs), then
# strip what an image does not need: apt lists and caches, docs (copyright kept), man
# pages, logs. dpkg and apt are told to keep it that way in derived images.
finish_rootfs() {
  local rootfs=$1
  if [[ $CA_BUNDLE != none ]]; then
    [[ -r $CA_BUNDLE ]] || die "CA bundle $CA_BUNDLE is not readable; set MMAAS_CA_BUNDLE=FILE or none"
    install -m 0644 "$CA_BUNDLE" "$rootfs/usr/local/share/ca-certificates/mmaas-host-bundle.crt"
    chroot "$rootfs" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the image"
  fi
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/mmaas-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG
  cat >"$rootfs/etc/apt/apt.conf.d/mmaas-slim" <<'CFG'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
CFG
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/usr/share/man/* \
    "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old
  find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$rootfs/var/log" -type f -delete
  : >"$rootfs/etc/machine-id"
}

build_image() {
  local rootfs=$1 docker context recipe
  docker=$(docker_client)
  recipe=$(bash "$(dirname "${BASH_SOURCE[0]}")/base_recipe.sh")
  context=$(mktemp -d "${TMPDIR:-/tmp}/mmaas-base-context.XXXXXX")
  tar --numeric-owner -C "$rootfs" -cf "$context/rootfs.tar" .
  if ! "$docker" build --quiet --file "$DOCKERFILE" \
      --build-arg "SUITE=$SUITE" --build-arg "RECIPE=$recipe" --tag "$IMAGE" "$context" >/dev/null; then
    rm -rf "$context"
    die "docker build of $DOCKERFILE failed"
  fi
  rm -rf "$context"
}

main() {
  if [[ ${1:-} == --print-mirror ]]; then
    debian_mirror
    return
  fi
  IMAGE=${1:-$IMAGE}
  [[ $(id -u) == 0 ]] || die "run as root (debootstrap and chroot need it)"
  command -v debootstrap >/dev/null || die "debootstrap is missing; run scripts/setup.sh"
  local mirror started log
  mirror=$(debian_mirror)
  ROOTFS=$(mktemp -d "${TMPDIR:-/tmp}/mmaas-rootfs.XXXXXX")
  trap 'rm -rf --one-file-system "$ROOTFS"' EXIT
  log=${TMPDIR:-/tmp}/mmaas-debootstrap.log
  started=$SECONDS
  say "debootstrap $SUITE (minbase + $PACKAGES) from $mirror"
  mkdir -p "$DEB_CACHE"
  if ! debootstrap --variant=minbase --include="$PACKAGES" --cache-dir="$DEB_CACHE" \
      "$SUITE" "$ROOTFS" "$mirror" \
      >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "debootstrap failed (full log: $log)"
  fi
  rm -f "$log"
  finish_rootfs "$ROOTFS"
  say "building $IMAGE from $DOCKERFILE ($(du -sh "$ROOTFS" | cut -f1) root file system)"
  build_image "$ROOTFS"
  say "made $IMAGE in $((SECONDS - started)) s"
}

main "$@"
