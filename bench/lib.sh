# Shell helpers the bench scripts share (sourced, not run).

# A free local port of socket type $1 (SOCK_DGRAM or SOCK_STREAM) on 127.0.0.1.
port() { python3 -c 'import socket, sys; s=socket.socket(socket.AF_INET, getattr(socket, sys.argv[1])); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' "$1"; }

# Stop our own child $1 (if any): SIGTERM, then wait for it.
stop_pid() { [[ -n ${1:-} ]] || return 0; kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# Talk VSI-S to a jive5ab on 127.0.0.1 TCP port $1: one command per further argument, each
# printed with its reply (waits up to 10 s for the port to open).
vsi() {
    python3 - "$@" <<'PY'
import socket, sys, time
for _ in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
        break
    except OSError:
        time.sleep(0.1)
f = s.makefile("rwb")
for c in sys.argv[2:]:
    f.write((c + "\n").encode()); f.flush()
    print(c, "→", f.readline().decode().strip(), flush=True)
PY
}

# Start `evlbi linkemu` between the namespaces $NS_A and $NS_B with further linkemu options "$@"
# (summary JSON to $WORK/emu.json, log to $WORK/emu.log; its PID in EMU_PID), wait (≤ 5 s) for
# side B's address, and give both namespaces TCP buffers for a 12.5 MB BDP (per-namespace sysctls).
linkemu_start() {
    "$EVLBI" linkemu --a "ns:$NS_A" --b "ns:$NS_B" --quiet --json --state-dir "$WORK/state" "$@" \
        >"$WORK/emu.json" 2>"$WORK/emu.log" &
    EMU_PID=$!
    for _ in $(seq 100); do
        ip -n "$NS_B" addr show dev lkemu-b 2>/dev/null | grep -q 10.77.0.2 && break
        sleep 0.05
    done
    for ns in "$NS_A" "$NS_B"; do
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_rmem="4096 131072 67108864" \
            net.ipv4.tcp_wmem="4096 131072 67108864"
    done
}

# CPU time of process $1 and of its children it has reaped, in clock ticks (utime stime cutime
# cstime, /proc/PID/stat fields 14-17): a recorder's own threads and its finished writer processes.
cpu_ticks_all() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
    stat=${stat##*) }
    awk '{print $12 + $13 + $14 + $15}' <<<"$stat"
}
