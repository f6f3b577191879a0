#!/usr/bin/env python3
"""Where a process's threads were off the CPU, from a system-wide `perf record -e sched:sched_switch`.

    offcpu.py PERF_DATA TID [TID ...]  → one JSON object on stdout

Per thread (by its name): the longest interval it was off the CPU, the state it left in (R: taken
off while runnable, i.e. waiting for a core; S: sleeping in a wait it asked for; D: in the kernel,
uninterruptible, e.g. a page fault or reclaim), when (seconds into the recording) and the total
time off in each state; also the longest interval it ran without a switch. A receive thread whose
socket overflowed either did not run (long R or D) or ran long elsewhere (long on-CPU): this says
which. System-wide because a thread's switch-in is recorded in the context of the task it
replaces.
"""
import json
import re
import subprocess
import sys

SWITCH = re.compile(
    r"prev_comm=(?P<pc>.*?) prev_pid=(?P<pp>\d+) .*?prev_state=(?P<ps>\S+) ==> "
    r"next_comm=(?P<nc>.*?) next_pid=(?P<np>\d+)"
)


def main() -> None:
    data, tids = sys.argv[1], {int(t) for t in sys.argv[2:]}
    out = subprocess.run(
        ["perf", "script", "-i", data, "-F", "time,trace"],
        capture_output=True, text=True, check=False,
    ).stdout
    first = None
    left: dict[int, tuple[float, str]] = {}
    came: dict[int, float] = {}
    names: dict[int, str] = {}
    stats: dict[int, dict] = {}
    for line in out.splitlines():
        head, _, trace = line.partition(":")
        m = SWITCH.search(trace)
        if not m:
            continue
        try:
            t = float(head.strip())
        except ValueError:
            continue
        first = t if first is None else first
        pp, np_ = int(m["pp"]), int(m["np"])
        if pp in tids:
            names[pp] = m["pc"]
            s = stats.setdefault(pp, {"off_ms": {}, "longest_off": None, "longest_on": None})
            left[pp] = (t, m["ps"][0])
            if pp in came:
                on = (t - came.pop(pp)) * 1e3
                if not s["longest_on"] or on > s["longest_on"]["ms"]:
                    s["longest_on"] = {"ms": round(on, 2), "at_s": round(t - first, 3)}
        if np_ in tids:
            names[np_] = m["nc"]
            s = stats.setdefault(np_, {"off_ms": {}, "longest_off": None, "longest_on": None})
            came[np_] = t
            if np_ in left:
                t0, state = left.pop(np_)
                off = (t - t0) * 1e3
                s["off_ms"][state] = round(s["off_ms"].get(state, 0) + off, 1)
                if not s["longest_off"] or off > s["longest_off"]["ms"]:
                    s["longest_off"] = {"ms": round(off, 2), "state": state, "at_s": round(t0 - first, 3)}
    print(json.dumps({f"{names.get(t, '?')}/{t}": s for t, s in stats.items()}))


if __name__ == "__main__":
    main()
