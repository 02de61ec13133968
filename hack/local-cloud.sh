#!/usr/bin/env bash
# A real, single-node OpenStack on loopback, for the VirtualMachine operator's tests and demos.
#
#   hack/local-cloud.sh up        install (first time only), start, print the clouds.yaml path last
#   hack/local-cloud.sh down      stop every process started here (by pid file), remove the state but the logs
#   hack/local-cloud.sh status    what runs, on which ports, with which versions, how much memory
#   hack/local-cloud.sh env       shell lines to eval: OS_CLIENT_CONFIG_FILE and OS_CLOUD=local
#   hack/local-cloud.sh install   only install (or check) the packages and the virtualenv
#
# What runs: keystone, placement, glance, neutron (ML2 with a tiny agent-less driver, local-cloud/fakebind)
# and nova (api, conductor, scheduler, compute with nova's fake hypervisor driver: servers are rows and
# state machines, no real VMs), MariaDB (unix socket only) and RabbitMQ with its own epmd. OpenStack comes
# from PyPI into its own virtualenv, pinned in local-cloud/requirements.txt and cached by a hash of the
# pins under ${XDG_CACHE_HOME:-~/.cache}/hybrid-operator/; MariaDB and RabbitMQ come from the Debian
# packages (installed with apt-get when missing). Every port is a free loopback port picked at `up`. The
# configuration files are templates under local-cloud/templates/, rendered to the same paths in the state
# directory.
#
# The clouds.yaml has two clouds: `local` (user demo, a plain member of project demo: what the operator
# should use) and `local-admin` (admin of project admin). Seeded: flavors small (1 vCPU, 512 MiB, 1 GiB),
# medium (2 vCPU, 2 GiB, 10 GiB) and large (4 vCPU, 8 GiB, 20 GiB), a tiny image `cirros`, and a shared
# network `private` (so servers created without a network get one).
#
# Each `up` after a `down` starts a fresh cloud (the fake servers live in nova-compute's memory, a
# restarted cloud would carry servers that no longer exist); a second `up` reuses what runs. The database
# schemas are made once (first `up`) into a cached template that every `up` copies. More, with
# measurements and the gotchas met on the way: docs/getting-started/local-cloud.md.
#
# Environment:
#   LOCAL_CLOUD_NAME     name of this cloud (default "default"); two names run side by side
#   LOCAL_CLOUD_DIR      state directory (default <cache>/clouds/<name>)
#   LOCAL_CLOUD_PYTHON   python for the virtualenv (default python3; 3.11 is what the pins were made on)
# build_dbtemplate points $state at a scratch directory inside a subshell, on purpose:
# shellcheck disable=SC2030,SC2031
set -euo pipefail
export PYTHONWARNINGS=ignore

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib/log.sh
. "$here/lib/log.sh" local-cloud
# shellcheck source=hack/lib/proc.sh
. "$here/lib/proc.sh"
# shellcheck source=hack/lib/template.sh
. "$here/lib/template.sh"
files=$here/local-cloud
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hybrid-operator
name=${LOCAL_CLOUD_NAME:-default}
state=${LOCAL_CLOUD_DIR:-$cache/clouds/$name}
# The pins were made on Python 3.11: take it where the machine has it (the operator's own venv may be newer
# and first on PATH, as under hack/test.sh), else python3.
if [ -z "${LOCAL_CLOUD_PYTHON:-}" ] && command -v python3.11 >/dev/null && python3.11 -c '' 2>/dev/null; then
  python=python3.11
else
  python=${LOCAL_CLOUD_PYTHON:-python3}
fi

# Processes in start order.
components=(epmd rabbitmq mariadb keystone placement glance-api neutron-api nova-api
  nova-conductor nova-scheduler nova-compute)
port_names=(EPMD AMQP RABBIT_DIST KEYSTONE PLACEMENT GLANCE NEUTRON NOVA)
databases=(keystone placement glance neutron nova_api nova nova_cell0)

# ------------------------------------------------------------------------------------------- install

# The virtualenv is keyed by the pins, the fake ML2 driver and the python version: a change to any of
# them builds a new one next to the old.
venv_key() {
  {
    cat "$files/requirements.txt" "$files/fakebind/pyproject.toml" "$files/fakebind/local_cloud_fakebind/__init__.py"
    "$python" -P -c 'import sys; print(sys.version)'
  } | sha256sum | cut -c1-12
}
venv=$cache/openstack-venv-$(venv_key)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    die "need root (or sudo) for: $*"
  fi
}

mariadbd_bin() { command -v mariadbd || echo /usr/sbin/mariadbd; }
epmd_bin() {
  command -v epmd && return 0
  local found
  for found in /usr/lib/erlang/erts-*/bin/epmd; do echo "$found" && return 0; done
}
rabbit_sbin=/usr/lib/rabbitmq/bin

install_packages() {
  local missing=()
  [ -x "$(mariadbd_bin)" ] && command -v mariadb-install-db >/dev/null || missing+=(mariadb-server)
  [ -x "$rabbit_sbin/rabbitmq-server" ] || missing+=(rabbitmq-server)
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "please install ${missing[*]} (only Debian/Ubuntu are automated)"
  log "installing ${missing[*]} with apt-get (first time only)"
  # The packages' own services are not wanted: we run private instances. Debian's policy-rc.d keeps
  # the package scripts from starting them (kept as is if the machine already has one).
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"
    added_policy=1
  fi
  local rc=0
  {
    as_root apt-get update -qq &&
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  } >"$cache/apt.log" 2>&1 || rc=$?
  [ "$added_policy" -eq 1 ] && as_root rm -f "$policy"
  [ "$rc" -eq 0 ] || {
    tail -n 20 "$cache/apt.log" >&2
    die "apt-get failed; see $cache/apt.log"
  }
  log "  packages installed"
}

install_venv() {
  [ -f "$venv/.complete" ] && return 0
  command -v "$python" >/dev/null || die "$python not found (set LOCAL_CLOUD_PYTHON)"
  log "building the OpenStack virtualenv $venv (first time only, about 3-5 minutes on 2 cores)"
  rm -rf "$venv"
  "$python" -P -m venv "$venv"
  run_logged "pip upgrade" "$cache/pip-$name.log" "$venv/bin/pip" install -q -U pip wheel
  run_logged "pip install (OpenStack, pinned)" "$cache/pip-$name.log" \
    "$venv/bin/pip" install -q -r "$files/requirements.txt"
  # Built from a copy so the build leaves nothing (egg-info, build/) in the source tree.
  local src
  src=$(mktemp -d)
  cp -r "$files/fakebind/." "$src/"
  run_logged "pip install (fakebind)" "$cache/pip-$name.log" \
    "$venv/bin/pip" install -q --no-build-isolation --no-deps "$src"
  rm -rf "$src"
  touch "$venv/.complete"
}

cmd_install() {
  mkdir -p "$cache"
  local start=$SECONDS
  install_packages
  install_venv
  [ $((SECONDS - start)) -gt 1 ] && log "install done in $((SECONDS - start))s"
  return 0
}

# ---------------------------------------------------------------------------------------- configuration

# Loopback ports that are free now, below the kernel's ephemeral range so that no outgoing connection
# takes one before its service binds it.
pick_ports() {
  # -P: the repository's operator.py must not shadow the standard library's `operator`.
  "$venv/bin/python" -P - "${port_names[@]}" <<'EOF'
import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
taken, held = set(), []
for name in sys.argv[1:]:
    while True:
        port = random.randint(10000, low - 1)
        if port in taken:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        held.append(s)
        taken.add(port)
        print(f"{name}_PORT={port}")
        break
EOF
}

secret() { head -c 18 /dev/urandom | base64 | tr -d '/+=\n'; }

# The cloud's identity: fresh ports; passwords new, or those of the database template ($1), whose
# keystone already holds them.
write_cloud_env() {
  {
    echo "# written by hack/local-cloud.sh up; ports and passwords of this cloud"
    pick_ports
    if [ -n "${1:-}" ]; then
      cat "$1"
    else
      echo "LOCAL_CLOUD_ADMIN_PASSWORD=$(secret)"
      echo "LOCAL_CLOUD_DEMO_PASSWORD=$(secret)"
      echo "LOCAL_CLOUD_SERVICE_PASSWORD=$(secret)"
    fi
  } >"$state/cloud.env"
  chmod 600 "$state/cloud.env"
}

load_cloud_env() {
  set -a
  # shellcheck source=/dev/null  # written by write_cloud_env at run time
  . "$state/cloud.env"
  set +a
}

db_url() { echo "mysql+pymysql://root@localhost/$1?unix_socket=$state/run/mysqld.sock&charset=utf8mb4"; }

keystone_url() { echo "http://127.0.0.1:$KEYSTONE_PORT"; }

# $state/PATH from hack/local-cloud/templates/PATH (the same path), with the values given as name=value.
render_config() { # path name=value...
  local path=$1
  shift
  render_template "$files/templates/$path" "$@" >"$state/$path"
}

# keystone_authtoken-style section body for service user $1.
service_auth() {
  render_template "$files/templates/service-auth.ini" keystone_url="$(keystone_url)" username="$1" \
    password="$LOCAL_CLOUD_SERVICE_PASSWORD"
}

write_clouds_yaml() {
  render_config clouds.yaml keystone_url="$(keystone_url)" demo_password="$LOCAL_CLOUD_DEMO_PASSWORD" \
    admin_password="$LOCAL_CLOUD_ADMIN_PASSWORD"
  chmod 600 "$state/clouds.yaml"
}

write_mariadb_config() {
  mkdir -p "$state/etc/mysql" "$state/data/mysql"
  render_config etc/mysql/my.cnf state="$state" user="$(id -un)"
}

write_rabbit_config() {
  mkdir -p "$state/rabbit"
  render_config rabbit/env.sh state="$state" AMQP_PORT="$AMQP_PORT" RABBIT_DIST_PORT="$RABBIT_DIST_PORT" \
    EPMD_PORT="$EPMD_PORT"
  printf 'listeners.tcp.default = 127.0.0.1:%s\nloopback_users = none\n' "$AMQP_PORT" >"$state/rabbit/rabbitmq.conf"
  : >"$state/rabbit/rabbitmq-env.conf"
  echo '[].' >"$state/rabbit/enabled_plugins"
}

# The services' configuration files, from hack/local-cloud/templates/etc/.
write_openstack_configs() {
  local rabbit="rabbit://guest:guest@127.0.0.1:$AMQP_PORT/" placement_auth glance_auth neutron_auth nova_auth
  mkdir -p "$state/etc/"{keystone,placement,glance,nova} "$state/etc/neutron/plugins/ml2" \
    "$state/data/"{images,glance-staging,glance-tasks,locks,neutron,nova/instances}
  placement_auth=$(service_auth placement)
  glance_auth=$(service_auth glance)
  neutron_auth=$(service_auth neutron)
  nova_auth=$(service_auth nova)

  render_config etc/keystone/keystone.conf state="$state" keystone_db="$(db_url keystone)"
  render_config etc/placement/placement.conf state="$state" placement_db="$(db_url placement)" \
    placement_auth="$placement_auth"

  cp "$venv/etc/glance/glance-api-paste.ini" "$state/etc/glance/"
  render_config etc/glance/glance-api.conf state="$state" GLANCE_PORT="$GLANCE_PORT" glance_db="$(db_url glance)" \
    glance_auth="$glance_auth"

  cp "$venv/etc/neutron/api-paste.ini" "$state/etc/neutron/"
  render_config etc/neutron/neutron.conf state="$state" transport_url="$rabbit" neutron_db="$(db_url neutron)" \
    neutron_auth="$neutron_auth"
  render_config etc/neutron/plugins/ml2/ml2_conf.ini
  cp "$files/neutron_wsgi.py" "$state/etc/neutron/"

  cp "$venv/etc/nova/api-paste.ini" "$state/etc/nova/"
  render_config etc/nova/nova.conf state="$state" transport_url="$rabbit" nova_api_db="$(db_url nova_api)" \
    nova_db="$(db_url nova)" nova_auth="$nova_auth" placement_auth="$placement_auth" neutron_auth="$neutron_auth"
}

# ------------------------------------------------------------------------------------------ processes

# Start a process in its own session (so `down` can stop it with everything it forked) and record its
# pid. The pid is written by the process itself, right before it becomes the command.
spawn() { # name env-assignments... -- command...
  local name=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do
    envs+=("$1")
    shift
  done
  shift
  # shellcheck disable=SC2016  # $$ and $@ belong to the inner shell
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$state/run/$name.pid" env "${envs[@]}" "$@" \
    >"$state/logs/$name.out" 2>&1 </dev/null 8>&- 9>&- &
  # wait for the pid file, so a `down` right after never misses this process
  local i
  for i in $(seq 50); do
    [ -s "$state/run/$name.pid" ] && return 0
    sleep 0.1
  done
  die "$name did not start; see $state/logs/$name.out"
}

pid_of() { cat "$state/run/$1.pid" 2>/dev/null || true; }
alive() { pid_alive "$(pid_of "$1")"; }
# every live process of a component: its session (the spawned pid is the session leader)
session_pids() { ps -o pid=,stat= -s "$1" 2>/dev/null | awk '$2 !~ /^Z/ {print $1}' || true; }

uwsgi_app() { # name port module [extra uwsgi args]   (service config dir in the environment)
  local name=$1 port=$2 module=$3 cfg=$4
  shift 4
  # --http11-socket + --http-keepalive: with --http-socket keystoneauth's pooled connections get reset
  spawn "$name" "$cfg" PYTHONWARNINGS=ignore -- "$venv/bin/uwsgi" \
    --http11-socket "127.0.0.1:$port" --http-keepalive --module "$module" --need-app \
    --master --processes 1 --threads 4 --enable-threads --buffer-size 65535 \
    --die-on-term --worker-reload-mercy 5 --lazy-apps --logto "$state/logs/$name-uwsgi.log" "$@"
}

start_epmd() { spawn epmd -- "$(epmd_bin)" -address 127.0.0.1 -port "$EPMD_PORT"; }
start_rabbitmq() {
  # shellcheck source=/dev/null  # rendered by write_rabbit_config at run time
  (. "$state/rabbit/env.sh" && spawn rabbitmq -- "$rabbit_sbin/rabbitmq-server")
}
start_mariadb() { spawn mariadb -- "$(mariadbd_bin)" --defaults-file="$state/etc/mysql/my.cnf"; }
start_keystone() {
  uwsgi_app keystone "$KEYSTONE_PORT" keystone.wsgi.api:application OS_KEYSTONE_CONFIG_DIR="$state/etc/keystone"
}
start_services() {
  uwsgi_app placement "$PLACEMENT_PORT" placement.wsgi.api:application \
    OS_PLACEMENT_CONFIG_DIR="$state/etc/placement"
  uwsgi_app glance-api "$GLANCE_PORT" glance.wsgi.api:application OS_GLANCE_CONFIG_DIR="$state/etc/glance" \
    --http-chunked-input --http-auto-chunked --http-raw-body
  uwsgi_app neutron-api "$NEUTRON_PORT" neutron_wsgi:application OS_NEUTRON_CONFIG_DIR="$state/etc/neutron" \
    --pythonpath "$state/etc/neutron"
  uwsgi_app nova-api "$NOVA_PORT" nova.wsgi.osapi_compute:application OS_NOVA_CONFIG_DIR="$state/etc/nova"
}
start_nova_services() {
  nova_service nova-conductor
  nova_service nova-scheduler
  nova_service nova-compute
}
nova_service() {
  spawn "$1" PYTHONWARNINGS=ignore -- "$venv/bin/$1" --config-file "$state/etc/nova/nova.conf" \
    --log-file "$state/logs/$1.log"
}

wait_for() { # what seconds command...
  wait_until "$2" "${@:3}" || die "timeout after ${2}s waiting for $1; logs in $state/logs"
}
mariadb_ping() { mariadb-admin --defaults-file="$state/etc/mysql/my.cnf" ping; }
rabbit_ready() {
  # shellcheck source=/dev/null  # rendered by write_rabbit_config at run time
  (. "$state/rabbit/env.sh" && "$rabbit_sbin/rabbitmqctl" -q await_startup --timeout 2)
}

# Stop every recorded process: SIGTERM to all session leaders at once, then whatever is left of
# their sessions gets SIGKILL after a grace period.
stop_all() {
  local c pid pids=() left i
  for c in "${components[@]}"; do
    pid=$(pid_of "$c")
    pid_alive "$pid" && pids+=("$pid") && kill -TERM "$pid" 2>/dev/null
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  log "stopping ${#pids[@]} processes"
  for ((i = 0; i < 80; i++)); do
    left=$(for pid in "${pids[@]}"; do session_pids "$pid"; done)
    [ -z "$left" ] && break
    sleep 0.25
  done
  if [ -n "$left" ]; then
    log "  still running after 20s, killing: $(echo "$left" | tr '\n' ' ')"
    # shellcheck disable=SC2086  # one pid per word: split on purpose
    kill -KILL $left 2>/dev/null || true
  fi
  rm -f "$state"/run/*.pid
}

# ------------------------------------------------------------------------------------------- commands

# The schemas of all five services, in parallel (neutron's and nova's take longest).
sync_schemas() {
  local nc=(--config-file "$state/etc/nova/nova.conf") m="$venv/bin" pids=() pid failed=0
  (
    "$m/keystone-manage" --config-file "$state/etc/keystone/keystone.conf" db_sync
  ) >"$state/logs/dbsync-keystone.log" 2>&1 &
  pids+=($!)
  (
    "$m/placement-manage" --config-file "$state/etc/placement/placement.conf" db sync
  ) >"$state/logs/dbsync-placement.log" 2>&1 &
  pids+=($!)
  (
    "$m/glance-manage" --config-file "$state/etc/glance/glance-api.conf" db_sync
  ) >"$state/logs/dbsync-glance.log" 2>&1 &
  pids+=($!)
  (
    "$m/neutron-db-manage" --config-file "$state/etc/neutron/neutron.conf" \
      --config-file "$state/etc/neutron/plugins/ml2/ml2_conf.ini" upgrade heads
  ) >"$state/logs/dbsync-neutron.log" 2>&1 &
  pids+=($!)
  (
    "$m/nova-manage" "${nc[@]}" api_db sync &&
      "$m/nova-manage" "${nc[@]}" cell_v2 map_cell0 --database_connection "$(db_url nova_cell0)" &&
      "$m/nova-manage" "${nc[@]}" cell_v2 create_cell --name cell1 &&
      "$m/nova-manage" "${nc[@]}" db sync
  ) >"$state/logs/dbsync-nova.log" 2>&1 &
  pids+=($!)
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
  [ "$failed" -eq 0 ] || die "a database sync failed; see $state/logs/dbsync-*.log"
}

# Creating the schemas (hundreds of migrations), bootstrapping keystone and registering the services
# was most of the time a fresh cloud took, so it is done once per virtualenv and MariaDB version, into a
# template data directory that every `up` copies, with the passwords keystone got (passwords.env).
# What depends on ports or paths is rewritten by restore_databases: keystone's endpoints and nova's cell
# mappings. Bump the "format" below when the template's content changes.
dbtemplate_dir() {
  echo "$cache/openstack-dbtemplate-$({ echo format 2; venv_key; "$(mariadbd_bin)" --version; } | sha256sum | cut -c1-12)"
}

build_dbtemplate() {
  local tmpl build=$cache/build/openstack-dbtemplate start=$SECONDS
  tmpl=$(dbtemplate_dir)
  [ -f "$tmpl/.complete" ] && return 0
  mkdir -p "$cache/build"
  exec 8>"$cache/build/openstack-dbtemplate.lock"
  flock -w 900 8 || die "another local-cloud.sh holds $cache/build/openstack-dbtemplate.lock"
  [ -f "$tmpl/.complete" ] && return 0
  log "creating the databases of a cloud to copy (first time only, about 1-2 minutes)"
  (
    state=$build
    rm -rf "$state"
    mkdir -p "$state/"{etc,logs,run,data}
    write_cloud_env
    load_cloud_env
    write_mariadb_config
    write_openstack_configs
    run_logged "mariadb-install-db" "$state/logs/mariadb-install.log" \
      mariadb-install-db --defaults-file="$state/etc/mysql/my.cnf" --auth-root-authentication-method=normal \
      --skip-test-db
    start_mariadb
    wait_for mariadb 30 mariadb_ping
    local db
    for db in "${databases[@]}"; do
      mariadb --defaults-file="$state/etc/mysql/my.cnf" -u root -e "CREATE DATABASE $db"
    done
    run_logged "database schemas of keystone, placement, glance, neutron, nova" "$state/logs/dbsync.log" \
      sync_schemas
    write_clouds_yaml
    fernet_keys
    # the password comes from the environment, not the command line (visible in ps)
    OS_BOOTSTRAP_PASSWORD=$LOCAL_CLOUD_ADMIN_PASSWORD run_logged "keystone bootstrap" \
      "$state/logs/keystone-bootstrap.log" "$venv/bin/keystone-manage" \
      --config-file "$state/etc/keystone/keystone.conf" bootstrap --bootstrap-region-id RegionOne \
      --bootstrap-admin-url "$(keystone_url)/v3/" --bootstrap-internal-url "$(keystone_url)/v3/" \
      --bootstrap-public-url "$(keystone_url)/v3/"
    start_keystone
    wait_for keystone 120 curl -sf -o /dev/null "$(keystone_url)/v3"
    OS_CLIENT_CONFIG_FILE=$state/clouds.yaml run_logged "service users, catalog, project demo" \
      "$state/logs/bootstrap.log" "$venv/bin/python" "$files/bootstrap.py" register
    stop_all
  )
  rm -rf "$tmpl"
  mkdir -p "$tmpl"
  mv "$build/data/mysql" "$tmpl/mysql"
  grep '^LOCAL_CLOUD_.*PASSWORD=' "$build/cloud.env" >"$tmpl/passwords.env"
  chmod 600 "$tmpl/passwords.env"
  touch "$tmpl/.complete"
  rm -rf "$build"
  exec 8>&-
  log "  database template $tmpl done in $((SECONDS - start))s"
}

restore_databases() {
  cp -a "$(dbtemplate_dir)/mysql/." "$state/data/mysql/"
  start_mariadb
  wait_for mariadb 30 mariadb_ping
  # Where each service answers is in keystone's catalog (the URLs bootstrap.py registers), where each
  # cell's database and message queue are in nova's API database: this cloud's ports and paths.
  mariadb --defaults-file="$state/etc/mysql/my.cnf" -u root -e "
    UPDATE keystone.endpoint AS e JOIN keystone.service AS s ON e.service_id = s.id SET e.url = CASE s.type
      WHEN 'identity' THEN '$(keystone_url)/v3/'
      WHEN 'placement' THEN 'http://127.0.0.1:$PLACEMENT_PORT'
      WHEN 'image' THEN 'http://127.0.0.1:$GLANCE_PORT'
      WHEN 'compute' THEN 'http://127.0.0.1:$NOVA_PORT/v2.1'
      WHEN 'network' THEN 'http://127.0.0.1:$NEUTRON_PORT'
      ELSE e.url END;
    UPDATE nova_api.cell_mappings SET database_connection = '$(db_url nova_cell0)' WHERE name = 'cell0';
    UPDATE nova_api.cell_mappings SET database_connection = '$(db_url nova)',
      transport_url = 'rabbit://guest:guest@127.0.0.1:$AMQP_PORT/' WHERE name = 'cell1';"
}

fernet_key() { head -c 32 /dev/urandom | base64 | tr '+/' '-_'; }

# What `keystone-manage fernet_setup` and `credential_setup` write, without two interpreter start-ups.
fernet_keys() {
  local dir key
  for dir in fernet-keys fernet-receipts credential-keys; do
    mkdir -m 700 "$state/etc/keystone/$dir"
    for key in 0 1; do
      (umask 077 && fernet_key >"$state/etc/keystone/$dir/$key")
    done
  done
}

cmd_up() {
  cmd_install
  mkdir -p "$(dirname "$state")"
  exec 9>"$state.lock"
  flock -w 900 9 || die "another local-cloud.sh holds $state.lock"
  if running; then
    log "already running (state: $state)"
    echo "$state/clouds.yaml"
    return 0
  fi
  build_dbtemplate
  local start=$SECONDS t0
  t0=$(date +%s.%N)
  [ -d "$state/run" ] && stop_all
  rm -rf "$state"
  mkdir -p "$state/"{etc,logs,run,data}
  chmod 700 "$state"
  [ ${#state} -le 80 ] || die "state directory path too long for a unix socket; set LOCAL_CLOUD_DIR shorter"
  log "starting a fresh cloud in $state"
  # a failed start leaves nothing running behind
  trap 'log "start failed; stopping what was started"; stop_all' EXIT
  write_cloud_env "$(dbtemplate_dir)/passwords.env"
  load_cloud_env
  write_mariadb_config
  write_rabbit_config
  write_openstack_configs
  write_clouds_yaml
  export OS_CLIENT_CONFIG_FILE=$state/clouds.yaml
  start_epmd
  start_rabbitmq
  restore_databases
  fernet_keys
  start_keystone
  start_services
  wait_for keystone 120 curl -sf -o /dev/null "$(keystone_url)/v3"
  wait_for rabbitmq 120 rabbit_ready
  # nova's conductor and scheduler create their placement client at start (fatal if keystone does not
  # answer), nova-compute registers itself in placement at start: after keystone
  log "keystone and rabbitmq up ($((SECONDS - start))s); starting nova conductor, scheduler, compute"
  start_nova_services
  run_logged "waiting for nova-compute, seeding flavors, image, network" "$state/logs/bootstrap-ready.log" \
    "$venv/bin/python" "$files/bootstrap.py" ready "$t0" "$state/data/nova/compute_id"
  trap - EXIT
  log "cloud ready in $((SECONDS - start))s: OS_CLIENT_CONFIG_FILE=$state/clouds.yaml OS_CLOUD=local"
  echo "$state/clouds.yaml"
}

# Everything recorded runs and keystone answers.
running() {
  [ -f "$state/cloud.env" ] && [ -f "$state/clouds.yaml" ] || return 1
  local c
  for c in "${components[@]}"; do alive "$c" || return 1; done
  load_cloud_env
  curl -sf -o /dev/null "$(keystone_url)/v3"
}

cmd_down() {
  [ -d "$state" ] || {
    log "nothing to stop ($state does not exist)"
    return 0
  }
  mkdir -p "$(dirname "$state")"
  exec 9>"$state.lock"
  flock -w 900 9 || die "another local-cloud.sh holds $state.lock"
  local start=$SECONDS port left=""
  stop_all
  if [ -f "$state/cloud.env" ]; then
    load_cloud_env
    for port in "${port_names[@]}"; do
      port=${port}_PORT
      ss -ltnH "sport = :${!port}" | grep -q . && left+=" ${!port}"
    done
    [ -z "$left" ] || log "warning: something still listens on port(s)$left"
  fi
  # keep the logs for a post-mortem; the next `up` starts from nothing anyway
  find "$state" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
  log "stopped in $((SECONDS - start))s; logs kept in $state/logs"
}

component_ports() {
  case $1 in
  epmd) echo "$EPMD_PORT" ;;
  rabbitmq) echo "$AMQP_PORT $RABBIT_DIST_PORT" ;;
  mariadb) echo "unix:$state/run/mysqld.sock" ;;
  keystone) echo "$KEYSTONE_PORT" ;;
  placement) echo "$PLACEMENT_PORT" ;;
  glance-api) echo "$GLANCE_PORT" ;;
  neutron-api) echo "$NEUTRON_PORT" ;;
  nova-api) echo "$NOVA_PORT" ;;
  *) echo "-" ;;
  esac
}

# Resident and proportional (shared pages split between sharers) memory of a process, in KiB.
memory_of() { awk '/^Rss:/ {r=$2} /^Pss:/ {p=$2} END {print r+0, p+0}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0 0; }

# Exit status 0 when the cloud runs and answers, 3 when it does not (as LSB init scripts do).
cmd_status() {
  if [ ! -f "$state/cloud.env" ]; then
    echo "local cloud '$name': not running (no state in $state)"
    return 3
  fi
  load_cloud_env
  local c pid p n rss pss mem total_rss=0 total_pss=0 total_n=0 word
  echo "local cloud '$name': $state"
  printf '  %-15s %-8s %-8s %5s %8s %8s  %s\n' COMPONENT PID STATE PROCS RSS_MiB PSS_MiB PORTS
  for c in "${components[@]}"; do
    pid=$(pid_of "$c")
    rss=0 pss=0 n=0 word=stopped
    if pid_alive "$pid"; then
      word=running
      for p in $(session_pids "$pid"); do
        read -r -a mem <<<"$(memory_of "$p")"
        rss=$((rss + mem[0])) pss=$((pss + mem[1])) n=$((n + 1))
      done
    fi
    total_rss=$((total_rss + rss)) total_pss=$((total_pss + pss)) total_n=$((total_n + n))
    printf '  %-15s %-8s %-8s %5s %8s %8s  %s\n' "$c" "${pid:--}" "$word" "$n" "$((rss / 1024))" \
      "$((pss / 1024))" "$(component_ports "$c")"
  done
  echo "  total: $total_n processes, $((total_rss / 1024)) MiB RSS, $((total_pss / 1024)) MiB PSS"
  echo "  versions: $("$venv/bin/python" -P -c '
from importlib.metadata import version
print(", ".join(f"{p} {version(p)}" for p in
      ("nova", "keystone", "openstack-placement", "glance", "neutron", "openstacksdk")))' 2>/dev/null || echo "?"),"
  echo "            mariadb $(dpkg-query -W -f='${Version}' mariadb-server 2>/dev/null || echo '?')," \
    "rabbitmq $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '?')"
  echo "  virtualenv: $venv"
  echo "  clouds.yaml: $state/clouds.yaml (clouds: local = user demo in project demo, local-admin = admin)"
  if running; then
    echo "  keystone answers: yes"
  else
    echo "  keystone answers: no"
    return 3
  fi
}

cmd_env() {
  [ -f "$state/clouds.yaml" ] || die "no cloud in $state; run: $0 up"
  echo "export OS_CLIENT_CONFIG_FILE=$state/clouds.yaml"
  echo "export OS_CLOUD=local"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
install) cmd_install ;;
*) die "usage: $0 up|down|status|env|install" ;;
esac
