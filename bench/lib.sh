# Shell helpers the bench scripts share (sourced, not run).

# A free local port of socket type $1 (SOCK_DGRAM or SOCK_STREAM) on 127.0.0.1.
port() { python3 -c 'import socket, sys; s=socket.socket(socket.AF_INET, getattr(socket, sys.argv[1])); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' "$1"; }

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
