#!/usr/bin/env python3
"""Replay the NASA Field System's FlexBuff session against a VSI-S daemon, as the FS's mk5cn does.

Reads crates/cli/tests/data/fs_flexbuff_session.txt (format in its header), sends each request on
one TCP connection (one send per request: the line + "\\n", or "\\n " where the line ends in
{nl_space}), reads the reply up to its newline, and judges it the way the FS does:

  - return code (mk5cn/mk5cn.c:696-728): the first '=' before the first ':', else the first '?'
    before the first ':', else the first ' '; an integer after it. 0 or 1 is success; any other
    value is FS error "m5 -90<rc>" and the rest of that command's batch is dropped; no integer is
    "m5 -899". A reply longer than 1022 bytes without a newline is "m5 -109"; none within the
    time-out is "m5 -104" (the FS then closes the connection; here it counts and reconnects).
  - the fields the FS decodes from query replies (scan_check?, record?, status?, error?, mode?,
    disk2file?, and data_check? as a Mark 5C station decodes it) with the FS's checks, e.g. scan_check's "5k -601"
    when the data type is "?" or missing and "5k 602" when missing bytes are not 0 on a FlexBuff.

Prints the transcript (step comments, "> request", "< reply") and a summary. Standard library only.

  bench/fs_session.py 127.0.0.1:2620 --set disks="/dev/shm/x/disk0 : /dev/shm/x/disk1" \\
      --set dest1=/tmp/scan1.m5a --data-cmd "evlbi stream send --generate ... --to 127.0.0.1:{data_port}"
  bench/fs_session.py --diff A.txt B.txt      compare two transcripts, request by request
"""
import argparse
import datetime
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SCRIPT = REPO / "crates/cli/tests/data/fs_flexbuff_session.txt"

# mk5cn adds these centiseconds to mk5ad.ctl's time-out when the request contains the string
# (mk5cn/mk5cn.c:511-530, 641-646).
EXTRA_TIMEOUT_CS = [
    ("scan_set=", 500), ("scan_set =", 500), ("record on", 26), ("record=on", 26),
    ("record = on", 26), ("record off", 400), ("record=off", 400), ("record = off", 400),
    ("play on", 300), ("play=on", 300), ("play = on", 300), ("data_check?", 189),
    ("track_check?", 189), ("scan_check?", 327), ("bank_set inc", 500), ("bank_set=inc", 500),
    ("bank_set = inc", 500),
]
MAX_REPLY = 1022  # read_response stops at BUFSIZE-2 characters (mk5cn/mk5cn.c:67, 867)
PLACEHOLDERS = ("mbps channels bits sockbuf nwriters disks data_port label1 label2 label3 "
                "scan_seconds dest1 dest2 dest_check net2file_path").split()  # plus any --set NAME


def defaults(mbps):
    """The FS's derived values (quikv/mk5b_mode.c:161-175) for a total rate in Mb/s."""
    rate = mbps * 1_000_000
    if rate <= 1_000_000_000:
        sockbuf = 32000000
    elif rate <= 4_000_000_000:
        sockbuf = 64000000
    else:
        sockbuf = 128000000
    return {"sockbuf": str(sockbuf), "nwriters": str(max(rate // 6_000_000_000 + 1, 2))}


def fs_return_code(reply):
    """The FS's return-code rule (mk5cn.c:696-706). None when it finds no integer (-899)."""
    colon = reply.find(":")
    for ch in "=? ":
        pos = reply.find(ch)
        if pos >= 0 and (colon < 0 or pos < colon):
            m = re.match(r"\s*([+-]?\d+)", reply[pos + 1:])
            return int(m.group(1)) if m else None
    return None


def reply_fields(reply):
    """The fields after the return code of any reply ('!kw? rc : a : b ;' or '!kw= rc : a ;'),
    found where the FS finds the return code (mk5cn.c:696-703); [] when there are none."""
    colon = reply.find(":")
    for ch in "=? ":
        pos = reply.find(ch)
        if pos >= 0 and (colon < 0 or pos < colon):
            m = re.match(r"\s*[+-]?\d+\s*", reply[pos + 1:])
            if not m:
                return []
            rest = reply[pos + 1 + m.end():]
            if not rest.startswith(":"):
                return []
            rest = rest[1:].split(";")[0]
            return [f.strip(" ") for f in rest.split(":")]
    return []


def query_fields(reply):
    """Fields after the return code as the FS's m5_2_* decoders split them: from the first ':'
    after the first '?', cut at the first ';', split at every ':', blanks trimmed."""
    q = reply.find("?")
    if q < 0:
        return None
    c = reply.find(":", q + 1)
    if c < 0:
        return []
    body = reply[c + 1:]
    semi = body.find(";")
    if semi >= 0:
        body = body[:semi]
    return [f.strip(" ") for f in body.split(":")]


NUM = r"\s*[+-]?\d+"
FLT = r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?"
# m5time_decode (clib/m5_utils.c:133-203) picks the sscanf form by the letters present and needs
# all its conversions; like sscanf, what follows the last conversion is not checked.
TIME_RE = [
    ("y", NUM + "y" + NUM + "d" + NUM + "h" + NUM + "m" + FLT), ("d", NUM + "d" + NUM + "h" + NUM + "m" + FLT),
    ("h", NUM + "h" + NUM + "m" + FLT), ("m", NUM + "m" + FLT), ("s", FLT),
]


def fs_time_ok(text):
    if text in ("", "?"):
        return True
    for letter, rx in TIME_RE:
        if letter in text:
            return re.match(rx, text) is not None
    return False


def fs_number_ok(text, kind):
    """m5sscanf (clib/m5_utils.c:105-132): blank and '?' are 'unknown', else sscanf must convert."""
    if text in ("", "?"):
        return True
    rx = {"d": r"[+-]?\d", "f": r"[+-]?(\d|\.\d)", "x": r"[+-]?(0[xX])?[0-9a-fA-F]"}[kind]
    return re.match(rx, text) is not None


def fs_decode(request, reply):
    """What the FS logs when it decodes this reply (besides the return code): a list of
    (code, text). Mirrors the decoders named in docs/fs-flexbuff-session.md."""
    out = []
    req = request.strip()
    f = query_fields(reply) if "?" in reply else None
    if req == "scan_check?" and f is not None:  # clib/scan_check_util.c:113-280, quikv/scan_check_dis.c:103-140
        checks = [(0, "d", -501), (3, "d", -514), (6, "f", -517), (7, "d", -508)]
        for i, kind, code in checks:
            if i < len(f) and not fs_number_ok(f[i], kind):
                out.append((f"5k {code}", f"field {i + 1} {f[i]!r} does not decode"))
        for i in (4, 5):
            if i < len(f) and not fs_time_ok(f[i]):
                out.append((f"5k {-501 - i}", f"field {i + 1} {f[i]!r} is not a time"))
        dtype = f[2] if len(f) > 2 else ""
        if dtype in ("", "?") or dtype.endswith(" ?"):
            out.append(("5k -601", "SCAN_CHECK failed (data type field 3 is blank or '?')"))
        else:
            missing = f[7] if len(f) > 7 else ""
            if missing in ("", "?") or missing.endswith(" ?") or not re.match(r"[+-]?0+$", missing):
                out.append(("5k 602", f"warning: missing bytes {missing!r} not zero (FlexBuff)"))
    elif req == "status?":  # clib/mk5_status_util.c:151-186
        m = re.search(r"\?[^:]*:\s*(0[xX])?([0-9a-fA-F]+)([ :]|$)", reply.rstrip("\n"))
        if not m:
            out.append(("5h -901", "error decoding status word"))
    elif req == "error?":  # clib/mk5_status_util.c:188-227
        q = reply.find("?")
        if q < 0 or reply.find(":", q + 1) < 0 or reply.find(";", reply.find(":", q + 1)) < 0:
            out.append(("5h -910", "error? reply has no ': ... ;'"))
    elif req.startswith("record?") and f is not None:  # clib/disk_record_util.c:173-250
        if len(f) > 1 and not fs_number_ok(f[1], "d"):
            out.append(("5r -502", f"scan number {f[1]!r} does not decode"))
    elif req == "mode?" and f is not None:  # clib/mk5b_mode_util.c:474-602
        if len(f) > 2 and not fs_number_ok(f[2], "d"):
            out.append(("5t -513", f"tracks {f[2]!r} does not decode"))
        if len(f) > 3 and not fs_number_ok(f[3], "f"):
            out.append(("5t -514", f"track bit rate {f[3]!r} does not decode"))
        if len(f) > 4 and f[0].upper().startswith("VDIF") and not fs_number_ok(f[4], "d"):
            out.append(("5t -505", f"frame size {f[4]!r} does not decode"))
    elif req == "disk2file?" and f is not None:  # clib/disk2file_util.c:217-333
        for i, code in ((2, -503), (3, -504), (4, -505)):
            if i < len(f) and not fs_number_ok(f[i], "d"):
                out.append((f"5f {code}", f"field {i + 1} {f[i]!r} does not decode"))
    elif req == "data_check?" and f is not None:  # Mark 5C decoding, clib/data_check_util.c:153-370
        if len(f) > 0 and (f[0] in ("", "?") or f[0].endswith(" ?")):
            out.append(("5d -601", "data_check failed (source field 1 blank or '?')"))
        for i, kind, code in ((2, "d", -513), (3, "d", -514), (5, "f", -516), (6, "d", -517), (7, "d", -518)):
            if i < len(f) and not fs_number_ok(f[i], kind):
                out.append((f"5d {code}", f"field {i + 1} {f[i]!r} does not decode"))
        for i, code in ((1, -512), (4, -515)):
            if i < len(f) and not fs_time_ok(f[i]):
                out.append((f"5d {code}", f"field {i + 1} {f[i]!r} is not a time"))
    return out


def parse_script(path):
    """Yields items: ('step', text, nocheck) ('req', line, nl_space) ('dir', words)."""
    items = []
    for raw in Path(path).read_text().split("\n"):
        if raw.startswith("#!"):
            items.append(("dir", raw[2:].split()))
        elif raw.startswith("# step:"):
            items.append(("step", raw[len("# step:"):].strip(), "[nocheck]" in raw))
        elif raw.startswith("#") or raw.strip() == "":
            continue
        else:
            nl_space = raw.endswith("{nl_space}")
            items.append(("req", raw[: -len("{nl_space}")] if nl_space else raw, nl_space))
    return items


def fill(line, values, marks):
    def when(m):
        base = marks.get(m.group(2))
        if base is None:
            raise SystemExit(f"no mark {m.group(2)!r} before {line!r}")
        t = base + datetime.timedelta(seconds=float(m.group(3)))
        # drudg: i2.2 hours and minutes, f5.2 seconds, blanks squeezed out (drudg/snap.f:1243)
        hms = f"{t.hour:02d}h{t.minute:02d}m{t.second + t.microsecond / 1e6:.2f}s"
        if m.group(1) == "vex":  # full VEX time, as jive5ab prints scan_check's start
            return f"{t.year:04d}y{t.timetuple().tm_yday:03d}d" + hms
        return hms

    # {recN+Xs}: time of day of mark recN + X s; {vex:recN+Xs}: the same with year and day
    line = re.sub(r"\{(?:(vex):)?(\w+)\+([\d.]+)s\}", when, line)
    for name, value in values.items():
        line = line.replace("{" + name + "}", value)
    return line


class Conn:
    def __init__(self, host, port, base_timeout_cs):
        self.addr = (host, port)
        self.base = base_timeout_cs
        self.sock = None
        self.buf = b""

    def open(self):
        self.sock = socket.create_connection(self.addr, timeout=max(self.base, 200) / 100)
        self.buf = b""

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None

    def exchange(self, data):
        """Send one request; return (reply text, error) like mk5cn's read_response."""
        if self.sock is None:
            self.open()
        # mk5cn drains whatever the last reply left before each send (mk5cn.c:600-617, 933-955)
        self.buf = b""
        self.sock.setblocking(False)
        try:
            while self.sock.recv(65536):
                pass
        except BlockingIOError:
            pass
        self.sock.setblocking(True)
        self.sock.sendall(data)
        text = data.decode(errors="replace")
        timeout = self.base + sum(cs for s, cs in EXTRA_TIMEOUT_CS if s in text)
        deadline = time.monotonic() + timeout / 100
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_REPLY:
                self.close()
                return self.buf[:MAX_REPLY].decode(errors="replace"), "m5 -109 reply longer than 1022 bytes"
            left = deadline - time.monotonic()
            if left <= 0:
                partial = self.buf.decode(errors="replace")
                self.close()
                return partial, f"m5 -104 no newline within {timeout / 100:.2f} s"
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                partial = self.buf.decode(errors="replace")
                self.close()
                return partial, "m5 -107 connection closed"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode(errors="replace"), None


def status_word(reply):
    m = re.search(r"\?[^:]*:\s*(0[xX])?([0-9a-fA-F]+)", reply)
    return int(m.group(2), 16) if m else 0


def run(args):
    values = {"mbps": "512", "channels": "8", "bits": "2", "disks": "/mnt/disk0 : /mnt/disk1",
              "data_port": "2630", "label1": "ev9999_ef_no0001", "label2": "ev9999_ef_no0002",
              "label3": "ev9999_ef_no0003", "scan_seconds": "10", "dest1": "/tmp/ev9999_ef_no0001.m5a",
              "dest2": "/tmp/ev9999_ef_no0002.m5a", "dest_check": "/tmp/fs_check.vdif",
              "net2file_path": "/tmp/fs_net2file.vdif"}
    given = dict(kv.split("=", 1) for kv in args.set)
    values.update(defaults(int(given.get("mbps", values["mbps"]))))
    values.update(given)
    host, _, port = args.target.rpartition(":")
    conn = Conn(host or "127.0.0.1", int(port), args.timeout_cs)
    out = open(args.out, "w") if args.out else None

    def emit(s):
        print(s)
        if out:
            out.write(s + "\n")

    data_proc = None
    if args.data_cmd:
        cmd = fill(args.data_cmd, values, {})
        data_out = open(args.data_out, "wb") if args.data_out else subprocess.DEVNULL
        data_proc = subprocess.Popen(shlex.split(cmd), stdout=data_out, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        time.sleep(args.data_lead)

    records = []  # dicts: step, request, reply, rc, error, fs
    marks = {}
    items = parse_script(args.script)
    step, nocheck = "", False
    emit(f"# replay of {Path(args.script).name} against {args.target} at "
         f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    emit("# '> ' request as sent, without its final \"\\n\" (\"\\n \" where marked {nl_space}); "
         "'< ' reply as received, without its \"\\n\"")

    def one(line, nl_space, status_loop=False):
        data = (line + ("\n " if nl_space else "\n")).encode()
        sent = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        t0 = time.monotonic()
        reply, err = conn.exchange(data)
        took = time.monotonic() - t0
        rc = fs_return_code(reply) if err is None else None
        emit("> " + line + (" {nl_space}" if nl_space else ""))
        emit("< " + reply + (f"   [{err}]" if err else ""))
        # The FS decodes a reply's fields only after mk5cn accepted its return code.
        fs = fs_decode(line, reply) if err is None and rc in (0, 1) else []
        for code, text in fs:
            emit(f"#   FS would log {code}: {text}")
        if err is None and rc is None:
            emit("#   FS would log m5 -899: unable to find or decode return code")
        elif err is None and rc not in (0, 1) and not nocheck:
            emit(f"#   FS would log m5 -90{rc}" if 0 <= rc < 10 else f"#   FS would log m5 {-900 - rc}")
        records.append({"step": step, "request": line, "nl_space": nl_space, "reply": reply, "rc": rc,
                        "error": err, "nocheck": nocheck, "fs": [c for c, _ in fs], "sent": sent,
                        "seconds": round(took, 3)})
        if status_loop and err is None:
            n = 1
            while status_word(reply) & 0x2 and n < 11:
                e_reply, e_err = conn.exchange(b"error?\n")
                emit("> error?")
                emit("< " + e_reply + (f"   [{e_err}]" if e_err else ""))
                e_rc = fs_return_code(e_reply) if e_err is None else None
                e_fs = fs_decode("error?", e_reply) if e_rc in (0, 1) else []
                for code, text in e_fs:
                    emit(f"#   FS would log {code}: {text}")
                records.append({"step": step, "request": "error?", "nl_space": False, "reply": e_reply,
                                "rc": e_rc, "error": e_err, "nocheck": False, "fs": [c for c, _ in e_fs]})
                n += 1
                if e_err or n >= 11:
                    break
                reply, err = conn.exchange(b"status?\n")
                emit("> status?")
                emit("< " + reply + (f"   [{err}]" if err else ""))
                s_rc = fs_return_code(reply) if err is None else None
                records.append({"step": step, "request": "status?", "nl_space": False, "reply": reply,
                                "rc": s_rc, "error": err, "nocheck": False,
                                "fs": [c for c, _ in fs_decode("status?", reply)] if s_rc in (0, 1) else []})
                n += 1
                if err:
                    break
        return reply

    i = 0
    pending_status_loop = False
    try:
        while i < len(items):
            kind = items[i][0]
            if kind == "step":
                step, nocheck = items[i][1], items[i][2]
                emit("")
                emit("# step: " + step)
            elif kind == "dir":
                words = items[i][1]
                if words[0] == "sleep":
                    time.sleep(float(fill(words[1], values, marks)))
                elif words[0] == "mark":
                    marks[words[1]] = datetime.datetime.now(datetime.timezone.utc)
                elif words[0] == "status-loop":
                    pending_status_loop = True
                elif words[0] == "poll":
                    rx, every, most = re.compile(words[1]), float(words[3]), float(words[5])
                    group = []
                    i += 1
                    while not (items[i][0] == "dir" and items[i][1][0] == "group-end"):
                        group.append(items[i])
                        i += 1
                    t0 = time.monotonic()
                    while True:
                        replies = [one(fill(g[1], values, marks), g[2]) for g in group if g[0] == "req"]
                        # An operator stops polling once it is done, refused, or past the limit.
                        if (rx.search(replies[0]) or fs_return_code(replies[0]) not in (0, 1)
                                or time.monotonic() - t0 > most):
                            break
                        time.sleep(every)
            else:
                one(fill(items[i][1], values, marks), items[i][2], pending_status_loop)
                pending_status_loop = False
            i += 1
    finally:
        if data_proc:
            try:
                os.killpg(data_proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            data_proc.wait(timeout=10)
        conn.close()

    summary(records, emit)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
    if out:
        out.close()
    return 0


def summary(records, emit):
    refused = [r for r in records if r["error"] is None and r["rc"] not in (0, 1) and not r["nocheck"]]
    lost = [r for r in records if r["error"] is not None]
    fslog = [r for r in records if r["fs"]]
    emit("")
    emit(f"# summary: {len(records)} requests; {len(refused)} with rc not 0/1; {len(lost)} without a reply; "
         f"{len(fslog)} with FS decode errors/warnings")
    for r in refused:
        emit(f"#   rc {r['rc']}: {r['request']}   <- {r['reply']}")
    for r in lost:
        emit(f"#   {r['error']}: {r['request']}")
    for r in fslog:
        emit(f"#   {', '.join(r['fs'])}: {r['request']}   <- {r['reply']}")


def read_transcript(path):
    pairs, req = [], None
    for line in Path(path).read_text().split("\n"):
        if line.startswith("> "):
            req = line[2:]
        elif line.startswith("< ") and req is not None:
            pairs.append((req, line[2:]))
            req = None
    return pairs


def diff(a, b):
    """Request by request: rc and number of fields differing between two transcripts."""
    pa, pb = read_transcript(a), read_transcript(b)
    n = 0
    # Polled requests (a group of one or two: disk2file?, scan_set?) repeat a different number
    # of times per run; keep the first round of each poll.
    def squash(pairs):
        out, i = [], 0
        while i < len(pairs):
            for k in (2, 1):
                block = [p[0] for p in pairs[i:i + k]]
                if (len(block) == k and len(out) >= k and all(r in ("disk2file?", "scan_set?") for r in block)
                        and [p[0] for p in out[-k:]] == block):
                    i += k
                    break
            else:
                out.append(pairs[i])
                i += 1
        return out
    pa, pb = squash(pa), squash(pb)
    def keyword(req):  # the statement's keyword and '?'/'=': paths, ports and times differ per run
        m = re.match(r"\s*([A-Za-z0-9_]+)\s*([?=]?)", req)
        return m.group(1) + m.group(2) if m else req

    for (ra, xa), (rb, xb) in zip(pa, pb):
        if keyword(ra) != keyword(rb):
            print(f"request order differs: {ra!r} vs {rb!r}")
            return 1
        ca, cb = fs_return_code(xa), fs_return_code(xb)
        fa, fb = reply_fields(xa), reply_fields(xb)
        if ca != cb or len(fa) != len(fb):
            n += 1
            print(f"{ra}\n   A rc {ca} fields {len(fa)}: {xa}\n   B rc {cb} fields {len(fb)}: {xb}")
    if len(pa) != len(pb):
        print(f"transcripts differ in length: {len(pa)} vs {len(pb)}")
    print(f"# {n} requests differ in rc or field count")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="?", help="HOST:PORT of the VSI-S daemon")
    p.add_argument("--script", default=str(DEFAULT_SCRIPT))
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="placeholder value: " + " ".join(PLACEHOLDERS))
    p.add_argument("--timeout-cs", type=int, default=500,
                   help="mk5ad.ctl time-out in centiseconds (minimum 200; FS sample: 500)")
    p.add_argument("--data-cmd", help="command started before the session and stopped after it "
                   "(placeholders filled), e.g. a VDIF sender to {data_port}")
    p.add_argument("--data-out", help="the data command's stdout goes here (e.g. a sender's --json report: what "
                   "it sent and skipped, to judge the daemon's loss counts by)")
    p.add_argument("--data-lead", type=float, default=2.0, help="seconds between --data-cmd and the first request")
    p.add_argument("--out", help="also write the transcript here")
    p.add_argument("--json", help="write the records as JSON here")
    p.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two transcripts")
    args = p.parse_args()
    if args.diff:
        return diff(*args.diff)
    if not args.target:
        p.error("HOST:PORT required")
    args.timeout_cs = max(args.timeout_cs, 200)  # mk5cn/mk5cn.c:199-200
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
