# shellcheck shell=bash
# Messages of the scripts under hack/: one line each on stderr, prefixed with the script's name, so that
# stdout stays free for what a script prints for its caller (a path as its last line, shell lines to eval).
#
#   . "$here/lib/log.sh" local-cluster    # then: log "starting"  ->  [local-cluster] starting
#                                         #       die "no Go"     ->  [local-cluster] error: no Go, exit 1
log_prefix=${1:?usage: . hack/lib/log.sh PREFIX}

log() { printf '[%s] %s\n' "$log_prefix" "$*" >&2; }

die() {
  log "error: $*"
  exit 1
}
