#!/usr/bin/env python3
"""Runs the README's examples as a newcomer pastes them, so they cannot drift.

Every fenced block of README.md that holds commands (a ```sh block, or any block with `$ ` lines)
is run by bash in one scratch directory shared by the whole README (later examples use the files
earlier ones made), with the just-built evlbi first on PATH. As root each block runs in a network
namespace of its own (unshare --net --mount, loopback up, a private /run/netns): the README's
fixed ports and namespace names (tel, corr) cannot meet another test's, and every namespace a
block makes goes with it. Without root, blocks that need it are skipped and counted.

Where a block shows output (the lines after a `$ command` that are not commands), every shown
line must appear in what the block printed (stdout and stderr), compared by shape: numbers,
unit prefixes and whitespace may differ, the words may not. A command that exits non-zero
fails its block unless the README shows why (an `error:`/`evlbi:` line, or `echo $?` next).

An HTML comment before a block steers it (several may be given, one per comment):

  <!-- readme-test: skip REASON -->        not run; the reason is counted in the summary
  <!-- readme-test: setup COMMANDS -->     run first, unshown (e.g. what "another terminal" made)
  <!-- readme-test: timeout SECONDS -->    the block's bound (default 60)
  <!-- readme-test: linger SECONDS -->     how long background commands may run on after the
                                           block's last command before they are killed (default 5)
  <!-- readme-test: expect-exit N -->      the block's last command must exit N
  <!-- readme-test: no-compare REASON -->  run it, but its shown output is an excerpt of another run
  <!-- readme-test: background N[,N…] --> commands N (1-based) are typed in "another terminal":
                                           run in the background, 2 s given to each to start
  <!-- readme-test: repo -->               run in the repository (scripts/demo.sh), not the scratch
  <!-- readme-test: root -->               needs root (skipped, and counted, without it)
  <!-- readme-test: needs TOOL [TOOL…] -->  skipped, and counted, where a tool is not installed

Usage: scripts/readme_examples.py [--only LINE[,LINE…]] [--keep] [-v]   (LINE: the block's
first line in README.md); --self-test checks the harness's verdicts on blocks made to pass and
to fail (drifted words, an unexplained exit status, a timeout, a skip, a background command). Prints one line per block and the summary
"README examples: N ran, M skipped (reasons), K failed"; exit code 1 if any failed.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DIRECTIVE = re.compile(r"^\s*<!--\s*readme-test:\s*(\S+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
ERROR_LINE = re.compile(r"^(error|evlbi|Error)[: ]")


@dataclass
class Command:
    text: str  # the command as bash gets it (continuation lines joined)
    shown: list[str] = field(default_factory=list)  # the output the README shows after it


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    commands: list[Command]
    directives: dict[str, list[str]]


def parse(readme: Path) -> list[Block]:
    lines = readme.read_text().split("\n")
    blocks: list[Block] = []
    directives: dict[str, list[str]] = {}
    i = 0
    while i < len(lines):
        d = DIRECTIVE.match(lines[i])
        if d:
            directives.setdefault(d.group(1), []).append(d.group(2))
            i += 1
            continue
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                directives = {}  # a directive belongs to the block right after it
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        body = [l[len(indent) :] if l.startswith(indent) else l.lstrip() for l in lines[i + 1 : j]]
        commands = commands_of(body, lang)
        if commands and lang not in ("toml", "yaml", "json"):
            blocks.append(Block(i + 1, lang, commands, directives))
        elif directives:
            sys.exit(f"README.md:{i + 1}: readme-test directive on a block without commands")
        directives = {}
        i = j + 1
    return blocks


def commands_of(body: list[str], lang: str) -> list[Command]:
    if not any(l.startswith("$ ") for l in body):
        if lang != "sh":
            return []
        # A ```sh block is commands only.
        body = ["$ " + l for l in body if l.strip() and not l.lstrip().startswith("#")]
    commands: list[Command] = []
    k = 0
    while k < len(body):
        l = body[k]
        if l.startswith("$ "):
            text = l[2:]
            while text.rstrip().endswith("\\") and k + 1 < len(body):
                k += 1
                text = text.rstrip()[:-1] + " " + body[k].strip()
            commands.append(Command(text))
        elif commands and l.strip() and not l.startswith("# ") and l.strip() != "#":
            commands[-1].shown.append(l)
        k += 1
    return commands


NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?")


def shape(line: str) -> str:
    """A line with what may differ between runs taken out: numbers, unit prefixes, spacing."""
    s = line.strip()
    if re.fullmatch(r"-?\d+|exit \d+", s):
        return s  # an exit status is compared exactly
    # Hashes and random serials: 12+ hex digits with a letter among them, so that a float's
    # long fraction ("1.4733981972599657") stays a number and matches "0.0" (CI failed on it).
    s = re.sub(r"\b(?=[0-9]*[a-f])[0-9a-f]{12,}\b", "HEX", s)
    s = NUMBER.sub("0", s)
    s = re.sub(r"\b0\s*[kMGTPµmun]?(b/s|B/s|pkt/s|Hz|B|s|b)\b", r"0 \1", s)
    s = re.sub(r"0 µs|0 ms|0 ns|0 us", "0 s", s)
    s = re.sub(r"\b0\s*(kMGT)?B\b", "0 B", s)
    s = re.sub(r"\s+", " ", s)
    return s


def is_wildcard(line: str) -> bool:
    s = line.strip()
    return s in ("...", "…") or s.startswith("… (") or s.startswith("...")


def script_of(block: Block, scratch: Path) -> str:
    out = ["exec 3>>" + sh_quote(str(scratch / ".readme-rc")), "cd " + sh_quote(str(scratch if "repo" not in block.directives else REPO))]
    for setup in block.directives.get("setup", []):
        out.append(f"{{ {setup} ; }} >/dev/null 2>&1 3>&-")
    background = {int(x) - 1 for d in block.directives.get("background", []) for x in d.split(",") if x}
    for n, c in enumerate(block.commands):
        # Braces, so a trailing "# comment" does not swallow the "&".
        out.append("{ " + c.text + "\n} &\nsleep 2" if n in background else c.text)
        out.append(f'__rc=$?; echo "{n} $__rc" >&3; (exit $__rc)')
    return "\n".join(out) + "\n"


def sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def session_pids(sid: int) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[3]) == sid and int(p.name) != sid:  # field 6: session id
            pids.append(int(p.name))
    return pids


def kill_session(sid: int) -> int:
    """Ends what the block started (its own session, by process group): SIGINT (Ctrl-C, as a
    person stops what runs in another terminal), then SIGTERM, then SIGKILL."""
    left = session_pids(sid)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if not left:
            break
        try:
            os.killpg(sid, sig)
        except ProcessLookupError:
            pass
        for pid in left:  # a member that made its own group (ip netns exec does not)
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and session_pids(sid):
            time.sleep(0.05)
        left = session_pids(sid)
    return len(left)


def run_block(block: Block, scratch: Path, root: bool, verbose: bool) -> tuple[str, str]:
    """Returns (verdict, detail): verdict is ok, FAIL or skip."""
    timeout = float(block.directives.get("timeout", ["60"])[0])
    linger = float(block.directives.get("linger", ["5"])[0])
    script = scratch / ".readme-block.sh"
    script.write_text(script_of(block, scratch))
    rcfile = scratch / ".readme-rc"
    rcfile.write_text("")
    outfile = scratch / ".readme-out"
    argv = ["bash", str(script)]
    if root:
        # A namespace of its own: loopback up, a private /run/netns for the names linkemu adds.
        inner = "ip link set lo up && mount -t tmpfs readme-netns /run/netns && exec bash " + sh_quote(str(script))
        argv = ["unshare", "--net", "--mount", "--propagation", "private", "bash", "-c", inner]
        Path("/run/netns").mkdir(parents=True, exist_ok=True)
    # XDG_STATE_HOME: evlbi send remembers each receiver's path rate there; not the user's.
    env = dict(os.environ, PATH=f"{scratch / '.bin'}:{os.environ['PATH']}", README_REPO=str(REPO),
               XDG_STATE_HOME=str(scratch / ".state"))
    start = time.monotonic()
    with open(outfile, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=scratch, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        # Background commands (receivers, servers) may finish on their own; then they are ended.
        deadline = min(time.monotonic() + linger, start + timeout)
        while not timed_out and session_pids(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        lingering = len(session_pids(proc.pid))
        if proc.poll() is None:
            lingering += 1
        kill_session(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    elapsed = time.monotonic() - start
    output = outfile.read_text(errors="replace")
    if verbose:
        print(output)
    rcs = {}
    for l in rcfile.read_text().split("\n"):
        if l.strip():
            n, rc = l.split()
            rcs[int(n)] = int(rc)
    if timed_out:
        return "FAIL", f"not done within {timeout:.0f} s (timeout N to change){tail(output)}"
    problems = []
    expect_exit = block.directives.get("expect-exit")
    for n, c in enumerate(block.commands):
        rc = rcs.get(n)
        if rc is None:
            problems.append(f"command {n + 1} never finished: {c.text[:80]}")
            break
        if expect_exit and n == len(block.commands) - 1:
            if rc != int(expect_exit[0]):
                problems.append(f"exit {rc}, README says {expect_exit[0]}: {c.text[:80]}")
            continue
        explained = any(ERROR_LINE.match(l.strip()) for l in c.shown) or (
            n + 1 < len(block.commands) and block.commands[n + 1].text.strip().startswith("echo $?")
        )
        if rc != 0 and not explained:
            problems.append(f"exit {rc}: {c.text[:100]}")
    if "no-compare" not in block.directives:
        got = {shape(l) for l in output.split("\n")}
        got_list = sorted(got)
        for c in block.commands:
            for l in c.shown:
                if is_wildcard(l) or shape(l) in got:
                    continue
                close = difflib.get_close_matches(shape(l), got_list, n=1, cutoff=0.5)
                problems.append(f"shown line not printed: {l.strip()[:160]!r}" + (f"\n        closest printed: {close[0][:160]!r}" if close else ""))
    detail = f"{elapsed:.1f} s" + (f", {lingering} background process(es) ended" if lingering else "")
    if problems:
        return "FAIL", detail + "\n      " + "\n      ".join(problems) + tail(output)
    return "ok", detail


def tail(output: str) -> str:
    last = [l for l in output.split("\n") if l.strip()][-8:]
    return "\n      output (last lines):\n        " + "\n        ".join(l[:200] for l in last) if last else ""


def run_all(
    readme: Path, evlbi: Path, only: set[int] | None, keep: bool, verbose: bool, planted: bool = False
) -> tuple[dict[int, str], int]:
    """Runs the blocks of `readme`; their verdicts by first line (ok, FAIL, skip) and the exit code."""
    blocks = parse(readme)
    root = os.geteuid() == 0 and shutil.which("unshare") is not None
    scratch = Path(tempfile.mkdtemp(prefix="evlbi-readme-"))
    (scratch / ".bin").mkdir()
    (scratch / ".bin" / "evlbi").symlink_to(evlbi)
    ran = failed = 0
    skipped: dict[str, int] = {}
    verdicts: dict[int, str] = {}
    started = time.monotonic()
    try:
        for b in blocks:
            if only is not None and b.line not in only:
                continue
            first = b.commands[0].text.strip()[:70]
            reason = None
            if "skip" in b.directives:
                reason = b.directives["skip"][0] or "no reason given"
            elif not root and "root" in b.directives:
                reason = "needs root"
            else:
                missing = [t for d in b.directives.get("needs", []) for t in d.split() if shutil.which(t) is None]
                if missing:
                    reason = "needs " + " ".join(missing)
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
                verdicts[b.line] = "skip"
                print(f"{readme.name}:{b.line}: skip ({reason}): {first}", flush=True)
                continue
            verdict, detail = run_block(b, scratch, root, verbose)
            ran += 1
            failed += verdict == "FAIL"
            verdicts[b.line] = verdict
            print(f"{readme.name}:{b.line}: {verdict} ({detail}): {first}", flush=True)
    finally:
        if keep:
            print(f"scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    reasons = "; ".join(f"{n} {r}" for r, n in sorted(skipped.items(), key=lambda x: -x[1]))
    print(
        f"README examples: {ran} ran, {sum(skipped.values())} skipped ({reasons or 'none'}), "
        # The self-test's blocks fail on purpose: not "N failed", which scripts/test.sh counts.
        + (f"{failed} judged failing as planted" if planted else f"{failed} failed")
        + f" in {time.monotonic() - started:.0f} s"
    )
    return verdicts, 1 if failed else 0


# The harness's own check: a README of known blocks, each with the verdict it must get.
SELF_TEST = """
Output as shown, numbers aside:
```console
$ echo "rate 5.5 Mb/s in 3 s"; echo done
rate 7 Gb/s in 10 s
done
```
A float's long fraction is a number, not a hash:
```console
$ echo '"user_pct": 0.0,'
"user_pct": 1.4733981972599657,
```
Drifted words:
```console
$ echo "stopped by signal"
stopped by idle timeout
```
A command that fails unexplained:
```console
$ false
```
A failure the README shows:
```console
$ echo "error: no such file" >&2; exit_1() { return 1; }; exit_1
error: no such file
```
<!-- readme-test: skip a reason -->
```console
$ false
```
<!-- readme-test: background 1 -->
<!-- readme-test: linger 1 -->
```console
$ sleep 1000
$ echo other terminal
other terminal
```
<!-- readme-test: timeout 2 -->
```console
$ sleep 30
```
<!-- readme-test: expect-exit 3 -->
```console
$ (exit 3)
```
```sh
echo a made file > made.txt
```
```console
$ cat made.txt
a made file
```
"""
SELF_TEST_VERDICTS = ["ok", "ok", "FAIL", "FAIL", "ok", "skip", "ok", "FAIL", "ok", "ok", "ok"]


def self_test(evlbi: Path) -> int:
    with tempfile.TemporaryDirectory() as d:
        readme = Path(d) / "SELFTEST.md"
        readme.write_text(SELF_TEST)
        verdicts, rc = run_all(readme, evlbi, None, False, False, planted=True)
    got = [verdicts[k] for k in sorted(verdicts)]
    if got != SELF_TEST_VERDICTS or rc != 1:
        print(f"self-test FAILED: verdicts {got}, expected {SELF_TEST_VERDICTS}; exit {rc}, expected 1")
        return 1
    print(f"self-test: {len(got)} blocks judged as expected")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--readme", default=str(REPO / "README.md"))
    ap.add_argument("--evlbi", default=str(REPO / "target/release/evlbi"))
    ap.add_argument("--only", help="comma-separated first lines of the blocks to run (their setup blocks are yours to add)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every block's output")
    ap.add_argument("--self-test", action="store_true", help="check the harness's verdicts on blocks made to pass and fail")
    args = ap.parse_args()
    evlbi = Path(args.evlbi).resolve()
    if not evlbi.is_file():
        sys.exit(f"{evlbi}: not built (cargo build --release -p evlbi)")
    if args.self_test:
        return self_test(evlbi)
    only = {int(x) for x in args.only.split(",")} if args.only else None
    return run_all(Path(args.readme), evlbi, only, args.keep, args.verbose)[1]


if __name__ == "__main__":
    sys.exit(main())
