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
Errors: library crates (all but the binary) return typed errors: no `Result<_, String>`, no
`type Err = String` in non-test code (thiserror enums that name what went wrong; the binary uses
anyhow). A line may opt out with a `// string-error: WHY` comment.
Binary: the modules of crates/cli/src import each other without a cycle (what two commands
share lives in a module both use, e.g. stream_common.rs, vdif_args.rs, probe_print.rs); the
crate root (main.rs: usage, read_key, stop_flag) is the one hub every module may name.
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
# Crates whose String errors another branch is replacing now (h-sansio: probe-session's and
# transfer-session's control and receive paths, and ctlchan::Message::validate that they
# implement); remove a name when its errors are typed.
STRING_ERRORS_PENDING = {"probe-session", "transfer-session"}
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
    for name, pkg in sorted(members.items()):
        if name in BIN or name in STRING_ERRORS_PENDING:
            continue
        src = os.path.join(os.path.dirname(pkg["manifest_path"]), "src")
        for dirpath, _, files in os.walk(src):
            for f in files:
                if f.endswith(".rs"):
                    problems += string_errors(os.path.join(dirpath, f), root)
    problems += module_cycles(os.path.join(root, "crates", "cli", "src"), root)
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


def string_error_types(code: str) -> list:
    """The `Result<…, String>` (at any nesting of generics) and `type Err(or) = String` in a
    line of code."""
    found = []
    for m in re.finditer(r"\bResult\s*<", code):
        depth, args, cur = 1, [], ""
        for ch in code[m.end():]:
            if ch == "<":
                depth += 1
            elif ch == ">" and not cur.endswith("-"):
                depth -= 1
                if depth == 0:
                    args.append(cur)
                    break
            elif ch == "," and depth == 1:
                args.append(cur)
                cur = ""
                continue
            cur += ch
        if len(args) == 2 and args[1].strip() in ("String", "std::string::String"):
            found.append("Result<_, String>")
    if re.search(r"\btype\s+Err(or)?\s*=\s*(std::string::)?String\s*;", code):
        found.append("type Err = String")
    return found


def string_errors(path: str, root: str) -> list:
    """Lines of a library crate's non-test code whose error type is a String."""
    out = []
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    for no, line in enumerate(lines, 1):
        if line.strip().startswith("#[cfg(test)]") and no < len(lines) and lines[no].strip().startswith("mod "):
            break
        if "// string-error:" in line:
            continue
        code = re.sub(r'"(\\.|[^"\\])*"', '""', line.split("//", 1)[0])
        for what in string_error_types(code):
            out.append(f"{os.path.relpath(path, root)}:{no}: {what} in a library: return a thiserror enum "
                       "that names what went wrong")
    return out


def module_cycles(src: str, root: str) -> list:
    """Import cycles between the top-level modules of a crate's src (the root, main.rs or lib.rs,
    aside): each module's `crate::NAME` references are its edges."""
    mods = {f[:-3] for f in os.listdir(src) if f.endswith(".rs") and f not in ("main.rs", "lib.rs")}
    edges = {}
    for m in mods:
        with open(os.path.join(src, m + ".rs"), encoding="utf-8") as fh:
            text = "\n".join(l.split("//", 1)[0] for l in fh.read().split("\n"))
        edges[m] = sorted({n for n in re.findall(r"\bcrate::(\w+)", text) if n in mods and n != m})
    cycles, state = [], {}

    def visit(m, path):
        state[m] = "open"
        for n in edges[m]:
            if state.get(n) == "open":
                cycles.append(path[path.index(n):] + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in sorted(mods):
        if m not in state:
            visit(m, [m])
    return [f"{os.path.relpath(src, root)}: modules import each other in a cycle: {' -> '.join(c)}; "
            "move what they share to a module both use" for c in cycles]


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
    # String errors: each planted form is found, the clean ones (other error types, a String in
    # Ok, test code, comments, an opted-out line) are not.
    string_planted = ["fn f() -> Result<(), String> {", "fn f() -> Result<Option<Vec<u8>>, String> {",
                      "h: JoinHandle<Result<u64, String>>,", "static F: OnceLock<Result<PathBuf, String>>;",
                      "    type Err = String;", "fn f() -> std::result::Result<u8, std::string::String> {",
                      "fn f(r: Result<(), String>) {"]
    string_clean = ["fn f() -> Result<String, MyError> {", "fn f() -> Result<Vec<String>, E> {",
                    "fn f() -> io::Result<String> {", "// fn f() -> Result<(), String>",
                    "let s = \"Result<(), String>\";", "fn f() -> Result<(), String> { // string-error: a trait's",
                    "fn f() -> Result<HashMap<String, u8>, Error> {", "fn f() -> Result<u8, StringError> {"]
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "lib.rs")
        for code in string_planted + string_clean:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(f"{code}\n#[cfg(test)]\nmod tests {{\n    fn g() -> Result<(), String> {{ Ok(()) }}\n}}\n")
            found = string_errors(path, root)
            if (code in string_planted) != bool(found) or any(":4:" in f for f in found):
                failures.append(f"self-test: {code!r} gave {found}")
    # Module cycles: a planted two- and three-module cycle is found, a chain is not.
    for files, want in [({"a": "use crate::b::x;", "b": "use crate::a::y;"}, 1),
                        ({"a": "crate::b::f()", "b": "crate::c::g()", "c": "crate::a::h()"}, 1),
                        ({"a": "crate::b::f()", "b": "crate::c::g() // crate::a::h()", "c": "crate::usage"}, 0)]:
        with tempfile.TemporaryDirectory() as root:
            for name, code in list(files.items()) + [("main", "crate::a::run()")]:
                with open(os.path.join(root, name + ".rs"), "w", encoding="utf-8") as fh:
                    fh.write(f"fn f() {{ {code}; }}\n")
            found = module_cycles(root, root)
            if len(found) != want:
                failures.append(f"self-test: modules {files} gave {found}")
    for f in failures:
        print(f)
    print(f"architecture self-test: {len(planted) + len(string_planted) + 2} planted, "
          f"{len(clean) + len(string_clean) + 1} clean, {len(failures)} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
