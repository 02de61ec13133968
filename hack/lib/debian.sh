# shellcheck shell=bash
# Where this machine gets Debian from: its apt sources' archives, or the mirrors the environment names.
# Used by hack/build-image.sh (the image's root filesystem) and hack/build-python.sh (Debian's Python source).
# Source hack/lib/log.sh first (errors die).

# Every archive URI in this machine's apt sources (deb822 and one-line formats), one per line.
apt_source_uris() {
  sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n'
  sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
  true
}

# The first Debian archive (not the security one) named in this machine's apt sources.
debian_mirror() {
  if [ -n "${HYBRID_OPERATOR_DEBIAN_MIRROR:-}" ]; then
    echo "$HYBRID_OPERATOR_DEBIAN_MIRROR"
    return
  fi
  local uri
  uri=$(apt_source_uris | grep -v -- '-security' | grep -m1 '^https\?://' || true)
  [ -n "$uri" ] || die "no Debian mirror in /etc/apt/sources.list*; set HYBRID_OPERATOR_DEBIAN_MIRROR"
  echo "${uri%/}"
}

# Debian's security archive: HYBRID_OPERATOR_DEBIAN_SECURITY_MIRROR ("none" skips it), else the first
# `-security` archive in this machine's apt sources, else the main mirror's `-security` sibling.
debian_security_mirror() { # main_mirror
  if [ -n "${HYBRID_OPERATOR_DEBIAN_SECURITY_MIRROR:-}" ]; then
    echo "$HYBRID_OPERATOR_DEBIAN_SECURITY_MIRROR"
    return
  fi
  local uri
  uri=$(apt_source_uris | grep -- '-security' | grep -m1 '^https\?://' || true)
  if [ -n "$uri" ]; then echo "${uri%/}"; else echo "$1-security"; fi
}
