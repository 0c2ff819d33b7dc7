#!/usr/bin/env bash
# A PostgreSQL primary and a streaming standby on this machine, from the
# machine's server binaries, for failover tests and trials:
#
#   scripts/pg-pair.sh start DIR [sync|async]   # both running; prints the URL
#   scripts/pg-pair.sh url DIR                   # the multi-host URL
#   scripts/pg-pair.sh promote DIR [LAG_MS]      # the primary killed, the standby promoted
#   scripts/pg-pair.sh rejoin DIR                # the old primary rebuilt as the new one's standby
#   scripts/pg-pair.sh stop DIR                  # both stopped (DIR is left to the caller)
#
# DIR must not exist yet (start creates it). Each server gets a free port on
# 127.0.0.1, trust authentication and its own socket directory inside DIR;
# they live in DIR/a and DIR/b, DIR/primary names the one taking writes, and
# the URL stays the same throughout.
#
# `sync` makes every commit wait until the standby has it
# (synchronous_standby_names = '*', set on the primary by ALTER SYSTEM once
# its standby streams, so no base backup carries it and a promoted standby
# does not wait for a standby of its own); `async` (the default) does not.
#
# `promote` is a failover, not a switch-over: the primary is stopped with
# `-m immediate` (no shutdown checkpoint, clients cut off), as a crash or a
# lost host would leave it, then the standby is promoted and waited for.
# With LAG_MS the standby stops receiving (the primary's WAL sender
# SIGSTOPped) for that long before the kill: in async mode the primary's last commits die
# with it, as with a standby that fell behind; in sync mode those commits
# wait, and their clients see the connection break instead. The promoted
# server commits without waiting (it has no standby) until `rejoin`
# rebuilds the killed one as its standby (a fresh base backup, its old
# port), after which the pair can fail over again.
#
# The URL names both servers with target_session_attrs=read-write, so a
# client (libpq, tokio-postgres) connects to whichever of them accepts
# writes: the primary, and after `promote` the former standby.
#
# Run as root, it runs the server tools as the `postgres` user (initdb
# refuses root); otherwise as the caller. Needs python3 (to find free ports).
set -euo pipefail

usage() {
    sed -n '2,9p' "$0" >&2
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

# The servers live in DIR/a and DIR/b; DIR/primary names the one that takes
# writes (directories are never renamed under a running server).
primary_of() { cat "$1/primary"; }
standby_of() { if [[ $(primary_of "$1") == a ]]; then echo b; else echo a; fi; }

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
    echo "postgres://postgres@127.0.0.1:$(cat "$dir/a.port"),127.0.0.1:$(cat "$dir/b.port")/postgres?target_session_attrs=read-write"
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
    free_port >"$dir/a.port"
    free_port >"$dir/b.port"
    echo "$mode" >"$dir/mode"
    echo a >"$dir/primary"
    as_pg "$BIN/initdb" -D "$dir/a" -A trust -U postgres >/dev/null
    ctl "$dir" a start >/dev/null
    as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$(cat "$dir/a.port")" -U postgres \
        -D "$dir/b" -R -X stream -c fast >/dev/null
    ctl "$dir" b start >/dev/null
    # Streaming before the pair is handed out.
    await_streaming "$dir"
    if [[ $mode == sync ]]; then
        synchronous "$dir" "'*'"
    fi
    url "$dir"
}

# psql on the server in DIR/NAME.
sql() {
    local dir=$1 name=$2
    as_pg "$BIN/psql" -h 127.0.0.1 -p "$(cat "$dir/$name.port")" -U postgres -Atqc "$3" postgres
}

# Sets the primary's synchronous_standby_names (ALTER SYSTEM: it stays
# with the server, not on its command line) and reloads.
synchronous() {
    local dir=$1 p
    p=$(primary_of "$dir")
    sql "$dir" "$p" "ALTER SYSTEM SET synchronous_standby_names = $2" >/dev/null
    sql "$dir" "$p" "SELECT pg_reload_conf()" >/dev/null
}

# Waits until the primary has a standby streaming.
await_streaming() {
    local dir=$1 i
    for i in $(seq 1 100); do
        if [[ $(sql "$dir" "$(primary_of "$dir")" "SELECT state FROM pg_stat_replication LIMIT 1" 2>/dev/null) == streaming ]]; then
            return
        fi
        sleep 0.1
    done
    echo "pg-pair: the standby did not start streaming; see $dir/$(standby_of "$dir").log" >&2
    exit 1
}

promote() {
    local dir=$1 lag=${2:-0} old new sender
    old=$(primary_of "$dir")
    new=$(standby_of "$dir")
    if [[ $lag -gt 0 ]]; then
        # The primary's WAL sender stopped, then killed before it runs
        # again: what was committed meanwhile never leaves the primary.
        # (Stopping the standby's receiver instead would not do: the
        # kernel goes on taking the stream into its socket buffer.)
        sender=$(sql "$dir" "$old" "SELECT pid FROM pg_stat_replication")
        kill -STOP "$sender"
        sleep "$(awk "BEGIN {print $lag / 1000}")"
        kill -KILL "$sender"
    fi
    ctl "$dir" "$old" -m immediate stop >/dev/null
    ctl "$dir" "$new" promote >/dev/null
    echo "$new" >"$dir/primary"
}

rejoin() {
    local dir=$1 old
    old=$(standby_of "$dir")
    if [[ -f $dir/$old/postmaster.pid ]] && sql "$dir" "$old" "SELECT 1" >/dev/null 2>&1; then
        echo "pg-pair: both servers run: promote before rejoin" >&2
        exit 2
    fi
    rm -rf "${dir:?}/$old"
    as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$(cat "$dir/$(primary_of "$dir").port")" -U postgres \
        -D "$dir/$old" -R -X stream -c fast >/dev/null
    ctl "$dir" "$old" start >/dev/null
    await_streaming "$dir"
    if [[ $(cat "$dir/mode") == sync ]]; then
        synchronous "$dir" "'*'"
    fi
}

stop() {
    local dir=$1 name
    for name in a b; do
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
promote) promote "$2" "${3:-0}" ;;
rejoin) rejoin "$2" ;;
stop) stop "$2" ;;
*) usage ;;
esac
