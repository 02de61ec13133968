#!/usr/bin/env bash
# Build the two images, smoke-test them and save them as OCI archives:
#   hybrid-operator-base   images/base/Containerfile: the runtime, ansible-core, ansible-runner, the common
#                          collections; what an operator-sdk project's Dockerfile builds FROM
#   hybrid-operator        Containerfile: the sample operator (Foo, VirtualMachine) FROM the base
#
#   hack/build-image.sh                  build both, smoke-test, save; prints the sample archive's path last
#   hack/build-image.sh engine ARGS...   the container engine of the last build, on its storage, e.g.
#                                        hack/build-image.sh engine run --rm hybrid-operator:latest --version
#                                        (Podman's build and run get the flags this machine needs)
#
# How, chosen once per machine (HYBRID_OPERATOR_IMAGE_BUILDER=docker|podman|rootfs forces one):
#   docker   a Docker daemon answers: `docker build` FROM the official Python image.
#   podman   Podman can pull the official Python image: `podman build` FROM it.
#   rootfs   no daemon, no registry (CI): Debian's debootstrap makes a Debian 13 root filesystem
#            (Python 3.13) from this machine's own Debian mirror, cached under
#            ${XDG_CACHE_HOME:-~/.cache}/hybrid-operator/image/; Podman imports it and builds FROM it.
# Podman always runs with storage of its own under that cache dir (overlay, or vfs where the kernel
# refuses overlay) and state under /run, so it touches no other containers on the machine. As root on
# Debian, missing tools (podman, runc, debootstrap) are installed with apt-get.
#
# Environment: HYBRID_OPERATOR_IMAGE_OUT (archives; default build/images), HYBRID_OPERATOR_DEBIAN_MIRROR
# (default: the first Debian mirror of this machine's apt sources), HYBRID_OPERATOR_DEBIAN_SECURITY_MIRROR
# (default: its security archive; "none" skips the security upgrade), HYBRID_OPERATOR_STORAGE_DRIVER.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hybrid-operator/image
run_dir=${XDG_RUNTIME_DIR:-/run}/hybrid-operator-image
out=${HYBRID_OPERATOR_IMAGE_OUT:-$root/build/images}
suite=trixie # Debian 13: Python 3.13, the newest Python the project supports
rootfs_packages=python3,python3-venv,tini,ca-certificates
rootfs_max_age_days=30
state=$cache/engine.env

# shellcheck source=hack/lib/log.sh
. "$root/hack/lib/log.sh" build-image
# shellcheck source=hack/lib/debian.sh
. "$root/hack/lib/debian.sh"

# ------------------------------------------------------------------------------------------- engine

# The engine of the last build, with its storage flags: "docker" or podman with private storage.
engine() {
  [ -f "$state" ] || die "no image built yet on this machine: run hack/build-image.sh first"
  # shellcheck source=/dev/null
  . "$state"
  if [ "$ENGINE" = docker ]; then
    docker "$@"
  else
    # shellcheck disable=SC2153  # DRIVER is not a misspelt `driver`: main writes it to $state, read just above
    podman_private "$DRIVER" "$@"
  fi
}

# Podman on storage of its own: runc (crun refuses hosts with mixed cgroup hierarchies), cgroupfs (no
# systemd needed), events to a file (no journald needed).
podman_flags() { # driver
  mkdir -p "$cache/storage-$1" "$run_dir/$1"
  PODMAN=(podman --root "$cache/storage-$1" --runroot "$run_dir/$1" --tmpdir "$run_dir/$1/libpod"
    --storage-driver "$1" --cgroup-manager cgroupfs --runtime runc --events-backend file)
}

podman_private() { # driver args...
  podman_flags "$1"
  shift
  if [ "${1:-}" = build ]; then
    # No daemon: RUN steps run chrooted in the build's root filesystem, with the host's network and its CA
    # bundle (for pip; mounted for the build only, never in the image).
    shift
    set -- build --isolation chroot --network host "$@"
    [ -f /etc/ssl/certs/ca-certificates.crt ] &&
      set -- "$@" -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro
  elif [ "${1:-}" = run ]; then
    # A container may not raise rlimits where Podman may not: give it ours (Podman lowers its own
    # process limit to kernel.pid_max).
    shift
    local nproc
    nproc=$(ulimit -Hu)
    [ "$nproc" = unlimited ] || [ "$nproc" -gt "$(cat /proc/sys/kernel/pid_max)" ] && nproc=$(cat /proc/sys/kernel/pid_max)
    set -- run --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc" "$@"
  fi
  "${PODMAN[@]}" "$@"
}

storage_driver() {
  if [ -n "${HYBRID_OPERATOR_STORAGE_DRIVER:-}" ]; then
    echo "$HYBRID_OPERATOR_STORAGE_DRIVER"
  elif podman_private overlay info >/dev/null 2>&1; then
    echo overlay
  else
    log "overlay storage is not available here (see: podman --storage-driver overlay info); using vfs"
    echo vfs
  fi
}

# podman, runc and debootstrap from Debian's packages, when missing.
install_tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  if [ "${1:-}" = rootfs ]; then
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
  fi
  [ "${#missing[@]}" -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    die "missing ${missing[*]}: install them (Debian: apt-get install ${missing[*]}) or run as root on Debian"
  fi
  log "installing ${missing[*]} with apt-get"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

official_base() { sed -n 's/^ARG BASE_IMAGE=//p' "$root/images/base/Containerfile"; }

choose_builder() {
  if [ -n "${HYBRID_OPERATOR_IMAGE_BUILDER:-}" ]; then
    echo "$HYBRID_OPERATOR_IMAGE_BUILDER"
  elif command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then
    echo docker
  else
    install_tools
    podman_flags "$(storage_driver)"
    if timeout 120 "${PODMAN[@]}" pull -q "$(official_base)" >/dev/null 2>&1; then
      echo podman
    else
      log "no container daemon and $(official_base) cannot be pulled: building FROM a Debian root filesystem"
      echo rootfs
    fi
  fi
}

# ------------------------------------------------------------------------------------------- rootfs

# Debian 13 minbase plus Python, venv, tini and CA certificates, upgraded from the security archive, as a
# tar; made afresh after 30 days to take in Debian's updates. The image's apt sources name the security
# archive too, so an image built FROM it can `apt-get upgrade` its way to the fixes.
rootfs_tar() {
  local tar=$cache/debian-$suite-security-rootfs.tar
  if [ -f "$tar" ] && [ -z "$(find "$tar" -mtime +"$rootfs_max_age_days")" ]; then
    echo "$tar"
    return
  fi
  local mirror tmp start=$SECONDS
  mirror=$(debian_mirror)
  log "making a Debian $suite root filesystem from $mirror (about 2 minutes, cached for $rootfs_max_age_days days)"
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/rootfs.XXXXXX")
  if ! debootstrap --variant=minbase --include="$rootfs_packages" "$suite" "$tmp/rootfs" "$mirror" \
    >"$tmp/debootstrap.log" 2>&1; then
    tail -n 20 "$tmp/debootstrap.log" >&2
    # A failed debootstrap can leave proc and sys mounted in the target.
    umount "$tmp/rootfs/proc" "$tmp/rootfs/sys" 2>/dev/null || true
    rm -rf "$tmp"
    die "debootstrap $suite from $mirror failed"
  fi
  # apt in the image uses the mirrors the root filesystem came from.
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg security
  security=$(debian_security_mirror "$mirror")
  printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: %s\n' \
    "$mirror" "$suite" "$suite" "$keyring" >"$tmp/rootfs/etc/apt/sources.list.d/debian.sources"
  rm -f "$tmp/rootfs/etc/apt/sources.list"
  if [ "$security" != none ]; then
    printf 'Types: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: %s\n' \
      "$security" "$suite" "$keyring" >"$tmp/rootfs/etc/apt/sources.list.d/debian-security.sources"
    cp -a "$tmp/rootfs/etc/resolv.conf" "$tmp/resolv.conf" 2>/dev/null || : >"$tmp/resolv.conf"
    # The chroot's apt resolves the mirror's name with the host's resolver (a link there is replaced, never
    # followed out of the root filesystem); the original comes back after.
    rm -f "$tmp/rootfs/etc/resolv.conf"
    cp /etc/resolv.conf "$tmp/rootfs/etc/resolv.conf"
    local before
    before=$(grep -c ' upgrade ' "$tmp/rootfs/var/log/dpkg.log" || true)
    if ! { chroot "$tmp/rootfs" apt-get update -qq &&
      chroot "$tmp/rootfs" env DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -qq \
        -o Dpkg::Options::=--force-confold; } >"$tmp/upgrade.log" 2>&1; then
      tail -n 20 "$tmp/upgrade.log" >&2
      rm -rf "$tmp"
      die "apt-get upgrade from $security failed (HYBRID_OPERATOR_DEBIAN_SECURITY_MIRROR=none skips it)"
    fi
    rm -f "$tmp/rootfs/etc/resolv.conf"
    cp -a "$tmp/resolv.conf" "$tmp/rootfs/etc/resolv.conf"
    log "upgraded from $security: $(($(grep -c ' upgrade ' "$tmp/rootfs/var/log/dpkg.log" || true) - before)) packages"
  fi
  rm -rf "$tmp/rootfs/var/lib/apt/lists/"* "$tmp/rootfs/var/cache/apt/"*.bin "$tmp/rootfs/var/cache/apt/archives/"*.deb
  tar --numeric-owner -C "$tmp/rootfs" -cf "$tmp/rootfs.tar" .
  mv "$tmp/rootfs.tar" "$tar"
  rm -rf "$tmp"
  log "root filesystem ready in $((SECONDS - start))s"
  echo "$tar"
}

# ------------------------------------------------------------------------------------------- build

# A tag that changes with every input of the images, so parallel checkouts sharing the cache never run
# each other's image.
content_tag() {
  (
    cd "$root"
    find Containerfile images hybrid_operator pyproject.toml README.md requirements.yml watches.yaml roles \
      hack/constraints \
      playbooks -type f ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum
  ) | sha256sum | cut -c1-12
}

build() { # base_from
  local base_from=$1 tag args=()
  tag=$(content_tag)
  base=hybrid-operator-base:$tag
  sample=hybrid-operator:$tag
  [ -n "$base_from" ] && args+=(--build-arg "BASE_IMAGE=$base_from")
  args+=(--build-arg "GIT_COMMIT=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo devel)")
  local start=$SECONDS
  log "building $base (from ${base_from:-$(official_base)})"
  engine build "${args[@]}" -f images/base/Containerfile -t "$base" -t hybrid-operator-base:latest "$root" >&2
  log "building $sample"
  engine build --build-arg "BASE_IMAGE=$base" -f Containerfile -t "$sample" -t hybrid-operator:latest "$root" >&2
  log "built in $((SECONDS - start))s"
}

# What every user does first, the way deploy/manager runs the image (read-only, /tmp writable, HOME there):
# the version, the collections, and a check of the baked watches.yaml.
smoke_test() {
  local run=(engine run --rm --read-only --tmpfs /tmp --env HOME=/tmp --user 1001 --network none)
  local got
  got=$("${run[@]}" "$base" --version)
  [[ $got == "hybrid-operator "* ]] || die "$base --version printed: $got"
  log "smoke: $base --version: $got"
  got=$("${run[@]}" "$base" ansible-galaxy collection list kubernetes.core)
  [[ $got == *kubernetes.core* ]] || die "$base has no kubernetes.core: $got"
  got=$("${run[@]}" "$sample" check)
  [[ $got == *"Foo"*"role"*"foo"* ]] || die "$sample check printed: $got"
  log "smoke: $sample check: $(echo "$got" | tr '\n' ';')"
}

save() { # image file: written again only when the image changed (the file beside it says which it holds)
  local id
  id="$1 $(engine image inspect --format '{{.Id}}' "$1")"
  [ -f "$2" ] && [ "$(cat "$2.id" 2>/dev/null)" = "$id" ] && return 0
  rm -f "$2" "$2.id"
  if [ "$ENGINE" = docker ]; then
    engine save -o "$2" "$1" >&2
  else
    engine save --format oci-archive -o "$2" "$1" >&2
  fi
  echo "$id" >"$2.id"
}

# Images of earlier builds go, so the cache does not grow with every change (an earlier build's tests
# load their image again from its archive).
prune() {
  local ref
  for ref in $(engine images --format '{{.Repository}}:{{.Tag}}' | grep -E '/?hybrid-operator(-base)?:' || true); do
    case "${ref##*:}" in "${base##*:}" | latest) ;; *) engine rmi "$ref" >/dev/null 2>&1 || true ;; esac
  done
  engine image prune -f >/dev/null 2>&1 || true
}

main() {
  local builder base_from="" driver=overlay
  builder=$(choose_builder)
  case "$builder" in
  docker) ENGINE=docker ;;
  podman | rootfs)
    install_tools "$builder"
    ENGINE=podman
    driver=$(storage_driver)
    ;;
  *) die "HYBRID_OPERATOR_IMAGE_BUILDER must be docker, podman or rootfs, not $builder" ;;
  esac
  mkdir -p "$cache" "$out"
  printf 'ENGINE=%s\nDRIVER=%s\n' "$ENGINE" "$driver" >"$state"
  if [ "$builder" = rootfs ]; then
    base_from=localhost/debian-rootfs:$suite
    local tar
    tar=$(rootfs_tar)
    if ! engine image exists "$base_from" ||
      [ "$(engine image inspect --format '{{index .Labels "hybrid-operator.rootfs-mtime"}}' "$base_from")" != "$(stat -c %Y "$tar")" ]; then
      log "importing $tar as $base_from"
      engine import --change "LABEL hybrid-operator.rootfs-mtime=$(stat -c %Y "$tar")" "$tar" "$base_from" >/dev/null
    fi
  fi
  build "$base_from"
  prune
  smoke_test
  local ext=oci.tar
  [ "$ENGINE" = docker ] && ext=tar
  save "$base" "$out/hybrid-operator-base.$ext"
  save "$sample" "$out/hybrid-operator.$ext"
  log "saved $out/hybrid-operator-base.$ext and $out/hybrid-operator.$ext ($sample)"
  echo "$out/hybrid-operator.$ext"
}

case "${1:-}" in
engine)
  shift
  engine "$@"
  ;;
"")
  mkdir -p "$cache"
  # One build at a time per cache: parallel checkouts share the rootfs and the storage.
  exec 9>"$cache/lock"
  flock 9
  main
  ;;
*) die "usage: $0 [engine ARGS...]" ;;
esac
