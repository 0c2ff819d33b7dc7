#!/usr/bin/env bash
# A PostgreSQL primary and a streaming standby on this machine, from the
# machine's server binaries, for failover tests and trials:
#
#   scripts/pg-pair.sh start DIR [sync|async]   # both running; prints the URL
#   scripts/pg-pair.sh url DIR                   # the multi-host URL
#   scripts/pg-pair.sh promote DIR               # the primary killed, the standby promoted
#   scripts/pg-pair.sh stop DIR                  # both stopped (DIR is left to the caller)
#
# DIR must not exist yet (start creates it). Each server gets a free port on
# 127.0.0.1, trust authentication and its own socket directory inside DIR.
# `sync` makes every commit wait until the standby has it
# (synchronous_standby_names = '*', given on the primary's command line only,
# so the promoted standby does not wait for a standby of its own); `async`
# (the default) does not. `promote` is a failover, not a switch-over: the
# primary is stopped with `-m immediate` (no shutdown checkpoint, clients
# cut off), as a crash or a lost host would leave it, then the standby is
# promoted and waited for.
#
# The URL names both servers with target_session_attrs=read-write, so a
# client (libpq, tokio-postgres) connects to whichever of them accepts
# writes: the primary, and after `promote` the former standby.
#
# Run as root, it runs the server tools as the `postgres` user (initdb
# refuses root); otherwise as the caller. Needs python3 (to find free ports).
set -euo pipefail

usage() {
    sed -n '2,8p' "$0" >&2
    exit 2
}

bin_dir() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        if [[ -x "$d/initdb" ]]; then
            echo "$d"
            return
        fi
    done
    echo "pg-pair: no initdb under /usr/lib/postgresql/*/bin: install the PostgreSQL server" >&2
    exit 1
}

as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# pg_ctl for the server in DIR/NAME, on the port recorded for it.
ctl() {
    local dir=$1 name=$2
    shift 2
    local port
    port=$(cat "$dir/$name.port")
    as_pg "$BIN/pg_ctl" -D "$dir/$name" -l "$dir/$name.log" -w \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 ${EXTRA:-}" "$@"
}

url() {
    local dir=$1
    echo "postgres://postgres@127.0.0.1:$(cat "$dir/primary.port"),127.0.0.1:$(cat "$dir/standby.port")/postgres?target_session_attrs=read-write"
}

start() {
    local dir=$1 mode=${2:-async}
    case $mode in sync | async) ;; *) usage ;; esac
    if [[ -e $dir ]]; then
        echo "pg-pair: $dir exists; give a new directory" >&2
        exit 2
    fi
    mkdir -p "$dir"
    if [[ $(id -u) -eq 0 ]]; then chown postgres "$dir"; fi
    free_port >"$dir/primary.port"
    free_port >"$dir/standby.port"
    echo "$mode" >"$dir/mode"
    as_pg "$BIN/initdb" -D "$dir/primary" -A trust -U postgres >/dev/null
    if [[ $mode == sync ]]; then
        EXTRA="-c synchronous_standby_names=*" ctl "$dir" primary start >/dev/null
    else
        ctl "$dir" primary start >/dev/null
    fi
    as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$(cat "$dir/primary.port")" -U postgres \
        -D "$dir/standby" -R -X stream -c fast >/dev/null
    ctl "$dir" standby start >/dev/null
    # Streaming before the pair is handed out (and, in sync mode, the
    # standby counted as synchronous).
    local want=streaming i
    for i in $(seq 1 100); do
        if [[ $(as_pg "$BIN/psql" -h 127.0.0.1 -p "$(cat "$dir/primary.port")" -U postgres -Atqc \
            "SELECT state FROM pg_stat_replication LIMIT 1" postgres 2>/dev/null) == "$want" ]]; then
            url "$dir"
            return
        fi
        sleep 0.1
    done
    echo "pg-pair: the standby did not start streaming; see $dir/standby.log" >&2
    exit 1
}

promote() {
    local dir=$1
    ctl "$dir" primary -m immediate stop >/dev/null
    ctl "$dir" standby promote >/dev/null
}

stop() {
    local dir=$1 name
    for name in primary standby; do
        if [[ -f $dir/$name/postmaster.pid ]]; then
            ctl "$dir" "$name" -m immediate stop >/dev/null 2>&1 || true
        fi
    done
}

[[ $# -ge 2 ]] || usage
BIN=$(bin_dir)
case $1 in
start) start "$2" "${3:-async}" ;;
url) url "$2" ;;
promote) promote "$2" ;;
stop) stop "$2" ;;
*) usage ;;
esac
