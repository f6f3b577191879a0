#!/usr/bin/env python3
"""Check what ARCHITECTURE.md promises: the crate layering (from `cargo metadata` and the core
crates' code) and that no function grows past a screen without saying why.

Rules (normal dependencies; dev-dependencies are free):
  core   vdif probe stream transfer linkemu models histogram seqrange hostcounters fxcorr vsis scanfmt pacing
         depend on core crates only, never on a crate that does IO for them (libc, socket2,
         rustix, nix), and their non-test code reads no clock and opens no socket or file.
  shell  netio ctlchan linkemu-tun metrics daemon recording safedir *-session
         depend on core and shell crates; a *-session crate never on another *-session.
         metrics is a live view the daemon publishes to: core crates and ctlchan (the accept
         loop its HTTP server runs on) only, and no status type of its own (`struct …Status`):
         the core crates own the live counts, metrics only renders them.
  view   report: core crates only.
  bin    evlbi: anything.   dev: testkit (tests only).
Every workspace crate must be in exactly one layer, so a new crate has to be placed.
Functions: no non-test function in crates/*/src longer than LONG_FN lines (split it along its
ideas; clippy's too_many_lines, clippy.toml, counts code lines only, this counts every line).
Lints: every crate takes the workspace's (`[lints] workspace = true`: missing_docs, unsafe_code
denied unless a module that makes syscalls allows it, too_many_lines); a crate's own [lints.*]
table would drop them.

Exit 0 when every rule holds, 1 with one line per broken rule. Python 3 stdlib only.
Usage: scripts/check_architecture.py   (from anywhere inside the repository)
       scripts/check_architecture.py --self-test   (the core-code scan catches planted violations)
"""
import json
import os
import re
import subprocess
import sys

CORE = {"vdif", "probe", "stream", "transfer", "linkemu", "models", "histogram", "seqrange", "hostcounters", "fxcorr", "vsis",
        "scanfmt", "pacing"}
SHELL = {"netio", "ctlchan", "linkemu-tun", "probe-session", "stream-session", "transfer-session", "metrics", "daemon", "recording", "safedir"}
VIEW = {"report"}
# Shell crates that are live views: what they may link besides core crates (metrics serves HTTP on
# ctlchan's accept loop).
LIVE_VIEWS = {"metrics": {"ctlchan"}}
# A type a live view would hold of its own instead of rendering a core crate's.
STATUS_TYPE = re.compile(r"^\s*pub(\([^)]*\))?\s+(struct|enum)\s+(\w+Status)\b")
BIN = {"evlbi"}
DEV = {"testkit"}
IO_CRATES = {"libc", "socket2", "rustix", "nix", "mio", "tokio"}
LONG_FN = 125
# What a core crate's non-test code must not do: read a clock, open sockets or files, sleep.
FORBIDDEN_IN_CORE = re.compile(
    r"Instant::now|SystemTime::now|\bUtc::now|\bLocal::now|\bUdpSocket\b|\bTcpStream\b|\bTcpListener\b|std::fs::|File::open|File::create"
    r"|thread::sleep|thread::spawn"
)


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            cwd=root, check=True, capture_output=True, text=True,
        ).stdout
    )
    members = {p["name"]: p for p in meta["packages"]}
    problems = []
    layers = [CORE, SHELL, VIEW, BIN, DEV]
    for name in members:
        if sum(name in layer for layer in layers) != 1:
            problems.append(f"{name}: not placed in exactly one layer (edit scripts/check_layers.py and ARCHITECTURE.md)")
    for name, pkg in sorted(members.items()):
        problems += workspace_lints(name, pkg["manifest_path"])
        deps = [d["name"] for d in pkg["dependencies"] if d.get("kind") is None]
        internal = [d for d in deps if d in members]
        if name in CORE:
            for d in internal:
                if d not in CORE:
                    problems.append(f"{name} (core) depends on {d}, which is not a core crate")
            for d in deps:
                if d in IO_CRATES:
                    problems.append(f"{name} (core) depends on {d}: IO belongs in a shell crate")
            for path in source_files(pkg):
                problems += scan_core_source(path, root)
        elif name in SHELL:
            for d in internal:
                if d not in CORE | SHELL:
                    problems.append(f"{name} (shell) depends on {d}, which is neither core nor shell")
                if name.endswith("-session") and d.endswith("-session"):
                    problems.append(f"{name} depends on another session crate, {d}")
                if name in LIVE_VIEWS and d not in CORE | LIVE_VIEWS[name]:
                    problems.append(f"{name} (a live view) depends on {d}: it renders core status types only")
            if name in LIVE_VIEWS:
                for path in source_files(pkg):
                    problems += own_status_types(path, root)
        elif name in VIEW:
            for d in internal:
                if d not in CORE:
                    problems.append(f"{name} (view) depends on {d}: views read core result types only")
    for dirpath, _, files in os.walk(os.path.join(root, "crates")):
        if "/tests" in dirpath or "/target" in dirpath:
            continue
        for f in files:
            if f.endswith(".rs"):
                problems += long_functions(os.path.join(dirpath, f), root)
    for p in problems:
        print(p)
    print(f"architecture: {len(members)} crates checked, {len(problems)} problem(s)")
    return 1 if problems else 0


def source_files(pkg: dict) -> list:
    """The .rs files below a package's src/."""
    src = os.path.join(os.path.dirname(pkg["manifest_path"]), "src")
    return [os.path.join(d, f) for d, _, files in sorted(os.walk(src)) for f in sorted(files) if f.endswith(".rs")]


def scan_core_source(path: str, root: str) -> list:
    """Lines of non-test code (before the first #[cfg(test)]) that do IO or read a clock."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if line.strip().startswith("mod tests"):
                break
            code = line.split("//", 1)[0]
            m = FORBIDDEN_IN_CORE.search(code)
            if m:
                out.append(f"{os.path.relpath(path, root)}:{no}: core code uses {m.group(0)}")
    return out


def own_status_types(path: str, root: str) -> list:
    """Status types a live view defines itself (they belong to the core crate that counts)."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if line.strip().startswith("mod tests"):
                break
            m = STATUS_TYPE.match(line)
            if m:
                out.append(f"{os.path.relpath(path, root)}:{no}: the view defines {m.group(3)}; "
                           "live counts belong to the core crate that counts them")
    return out


def workspace_lints(name: str, manifest: str) -> list:
    """The crate takes the workspace lints and sets none of its own."""
    with open(manifest, encoding="utf-8") as fh:
        text = fh.read()
    if not re.search(r"^\[lints\]\s*\nworkspace\s*=\s*true\s*$", text, re.M):
        return [f"{name}: Cargo.toml lacks `[lints] workspace = true` (the workspace's lints)"]
    if re.search(r"^\[lints\.", text, re.M):
        return [f"{name}: Cargo.toml sets lints of its own; allow one where it is needed, in the code, saying why"]
    return []


FN_START = re.compile(r"\s*(pub(\([^)]*\))?\s+)?(const\s+)?(unsafe\s+)?(extern \"C\"\s+)?fn\s+(\w+)")


def long_functions(path: str, root: str) -> list:
    """Functions of non-test code longer than LONG_FN lines."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    end = next((i for i, l in enumerate(lines) if l.strip().startswith("#[cfg(test)]") and i + 1 < len(lines)
                and lines[i + 1].strip().startswith("mod ")), len(lines))
    out = []
    for i in range(end):
        m = FN_START.match(lines[i])
        if not m:
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            # Strings and char literals may hold braces; drop them before counting.
            code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j].split("//")[0])
            code = re.sub(r"'(\\.|[^'\\])'", "''", code)
            for ch in code:
                if ch == "{":
                    depth, started = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if started and depth == 0:
                break
            if not started and code.rstrip().endswith(";"):
                break
            j += 1
        n = j - i + 1
        if started and n > LONG_FN:
            out.append(f"{os.path.relpath(path, root)}:{i + 1}: fn {m.group(6)} is {n} lines (> {LONG_FN}); "
                       "split it along its ideas")
    return out


def self_test() -> int:
    """Plant each forbidden call in a scratch core file and check the scan reports it (and
    nothing in test code or comments): a checker that cannot fail is no check."""
    import tempfile
    planted = ["Instant::now()", "std::time::SystemTime::now()", "chrono::Utc::now()", "Utc::now()",
               "Local::now()", "chrono::Local::now()", "std::fs::read(p)", "std::thread::sleep(d)"]
    clean = ["let t = now; // Utc::now() is read by the caller", "fn now_unix() -> i64 { 0 }",
             "let nowhere = MyUtc::nowish();"]
    failures = []
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "lib.rs")
        for code in planted + clean:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(f"fn f() {{\n    {code};\n}}\n#[cfg(test)]\nmod tests {{\n    fn g() {{ Utc::now(); }}\n}}\n")
            found = scan_core_source(path, root)
            if (code in planted) != bool(found) or any(":6:" in f for f in found):
                failures.append(f"self-test: {code!r} gave {found}")
        # A live view's own status type is found; the core crate's, imported, is not.
        for code, want in [("pub struct ServeStatus {", True), ("pub(crate) enum LinkStatus {", True),
                           ("use vsis::status::ServeStatus;", False), ("pub struct Status {", False)]:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(f"{code}\n")
            if bool(own_status_types(path, root)) != want:
                failures.append(f"self-test: status type {code!r} found={not want}")
    for f in failures:
        print(f)
    print(f"architecture self-test: {len(planted)} planted, {len(clean)} clean, {len(failures)} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
