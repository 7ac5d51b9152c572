# Real servers for the real-runtime suites (issue 23): PostgreSQL, MariaDB, Redis and RabbitMQ
# from their Debian packages (scripts/setup.sh test installs them), each started on loopback on
# a free port in a scratch folder, in parallel, once per run of a suite (before clr_suite runs
# it per runtime: the per-runtime runs inherit the addresses), and stopped when the suite
# exits. Source it, then:
#
#   . tests/clr/servers.sh
#   servers_start pg mysql redis rabbit     # only in the first call (no CLRMUX_TEST_RUNTIME)
#   clr_suite NAME "$@"
#   ... "$CLRMUX_PG_PORT" ...               # set for each server that runs
#
# Sets and exports, per server that started:
#   CLRMUX_PG_PORT       PostgreSQL: user postgres (trust), database clrmux
#   CLRMUX_MYSQL_PORT    MariaDB: user clrmux, password clrmux, database clrmux
#   CLRMUX_REDIS_PORT    Redis
#   CLRMUX_RABBIT_PORT   RabbitMQ (AMQP 0-9-1): guest/guest (loopback)
# and CLRMUX_SERVERS_MISSING: the ones that are not installed or did not start. Outside CI a
# missing one is said loudly (the checks that need it are skipped); under CI=true it is an
# error (servers_start returns 1). Logs: $CLRMUX_SERVERS_DIR/NAME.log.

_srv_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# _srv_wait SECONDS COMMAND...: runs the command every 0.2 s until it succeeds
_srv_wait() {
    local t=$1 i
    shift
    for ((i = 0; i < t * 5; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}

_srv_pg() {
    local d=$CLRMUX_SERVERS_DIR/pg port=$1 bin
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [ -x "$bin/initdb" ] || { echo "postgresql is not installed"; return 1; }
    mkdir -p "$d" && chown postgres "$d" 2>/dev/null
    # postgres refuses to run as root: the Debian package's own user runs it
    local as=()
    [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
    "${as[@]}" "$bin/initdb" -D "$d/data" -U postgres -A trust --no-sync -E UTF8 >"$d.log" 2>&1 || return 1
    "${as[@]}" "$bin/pg_ctl" -D "$d/data" -l "$d/server.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $port \
        -c unix_socket_directories=$d -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start \
        >>"$d.log" 2>&1
    local rc=$?
    cat "$d/server.log" >>"$d.log" 2>/dev/null
    echo "${as[*]} $bin/pg_ctl -D $d/data -m immediate stop" >"$d.stop"
    [ $rc = 0 ] || return 1
    "${as[@]}" "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -c "CREATE DATABASE clrmux" >>"$d.log" 2>&1
}

_srv_mysql() {
    local d=$CLRMUX_SERVERS_DIR/mysql port=$1
    command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null || { echo "mariadb-server is not installed"; return 1; }
    mkdir -p "$d"
    mariadb-install-db --no-defaults --datadir="$d/data" --user="$(id -un)" --auth-root-authentication-method=normal \
        --skip-test-db >"$d.log" 2>&1 || return 1
    mariadbd --no-defaults --datadir="$d/data" --user="$(id -un)" --bind-address=127.0.0.1 --port="$port" \
        --socket="$d/sock" --pid-file="$d/pid" --skip-log-bin --innodb-flush-log-at-trx-commit=0 \
        --innodb-buffer-pool-size=32M --skip-name-resolve >>"$d.log" 2>&1 &
    echo "kill -TERM $! 2>/dev/null" >"$d.stop"
    _srv_wait 60 mariadb --no-defaults -S "$d/sock" -uroot -e "SELECT 1" || return 1
    mariadb --no-defaults -S "$d/sock" -uroot -e "CREATE DATABASE clrmux; CREATE USER clrmux@'%' IDENTIFIED BY 'clrmux';
        GRANT ALL ON *.* TO clrmux@'%'; FLUSH PRIVILEGES;" >>"$d.log" 2>&1
}

_srv_redis() {
    local d=$CLRMUX_SERVERS_DIR/redis port=$1
    command -v redis-server >/dev/null || { echo "redis-server is not installed"; return 1; }
    mkdir -p "$d"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$d" --save "" --appendonly no --daemonize no \
        >"$d.log" 2>&1 &
    echo "kill -TERM $! 2>/dev/null" >"$d.stop"
    _srv_wait 20 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && printf 'PING\r\n' >&3 && head -c5 <&3 | grep -q PONG"
}

_srv_rabbit() {
    local d=$CLRMUX_SERVERS_DIR/rabbit port=$1 dist epmd
    # the package's own scripts (/usr/lib/rabbitmq/bin), not /usr/sbin's wrappers, which switch to
    # the rabbitmq user and its /var/lib folder
    local rb=/usr/lib/rabbitmq/bin
    [ -x $rb/rabbitmq-server ] || { echo "rabbitmq-server is not installed"; return 1; }
    dist=$(_srv_port)
    epmd=$(_srv_port)
    mkdir -p "$d/home"
    # its own epmd port and node name: another run's broker on this machine is another cluster
    cat >"$d/env" <<EOF
export HOME=$d/home RABBITMQ_NODENAME=clrmux$port@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
export RABBITMQ_NODE_PORT=$port RABBITMQ_DIST_PORT=$dist ERL_EPMD_PORT=$epmd ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_LOG_BASE=$d/log RABBITMQ_CONFIG_FILE=$d/rabbitmq
export RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins RABBITMQ_PID_FILE=$d/pid
EOF
    echo "[]." >"$d/enabled_plugins"
    printf 'listeners.tcp.default = %s\nloopback_users = none\n' "$port" >"$d/rabbitmq.conf"
    # shellcheck disable=SC1091
    (. "$d/env" && exec $rb/rabbitmq-server) </dev/null >"$d.log" 2>&1 &
    echo ". $d/env; $rb/rabbitmqctl -q stop >/dev/null 2>&1 || kill -TERM $! 2>/dev/null; epmd -kill >/dev/null 2>&1" >"$d.stop"
    _srv_wait 90 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" || return 1
    # the port answers before the broker takes connections: wait for its boot to finish
    (. "$d/env" && _srv_wait 60 $rb/rabbitmqctl -q await_startup)
}

# servers_stop: stops every server that servers_start started (its EXIT trap calls it)
servers_stop() {
    [ -n "${CLRMUX_SERVERS_DIR:-}" ] && [ -d "$CLRMUX_SERVERS_DIR" ] || return 0
    local s
    for s in "$CLRMUX_SERVERS_DIR"/*.stop; do
        [ -f "$s" ] && bash "$s" >/dev/null 2>&1
    done
    wait 2>/dev/null
    [ -n "${CLRMUX_SERVERS_KEEP:-}" ] || rm -rf "$CLRMUX_SERVERS_DIR"
}

servers_start() {
    [ -n "${CLRMUX_TEST_RUNTIME:-}" ] && return 0 # a per-runtime run: the first call started them
    CLRMUX_SERVERS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-servers.XXXXXX")
    chmod 755 "$CLRMUX_SERVERS_DIR"
    export CLRMUX_SERVERS_DIR
    trap servers_stop EXIT
    local name port pids=() names=() ports=() i rc=0 t0=$SECONDS
    CLRMUX_SERVERS_MISSING=""
    for name in "$@"; do
        port=$(_srv_port)
        ("_srv_$name" "$port" >"$CLRMUX_SERVERS_DIR/$name.why" 2>&1) &
        pids+=($!)
        names+=("$name")
        ports+=("$port")
    done
    for i in "${!pids[@]}"; do
        name=${names[$i]}
        if wait "${pids[$i]}"; then
            case $name in
            pg) export CLRMUX_PG_PORT=${ports[$i]} ;;
            mysql) export CLRMUX_MYSQL_PORT=${ports[$i]} ;;
            redis) export CLRMUX_REDIS_PORT=${ports[$i]} ;;
            rabbit) export CLRMUX_RABBIT_PORT=${ports[$i]} ;;
            esac
        else
            CLRMUX_SERVERS_MISSING+=" $name"
            echo "##########################################################################"
            echo "## server '$name' did not start: the checks that need it do NOT run"
            sed 's/^/## /' "$CLRMUX_SERVERS_DIR/$name.why" | head -5
            tail -5 "$CLRMUX_SERVERS_DIR/$name.log" 2>/dev/null | sed 's/^/## log: /'
            echo "##########################################################################"
            [ "${CI:-}" = true ] && rc=1
        fi
    done
    export CLRMUX_SERVERS_MISSING
    echo "servers: started${CLRMUX_PG_PORT:+ postgresql:$CLRMUX_PG_PORT}${CLRMUX_MYSQL_PORT:+ mariadb:$CLRMUX_MYSQL_PORT}${CLRMUX_REDIS_PORT:+ redis:$CLRMUX_REDIS_PORT}${CLRMUX_RABBIT_PORT:+ rabbitmq:$CLRMUX_RABBIT_PORT} in $((SECONDS - t0)) s"
    return $rc
}
