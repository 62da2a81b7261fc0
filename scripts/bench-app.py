#!/usr/bin/env python3
"""Desktop app footprint against the blank Tauri app (docs/BENCHMARKS.md, "Desktop app").

Usage: bench-app.py BLANK_BIN OUTPOST_BIN (scripts/bench-app.sh builds both and runs this under
Xvfb and a private D-Bus session).

Both apps are measured the same way, turn about, RUNS times each:
- release binary size;
- cold start to interactive: the page cache is dropped (as root: sync, then
  /proc/sys/vm/drop_caches = 3) before every start, and the clock runs from the start of the
  process until the page's first command reaches the backend (both apps log "ui subscribed"
  for it: outpost-app's session_subscribe, the blank app's one `ready` command);
- idle memory: IDLE_SECS after that, PSS summed over the app and all its descendants (the
  WebKit web and network processes) from /proc/PID/smaps_rollup; RSS the same way, for
  reference (it counts shared libraries once per process).
Every start gets an empty HOME and XDG folders (no WebKit cache, Outpost's first-run screen).
One uncounted start of each app comes first (session services such as the accessibility bus).
Medians are printed as a table: blank | Outpost | ratio.
"""
import os, statistics, subprocess, sys, tempfile, time

RUNS = int(os.environ.get("RUNS", "5"))
IDLE_SECS = float(os.environ.get("IDLE_SECS", "5"))
DROP_CACHES = os.environ.get("DROP_CACHES", "1") == "1"
START_TIMEOUT = 60.0


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


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def drop_caches():
    if not DROP_CACHES:
        return
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        raise SystemExit(f"cannot drop the page cache (run as root, or DROP_CACHES=0): {e}")


def one_run(binary):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, HOME=d, XDG_CONFIG_HOME=f"{d}/config", XDG_DATA_HOME=f"{d}/data",
                   XDG_CACHE_HOME=f"{d}/cache", OUTPOST_CONFIG_DIR=f"{d}/outpost-config",
                   OUTPOST_DATA_DIR=f"{d}/outpost-data", OUTPOST_SECRETS="memory",
                   RUST_LOG="outpost_app=info,warn")
        drop_caches()
        t0 = time.monotonic()
        p = subprocess.Popen([binary], env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             text=True)
        start = None
        for line in p.stderr:
            if "ui subscribed" in line:
                start = time.monotonic() - t0
                break
            if time.monotonic() - t0 > START_TIMEOUT:
                break
        if start is None:
            p.kill()
            raise SystemExit(f"{binary} never reached the UI (no 'ui subscribed' line)")
        # Keep reading stderr so a chatty app never blocks on a full pipe while it idles.
        drain = subprocess.Popen(["cat"], stdin=p.stderr, stdout=subprocess.DEVNULL)
        time.sleep(IDLE_SECS)
        pids = tree(p.pid)
        per = [(comm(x), mem_kib(x, "VmRSS"), mem_kib(x, "Pss")) for x in pids]
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        drain.wait()
        return start, per


def main():
    bins = {"blank": sys.argv[1], "outpost": sys.argv[2]}
    size = {k: os.path.getsize(b) for k, b in bins.items()}
    for k, b in bins.items():
        print(f"{k}: {b}: {size[k]} bytes")
    starts = {k: [] for k in bins}
    pss = {k: [] for k in bins}
    rss = {k: [] for k in bins}
    # One start of each first, not counted: it brings up the session's services both use
    # (the accessibility bus that GTK activates on D-Bus), which would weigh on run 1 only.
    for b in bins.values():
        one_run(b)
    for i in range(RUNS):
        for k, b in bins.items():  # turn about, so both see the same machine load
            s, per = one_run(b)
            starts[k].append(s)
            pss[k].append(sum(x[2] for x in per))
            rss[k].append(sum(x[1] for x in per))
            detail = ", ".join(f"{n} {r / 1024:.0f}/{p / 1024:.0f}" for n, r, p in per)
            print(f"run {i + 1} {k}: interactive {s * 1000:.0f} ms; tree PSS {pss[k][-1] / 1024:.1f} "
                  f"MiB, RSS {rss[k][-1] / 1024:.1f} MiB (RSS/PSS MiB: {detail})", flush=True)

    med = lambda xs: statistics.median(xs)
    rows = [
        ("release binary (MB)", size["blank"] / 1e6, size["outpost"] / 1e6, "≤ 2"),
        (f"idle tree PSS, median of {RUNS} (MiB)", med(pss["blank"]) / 1024, med(pss["outpost"]) / 1024, "≤ 1.3"),
        (f"cold start to interactive, median of {RUNS} (ms)", med(starts["blank"]) * 1000,
         med(starts["outpost"]) * 1000, "≤ 1.2"),
        (f"idle tree RSS, median of {RUNS} (MiB, reference)", med(rss["blank"]) / 1024,
         med(rss["outpost"]) / 1024, ""),
    ]
    print()
    print("| what | blank Tauri app | Outpost | ratio | goal |")
    print("|---|---:|---:|---:|---|")
    for name, a, b, goal in rows:
        print(f"| {name} | {a:.1f} | {b:.1f} | {b / a:.2f} | {goal} |")
    print(f"(cold start min/max: blank {min(starts['blank']) * 1000:.0f}/{max(starts['blank']) * 1000:.0f} ms, "
          f"Outpost {min(starts['outpost']) * 1000:.0f}/{max(starts['outpost']) * 1000:.0f} ms)")


main()
