#!/usr/bin/env bash
# Build the CPython the operator's image runs (Debian 13's python3.13), the way Debian builds it: with
# profile-guided and link-time optimization and libpython linked into the interpreter, from the source
# Debian ships (hack/versions.env pins its version and sha256). hack/bootstrap.sh makes the venvs with it,
# so what runs here (the operator, its Ansible runs, the tests and bench/) runs on the interpreter a
# deployed operator runs on, and bench/ gives operator-sdk's ansible-operator the same one.
#
#   hack/build-python.sh           # build once (15-25 minutes on 2 cores), then print the interpreter's path
#   hack/build-python.sh --path    # print the path of the build made earlier; exit 1 if there is none
#   hack/build-python.sh --retry   # build again after a build that failed (see below)
#
# Why: an interpreter built without those optimizations and with a shared libpython (pyenv's default, or a
# source build with default flags) spends about a tenth more CPU on a Foo run (268 against 239 ms,
# measured), so numbers measured on it say less about the operator users deploy (docs/internals/performance.md, "The interpreter").
# Needs a C compiler and Python's build headers (installed with apt-get as root on Debian when missing) and
# this machine's Debian mirror (HYBRID_OPERATOR_DEBIAN_MIRROR to name another). The build lives under
# ${XDG_CACHE_HOME:-~/.cache}/hybrid-operator/python/<version>; one made partly (interrupted) is made again.
# A build that failed once the compiler ran leaves <version>.failed beside it, and is not tried again
# (each bootstrap would spend the build's time failing again) until --retry; a download that failed is
# tried again the next time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/log.sh
. "$root/hack/lib/log.sh" build-python
# shellcheck source=hack/lib/apt.sh
. "$root/hack/lib/apt.sh"
# shellcheck source=hack/lib/debian.sh
. "$root/hack/lib/debian.sh"
# shellcheck source=hack/versions.env
. "$root/hack/versions.env"

version=$PYTHON_SOURCE_VERSION
minor=${version%.*}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hybrid-operator/python
prefix=$cache/$version
python=$prefix/bin/python$minor
done_mark=$prefix/.built  # written last: a prefix without it is a build that did not finish
# What Ansible, the operator and its tests need of the standard library (a missing header only warns).
needed_modules="ssl zlib bz2 lzma ctypes sqlite3 readline uuid"
build_packages="gcc make xz-utils libssl-dev zlib1g-dev libbz2-dev liblzma-dev libffi-dev libsqlite3-dev
  libreadline-dev uuid-dev libncurses-dev"

failed_mark=$cache/$version.failed

if [ "${1:-}" = --path ]; then
  [ -f "$done_mark" ] && [ -x "$python" ] || exit 1
  echo "$python"
  exit 0
fi
case ${1:-} in
  "") ;;
  --retry) rm -f "$failed_mark" ;;
  *) die "usage: hack/build-python.sh [--path | --retry]" ;;
esac
[ "$#" -le 1 ] || die "usage: hack/build-python.sh [--path | --retry]"

mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9 # another bootstrap building the same interpreter: wait for it, then use its build
if [ -f "$done_mark" ] && [ -x "$python" ]; then
  echo "$python"
  exit 0
fi
[ ! -f "$failed_mark" ] ||
  die "an earlier build of Python $version failed ($(head -c 300 "$failed_mark")); hack/build-python.sh --retry tries again"

if command -v dpkg-query >/dev/null; then
  # shellcheck disable=SC2086 # one word per package
  missing=$(for package in $build_packages; do
    dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q 'install ok installed' || echo "$package"
  done)
  # shellcheck disable=SC2086
  apt_install "Python's build" $missing
fi
command -v cc >/dev/null || die "no C compiler (cc) to build Python $version with"

work=$(mktemp -d "$cache/build.XXXXXX")
building="" # the step of the slow part under way: a failure there is remembered (see the top)
# On the way out: the work directory goes; a build that failed says why for the next bootstrap.
finish() {
  local rc=$?
  rm -rf "$work"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ] && [ -n "$building" ] && [ ! -f "$done_mark" ]; then
    echo "exit $rc in $building, $(date -u +%FT%TZ)" >"$failed_mark"
  fi
}
trap finish EXIT
trap 'exit 130' INT TERM # an interrupted build is not a failed one: the next bootstrap builds again
tarball=python${minor}_${version}.orig.tar.xz
url=$(debian_mirror)/pool/main/p/python$minor/$tarball
log "downloading $url"
curl -fsSL --retry 3 -o "$work/$tarball" "$url" || die "cannot download $url (set HYBRID_OPERATOR_DEBIAN_MIRROR)"
echo "$PYTHON_SOURCE_SHA256  $work/$tarball" | sha256sum -c --quiet - ||
  die "$tarball does not have the sha256 hack/versions.env pins"
tar -xf "$work/$tarball" -C "$work"
source_dir=$work/Python-$version
[ -d "$source_dir" ] || die "$tarball does not hold Python-$version/"

rm -rf "$prefix"
started=$SECONDS
log "building Python $version with profile-guided and link-time optimization into $prefix (15-25 minutes)"
building="the build (configure, make, make install)"
(
  cd "$source_dir"
  ./configure --prefix="$prefix" --enable-optimizations --with-lto --with-computed-gotos >"$work/configure.log" 2>&1 ||
    { tail -n 30 "$work/configure.log" >&2; exit 1; }
  make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -n 40 "$work/make.log" >&2; exit 1; }
  make install >"$work/install.log" 2>&1 || { tail -n 30 "$work/install.log" >&2; exit 1; }
) || die "the build of Python $version failed (its log's end is above)"
building="the check of the standard library"
for module in $needed_modules; do
  "$python" -P -c "import $module" 2>/dev/null || die "Python $version was built without $module: its headers are missing"
done
touch "$done_mark"
log "built Python $version in $((SECONDS - started)) s: $python"
echo "$python"
