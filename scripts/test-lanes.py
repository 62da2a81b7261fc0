#!/usr/bin/env python3
"""Runs the workspace's test programs in two lanes side by side (scripts/test.sh).

Lane "livekit" runs the interop package's (tests/, outpost-tests) LiveKit client, room
and voice programs (`livekit_*`, `room_*`, `voice_*`: real livekit-server and outpost-room
with official-SDK peers); lane "rest" runs everything else (the interop package's session
and agent programs, the desktop app's end-to-end tests under Xvfb, the crates' own tests)
and the doc tests. The two take about as long (README). Within a lane one program runs at
a time, and each program runs one test at a time (RUST_TEST_THREADS=1, set by test.sh):
these tests wait on the network far more than they compute (two thirds of the machine
idle while livekit_audio runs alone), so two lanes fill it without putting two tests of
one program in each other's way. Last, with both lanes done, the programs that need the
whole machine run alone: `room_interop` (ten official-SDK peers in ten processes, 90
forwarded streams) and `load` (fifty clients). Which lane a program is in only balances
the time: every program runs.

The programs are the ones `cargo test --workspace --no-run` built: this asks Cargo for
them (nothing is built again; the feature set is the workspace's, as `cargo test
--workspace` has it) and runs each as `cargo test` would, in its package's folder with the
CARGO_* variables Cargo sets. A program's output is printed whole when it ends, so the two
lanes do not interleave; a table of every program's time and result comes last.

A program that failed in a lane runs once more, alone, after every other program: only
its failed tests (`--exact`) when libtest's summary counts as many failures as it named,
else the whole program (it crashed, or a peer's output broke a test's line), and not when
more than three of its tests failed (that is a break, not a flake). The last three CI
failures were three different timing-bound tests, each of which had passed in earlier
runs. A failure alone fails the run; a pass alone is reported as FLAKY in the table and at
the end, with the first run's output printed in full above it, so the test is still there
to be mended. Exits 1 when any program failed (all of them run, as with --no-fail-fast).
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

INTEROP_PACKAGE = "outpost-tests"
KIND_ORDER = {"lib": 0, "proc-macro": 0, "bin": 1, "test": 2}


# The interop package's programs that need the whole machine: they run after both lanes.
ALONE = ("room_interop", "load")
# More failed tests than this in one program are not rerun: that is a break, not a flake.
MOST_RERUN = 3
# libtest's line for a failed test: "test NAME ... FAILED".
FAILED_TEST = re.compile(r"^test (\S+) \.\.\. FAILED$", re.MULTILINE)
# libtest's summary of a failed run: "test result: FAILED. 22 passed; 1 failed; ...".
FAILED_COUNT = re.compile(r"^test result: FAILED\. \d+ passed; (\d+) failed;", re.MULTILINE)


def lane_of(program):
    """Which lane `program` runs in: "livekit", "rest" or "alone"."""
    if program.package == INTEROP_PACKAGE:
        if program.name in ALONE:
            return "alone"
        if program.name.startswith(("livekit_", "room_", "voice_")):
            return "livekit"
    return "rest"


class Program:
    def __init__(self, package, version, manifest_dir, kind, name, argv):
        self.package = package
        self.version = version
        self.manifest_dir = manifest_dir
        self.kind = kind
        self.name = name
        self.argv = argv
        self.seconds = 0.0
        self.status = None
        self.output = ""
        # The tests that failed in the lane, when they ran again alone: their names (none
        # for the whole program) and the result of that run.
        self.rerun = None
        self.rerun_status = None

    def label(self):
        if self.kind == "doc":
            return "doc tests (cargo test --workspace --doc)"
        what = "unit tests" if self.kind in ("lib", "proc-macro", "bin") else "tests"
        return f"{self.package} {what} {self.name}"


def programs():
    """The test programs of the workspace, as Cargo built them."""
    out = subprocess.run(
        [
            "cargo", "test", "--workspace", "--locked", "--no-run",
            "--message-format=json-render-diagnostics",
        ],
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    found = []
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        # package_id: "path+file:///dir#name@version" (or "...#version" when the folder
        # is named as the package).
        pkg_id = msg["package_id"]
        manifest_dir = os.path.dirname(msg["manifest_path"])
        tail = pkg_id.rsplit("#", 1)[-1]
        if "@" in tail:
            package, version = tail.split("@", 1)
        else:
            package, version = os.path.basename(manifest_dir), tail
        kind = msg["target"]["kind"][0]
        found.append(
            Program(package, version, manifest_dir, kind, msg["target"]["name"], [msg["executable"]])
        )
    found.sort(key=lambda p: (p.package, KIND_ORDER.get(p.kind, 3), p.name))
    return found


def run(program, target_dir, out_lock, extra_args=(), what=""):
    env = dict(os.environ)
    env.update(
        {
            "CARGO_MANIFEST_DIR": program.manifest_dir,
            "CARGO_PKG_NAME": program.package,
            "CARGO_PKG_VERSION": program.version,
            "CARGO_CRATE_NAME": program.name.replace("-", "_"),
        }
    )
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in [os.path.join(target_dir, "debug", "deps"), os.path.join(target_dir, "debug"),
                    env.get("LD_LIBRARY_PATH", "")] if p
    )
    started = time.monotonic()
    proc = subprocess.run(
        program.argv + list(extra_args),
        cwd=program.manifest_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    seconds = time.monotonic() - started
    output = proc.stdout.decode("utf-8", "replace")
    word = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
    with out_lock:
        sys.stdout.write(
            f"\n\033[1m---- {program.label()}{what}: {word}, {seconds:.1f} s\033[0m\n"
        )
        sys.stdout.write(output)
        sys.stdout.flush()
    return proc.returncode, seconds, output


def rerun_alone(program, target_dir, out_lock):
    """Runs a program that failed in its lane once more, alone: its failed tests when the
    summary counts exactly those, else all of it (so no failure goes unrun when a line
    was broken or the program crashed). Not when too many tests failed."""
    names = FAILED_TEST.findall(program.output)
    counted = sum(int(n) for n in FAILED_COUNT.findall(program.output))
    if max(len(names), counted) > MOST_RERUN:
        return
    exact = bool(names) and len(names) == counted and program.kind != "doc"
    program.rerun = names if exact else []
    if exact:
        args, what = ["--exact", *names], f" (again alone: {', '.join(names)})"
    else:
        args, what = [], " (again alone, whole)"
    program.rerun_status, seconds, _ = run(program, target_dir, out_lock, args, what)
    program.seconds += seconds


def main():
    target_dir = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps"],
            stdout=subprocess.PIPE,
            check=True,
        ).stdout
    )["target_directory"]
    found = programs()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    doc = Program("", "", repo, "doc", "doc", ["cargo", "test", "--workspace", "--locked", "--doc"])
    lanes = {
        "livekit": [p for p in found if lane_of(p) == "livekit"],
        "rest": [p for p in found if lane_of(p) == "rest"] + [doc],
        "alone": [p for p in found if lane_of(p) == "alone"],
    }
    # A change in Cargo's messages must not turn into a run of no tests that passes.
    if not all(lanes.values()) or len(found) < 50:
        sizes = {name: len(items) for name, items in lanes.items()}
        print(f"test-lanes: found {len(found)} test programs {sizes}; expected more", file=sys.stderr)
        return 1
    out_lock = threading.Lock()
    lane_seconds = {}

    def lane(name):
        started = time.monotonic()
        for program in lanes[name]:
            program.status, program.seconds, program.output = run(program, target_dir, out_lock)
        lane_seconds[name] = time.monotonic() - started

    threads = [threading.Thread(target=lane, args=(n,)) for n in ("livekit", "rest")]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lane("alone")
    everything = [(name, p) for name, items in lanes.items() for p in items]
    rerun_started = time.monotonic()
    for _, p in everything:
        if p.status != 0:
            rerun_alone(p, target_dir, out_lock)
    rerun_seconds = time.monotonic() - rerun_started
    total = time.monotonic() - started

    def word(p):
        if p.status == 0:
            return "ok"
        return "FLAKY" if p.rerun_status == 0 else "FAILED"

    print("\n\033[1m==> test programs, slowest first\033[0m")
    for name, p in sorted(everything, key=lambda x: -x[1].seconds):
        if p.seconds >= 1.0 or p.status != 0:
            print(f"{p.seconds:8.1f} s  {word(p):6}  [{name}] {p.label()}")
    for name in lanes:
        print(f"lane {name}: {lane_seconds[name] / 60:.1f} min")
    if rerun_seconds >= 1.0:
        print(f"failed tests again alone: {rerun_seconds / 60:.1f} min")
    print(f"all the tests: {total / 60:.1f} min")
    flaky = [p for _, p in everything if word(p) == "FLAKY"]
    if flaky:
        print("\nFLAKY (failed in a lane, passed again alone; the first output is above):")
        for p in flaky:
            print(f"  {p.label()}: {', '.join(p.rerun) or 'the whole program'}")
    failed = [p for _, p in everything if word(p) == "FAILED"]
    if failed:
        print("\nfailed:")
        for p in failed:
            print(f"  {p.label()}")
        return 1
    again = f" ({len(flaky)} of them again alone)" if flaky else ""
    print(f"all {len(everything)} test programs passed{again}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
