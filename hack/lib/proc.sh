# shellcheck shell=bash
# Processes of the scripts under hack/: long commands with a heartbeat, waiting for a service to answer,
# telling a live process from a dead one. Source hack/lib/log.sh first (run_logged logs and dies).

# Run a long command with its output in a log file, printing a heartbeat so nobody thinks it hangs; on
# failure, the log's tail and die.
run_logged() { # description logfile command...
  local what=$1 logfile=$2
  shift 2
  local start=$SECONDS rc=0
  "$@" >"$logfile" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    if kill -0 "$pid" 2>/dev/null && (((SECONDS - start) % 30 < 2)); then
      log "  ... $what: $((SECONDS - start))s elapsed (log: $logfile)"
    fi
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 30 "$logfile" >&2
    die "$what failed (exit $rc); full log: $logfile"
  fi
  log "  $what done in $((SECONDS - start))s"
}

# Run a command (output discarded) every quarter second until it succeeds; 1 once it has failed for more
# than the given seconds of wall-clock time (however long each try takes). Callers die with their own
# message: `wait_until 30 curl -fsS "$url" || die "..."`.
wait_until() { # seconds command...
  local limit=$1 start=$SECONDS
  shift
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - start > limit)); then
      return 1
    fi
    sleep 0.25
  done
}

# A pid that runs: it exists and is not a zombie (an exited process nobody reaped yet still answers
# kill -0). An empty pid (no pid file) is not alive.
pid_alive() { # pid
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null || return 1
  [ -r "/proc/$1/stat" ] || return 0 # no procfs: kill -0 is all we can ask
  [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]
}
