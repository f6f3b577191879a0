#!/usr/bin/env python3
"""TCP file transfer peer for bench/transfer.sh: one file, or a tar stream of a directory, over
one TCP connection with the congestion control asked for (bbr), verified end to end the way a
careful operator would do it by hand: BLAKE2b of the bytes as the sender reads them and as the
receiver writes them, the receiver's digest sent back on the same connection, compared by the
sender. Wall time on the sender runs from connect() to the verdict, like evlbi send's.

  tcp_file.py recv PORT OUT [--tar]          # OUT: a file, or with --tar a directory to extract into
  tcp_file.py send HOST PORT SRC [--tar] [--cc bbr] [--per-file]
       --tar:      SRC is a directory, sent as `tar cf - -C SRC .` and extracted with `tar xf -`
       --per-file: one connection per file of the directory SRC (etransfer-style); the receiver
                   runs with --per-file too and takes one connection per file until the sender
                   says it is done
Prints one JSON line: {"seconds": wall, "bytes": n, "ok": digests equal}.
"""
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import time

BUF = 4 << 20


def tune(s, cc):
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def recv_exact(s, n):
    b = bytearray()
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("connection closed")
        b += c
    return bytes(b)


def serve_one(conn, out, tar):
    """Receive one stream (bytes until the sender's half-close) into `out`; reply with its digest."""
    h = hashlib.blake2b()
    if tar:
        p = subprocess.Popen(["tar", "xf", "-", "-C", out], stdin=subprocess.PIPE)
        sink = p.stdin
    else:
        sink = open(out, "wb")
    got = 0
    while True:
        c = conn.recv(BUF)
        if not c:
            break
        h.update(c)
        sink.write(c)
        got += len(c)
    sink.close()
    if tar and p.wait() != 0:
        raise RuntimeError("tar failed")
    conn.sendall(h.digest())
    return got


def recv(port, out, tar, per_file, cc):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tune(ls, cc)
    ls.bind(("0.0.0.0", port))
    ls.listen(16)
    total = 0
    while True:
        conn, _ = ls.accept()
        name = recv_exact(conn, struct.unpack(">H", recv_exact(conn, 2))[0]).decode() if per_file else ""
        if per_file and name == "":
            conn.close()
            break
        dst = os.path.join(out, name) if per_file else out
        if per_file:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
        total += serve_one(conn, dst, tar)
        conn.close()
        if not per_file:
            break
    print(json.dumps({"bytes": total}))


def send_stream(host, port, cc, name, chunks):
    """One connection: [name], the bytes, half-close; returns (bytes, receiver's digest matches)."""
    h = hashlib.blake2b()
    s = socket.create_connection((host, port))
    tune(s, cc)
    if name is not None:
        nb = name.encode()
        s.sendall(struct.pack(">H", len(nb)) + nb)
    n = 0
    for c in chunks:
        h.update(c)
        s.sendall(c)
        n += len(c)
    s.shutdown(socket.SHUT_WR)
    theirs = recv_exact(s, h.digest_size)
    s.close()
    return n, theirs == h.digest()


def file_chunks(path):
    with open(path, "rb") as f:
        while True:
            c = f.read(BUF)
            if not c:
                return
            yield c


def tar_chunks(src):
    """`tar cf - -C src .` streamed as it is produced (tar's reading is part of the transfer)."""
    p = subprocess.Popen(["tar", "cf", "-", "-C", src, "."], stdout=subprocess.PIPE)
    while True:
        c = p.stdout.read(BUF)
        if not c:
            break
        yield c
    if p.wait() != 0:
        raise RuntimeError("tar failed")


def send(host, port, src, tar, per_file, cc):
    t0 = time.monotonic()
    ok = True
    total = 0
    if per_file:
        for root, _, files in sorted(os.walk(src)):
            for f in sorted(files):
                p = os.path.join(root, f)
                n, good = send_stream(host, port, cc, os.path.relpath(p, src), file_chunks(p))
                ok &= good
                total += n
        s = socket.create_connection((host, port))
        s.sendall(struct.pack(">H", 0))
        s.close()
    else:
        total, ok = send_stream(host, port, cc, None, tar_chunks(src) if tar else file_chunks(src))
    print(json.dumps({"seconds": time.monotonic() - t0, "bytes": total, "ok": ok}))


def main():
    a = sys.argv[1:]
    flag = lambda f: f in a and (a.remove(f) or True)
    tar, per_file = flag("--tar"), flag("--per-file")
    cc = "bbr"
    if "--cc" in a:
        i = a.index("--cc")
        cc = a[i + 1]
        del a[i : i + 2]
    if a[0] == "recv":
        recv(int(a[1]), a[2], tar, per_file, cc)
    else:
        send(a[1], int(a[2]), a[3], tar, per_file, cc)


if __name__ == "__main__":
    main()
