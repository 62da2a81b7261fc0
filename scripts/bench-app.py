#!/usr/bin/env python3
"""Desktop app measurements (docs/BENCHMARKS.md, "app"): release binary size, cold start to
interactive, idle memory of the whole process tree (the app plus its WebKit processes).

Run through scripts/bench-app.sh, which puts it under Xvfb and a private D-Bus session.
"Interactive" is the moment the UI's first command (session_subscribe) reaches the backend:
the page is loaded, Svelte has mounted, and IPC works. Each run starts from an empty
profile (the first-run screen), so nothing is cached in the app's own folders.
"""
import os, statistics, subprocess, sys, tempfile, time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/outpost-app"
RUNS = int(os.environ.get("RUNS", "5"))
IDLE_SECS = float(os.environ.get("IDLE_SECS", "5"))


def tree(pid):
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def mem_kib(pid, field):
    """VmRSS from status, or Pss from smaps_rollup."""
    path = f"/proc/{pid}/smaps_rollup" if field == "Pss" else f"/proc/{pid}/status"
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def names(pids):
    out = []
    for p in pids:
        try:
            with open(f"/proc/{p}/comm") as f:
                out.append(f.read().strip())
        except OSError:
            pass
    return out


def one_run():
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, OUTPOST_CONFIG_DIR=f"{d}/config", OUTPOST_DATA_DIR=f"{d}/data",
                   OUTPOST_SECRETS="memory", RUST_LOG="outpost_app=info,warn")
        t0 = time.monotonic()
        p = subprocess.Popen([BIN], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        start = None
        for line in p.stderr:
            if "ui subscribed" in line:
                start = time.monotonic() - t0
                break
        if start is None:
            p.kill()
            raise SystemExit("the app never reached the UI (no 'ui subscribed' line)")
        time.sleep(IDLE_SECS)
        pids = tree(p.pid)
        rss = sum(mem_kib(x, "VmRSS") for x in pids)
        pss = sum(mem_kib(x, "Pss") for x in pids)
        procs = names(pids)
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
        return start, rss, pss, procs


def main():
    size = os.path.getsize(BIN)
    print(f"binary: {BIN}: {size / 1e6:.2f} MB ({size} bytes)")
    one_run()  # warm the OS page cache once: "cold" means a fresh process, not a cold disk
    starts, rsss, psss = [], [], []
    for i in range(RUNS):
        s, r, ps, procs = one_run()
        starts.append(s); rsss.append(r); psss.append(ps)
        print(f"run {i + 1}: interactive after {s * 1000:.0f} ms; idle tree RSS {r / 1024:.1f} MiB, "
              f"PSS {ps / 1024:.1f} MiB ({len(procs)} processes: {', '.join(sorted(set(procs)))})")
    print(f"median: interactive {statistics.median(starts) * 1000:.0f} ms, "
          f"RSS {statistics.median(rsss) / 1024:.1f} MiB, PSS {statistics.median(psss) / 1024:.1f} MiB "
          f"(min/max start {min(starts) * 1000:.0f}/{max(starts) * 1000:.0f} ms)")


main()
