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
Modules: no `use crate::` cycle between a crate's modules (a module and everything it names through
`crate::` must not name it back, the crate root counting as a module through what it defines and
re-exports); every crate, no exemptions (issue 38 item 5 emptied the last list of them).
Errors: library crates (all but the binary) return typed errors: no `Result<_, String>`, no
`type Err = String` in non-test code (thiserror enums that name what went wrong; the binary uses
anyhow). A line may opt out with a `// string-error: WHY` comment.
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
import tempfile
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
            problems.append(f"{name}: not placed in exactly one layer (edit scripts/check_architecture.py and ARCHITECTURE.md)")
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
        src = os.path.join(os.path.dirname(pkg["manifest_path"]), "src")
        for cycle in module_cycles(module_graph(src)):
            problems.append(f"{name}: modules {' -> '.join(cycle + cycle[:1])} import each other in a circle "
                            "(move what both need into a leaf module of its own: results and errors are leaves)")
        if name in BIN:
            continue
        src = os.path.join(os.path.dirname(pkg["manifest_path"]), "src")
        for dirpath, _, files in os.walk(src):
            for f in files:
                if f.endswith(".rs"):
                    problems += string_errors(os.path.join(dirpath, f), root)
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


def is_test_module_file(path: str) -> bool:
    """A module file compiled only for tests: `x/tests.rs` that its parent module (`x.rs` or
    `x/mod.rs`) declares as `#[cfg(test)] mod tests;` (a long module's tests in a file of their
    own). A `tests.rs` declared any other way is checked like any code."""
    d, f = os.path.split(path)
    if f != "tests.rs":
        return False
    for parent in (d + ".rs", os.path.join(d, "mod.rs")):
        if os.path.exists(parent):
            with open(parent, encoding="utf-8") as fh:
                lines = [l.strip() for l in fh.read().split("\n")]
            return any(l == "#[cfg(test)]" and i + 1 < len(lines) and lines[i + 1] == "mod tests;"
                       for i, l in enumerate(lines))
    return False


def scan_core_source(path: str, root: str) -> list:
    """Lines of non-test code (before the first #[cfg(test)]) that do IO or read a clock."""
    out = []
    if is_test_module_file(path):
        return out
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
    if is_test_module_file(path):
        return out
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


CRATE_PATH = re.compile(r"\bcrate::(\{[^;]*?\}|\w+)", re.S)


def module_of(src: str, path: str) -> str:
    """The top-level module a source file belongs to (`lib` for the crate root)."""
    top = os.path.relpath(path, src)[:-3].split(os.sep)[0]
    return "lib" if top in ("lib", "main") else top


def module_graph(src: str) -> dict:
    """Which top-level modules each one names through `crate::` in its non-test code; a name
    that is no module is an item of the crate root. The root's `pub use m::…` name m."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".rs")]
    modules = {module_of(src, p) for p in files}
    edges = {m: set() for m in modules}
    for path in files:
        here = module_of(src, path)
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        test = re.search(r"#\[cfg\(test\)\]\s*\n\s*mod\s+\w+", text)
        text = "\n".join(line.split("//")[0] for line in text[:test.start() if test else len(text)].split("\n"))
        named = []
        for group in CRATE_PATH.findall(text):
            if group.startswith("{"):
                named += [t.strip().split("::")[0] for t in re.split(r",(?![^{]*\})", group[1:-1]) if t.strip()]
            else:
                named.append(group)
        if here == "lib":
            named += re.findall(r"^\s*pub\s+use\s+(\w+)::", text, re.M)
        for n in named:
            target = n if n in modules else "lib"
            if target != here:
                edges[here].add(target)
    return edges


def module_cycles(edges: dict) -> list:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
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
    if is_test_module_file(path):
        return []
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


def planted_and_clean(planted: list, clean: list, check, test_line: str, source) -> list:
    """Each planted line, written into a file by `source`, is found by `check`; each clean one is
    not; nothing is found on the test code's line `test_line`. The failures."""
    failures = []
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "lib.rs")
        for code in planted + clean:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(source(code))
            found = check(path, root)
            if (code in planted) != bool(found) or any(test_line in f for f in found):
                failures.append(f"self-test: {code!r} gave {found}")
    return failures


def self_test() -> int:
    """Plant each forbidden call in a scratch core file and check the scan reports it (and
    nothing in test code or comments): a checker that cannot fail is no check."""
    planted = ["Instant::now()", "std::time::SystemTime::now()", "chrono::Utc::now()", "Utc::now()",
               "Local::now()", "chrono::Local::now()", "std::fs::read(p)", "std::thread::sleep(d)"]
    clean = ["let t = now; // Utc::now() is read by the caller", "fn now_unix() -> i64 { 0 }",
             "let nowhere = MyUtc::nowish();"]
    failures = planted_and_clean(
        planted, clean, scan_core_source, ":6:",
        lambda code: f"fn f() {{\n    {code};\n}}\n#[cfg(test)]\nmod tests {{\n    fn g() {{ Utc::now(); }}\n}}\n")
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "lib.rs")
        # A live view's own status type is found; the core crate's, imported, is not.
        for code, want in [("pub struct ServeStatus {", True), ("pub(crate) enum LinkStatus {", True),
                           ("use vsis::status::ServeStatus;", False), ("pub struct Status {", False)]:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(f"{code}\n")
            if bool(own_status_types(path, root)) != want:
                failures.append(f"self-test: status type {code!r} found={not want}")
    # Module cycles: a planted pair (a and b name each other), a pair through the crate root, and
    # a clean chain with test code that names back (not counted).
    planted_graphs = {
        "a <-> b": {"lib.rs": "pub mod a;\npub mod b;\n", "a.rs": "use crate::b::B;\n", "b.rs": "use crate::{a::A, lib_item};\n"},
        "root <-> a": {"lib.rs": "mod a;\npub use a::A;\npub struct R;\n", "a.rs": "use crate::R;\n"},
    }
    clean_graph = {"lib.rs": "mod a;\nmod b;\npub use a::A;\n", "a.rs": "use crate::b::B; // crate::a\n",
                   "b.rs": "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n"}
    with tempfile.TemporaryDirectory() as root:
        for label, files in list(planted_graphs.items()) + [("clean", clean_graph)]:
            src = os.path.join(root, label.replace(" ", "_").replace("<->", "and"))
            os.makedirs(src)
            for name, text in files.items():
                with open(os.path.join(src, name), "w", encoding="utf-8") as fh:
                    fh.write(text)
            found = module_cycles(module_graph(src))
            if bool(found) != (label != "clean"):
                failures.append(f"self-test: module graph {label!r} gave cycles {found}")
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
    failures += planted_and_clean(
        string_planted, string_clean, string_errors, ":4:",
        lambda code: f"{code}\n#[cfg(test)]\nmod tests {{\n    fn g() -> Result<(), String> {{ Ok(()) }}\n}}\n")
    # A module's tests in a file of their own are test code only when declared under cfg(test).
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "x"))
        tests = os.path.join(root, "x", "tests.rs")
        with open(tests, "w", encoding="utf-8") as fh:
            fh.write("fn g() { let t = Instant::now(); }\n")
        for parent, want in [("#[cfg(test)]\nmod tests;\n", False), ("mod tests;\n", True)]:
            with open(os.path.join(root, "x.rs"), "w", encoding="utf-8") as fh:
                fh.write(parent)
            if bool(scan_core_source(tests, root)) != want:
                failures.append(f"self-test: x/tests.rs under {parent!r} found={not want}")
    for f in failures:
        print(f)
    print(f"architecture self-test: {len(planted) + len(string_planted) + len(planted_graphs) + 1} planted, "
          f"{len(clean) + len(string_clean) + 2} clean, {len(failures)} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
