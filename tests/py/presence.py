"""A third participant sees a join and a leave; a peer that vanishes without leaving
(kill -9) is removed within the server's ping timeout (LK_PING_TIMEOUT seconds)."""

import asyncio
import os
import signal
import subprocess
import sys
import time

from lkcommon import check, connect, report, run, wait_for

PING_TIMEOUT = float(os.environ.get("LK_PING_TIMEOUT", "4"))


async def main():
    watcher = await connect("watcher")
    events = []
    watcher.on("participant_connected", lambda p: events.append(("join", p.identity, time.monotonic())))
    watcher.on("participant_disconnected", lambda p: events.append(("leave", p.identity, time.monotonic())))

    # A polite participant: joins, then leaves.
    polite = await connect("polite")
    await wait_for(lambda: ("join", "polite") in [e[:2] for e in events], 10, "watcher to see polite join")
    await polite.disconnect()
    await wait_for(lambda: ("leave", "polite") in [e[:2] for e in events], 10, "watcher to see polite leave")

    # A participant in another process that is killed with SIGKILL.
    child = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(__file__), "hang.py"), "victim"],
        stdout=subprocess.PIPE, text=True)
    try:
        line = await asyncio.get_running_loop().run_in_executor(None, child.stdout.readline)
        check(line.strip() == "joined", f"victim said {line!r}")
        await wait_for(lambda: ("join", "victim") in [e[:2] for e in events], 10, "watcher to see victim")
        os.kill(child.pid, signal.SIGKILL)
        killed = time.monotonic()
        child.wait()
        # Ping timeout plus one ping interval of slack for the check cadence.
        await wait_for(lambda: ("leave", "victim") in [e[:2] for e in events], PING_TIMEOUT + 5,
                       "victim to be removed after kill -9")
    finally:
        if child.poll() is None:
            child.kill()
    gone_after = [t for k, i, t in events if (k, i) == ("leave", "victim")][0] - killed
    check(gone_after <= PING_TIMEOUT + 2, f"victim removed after {gone_after:.1f}s, ping timeout {PING_TIMEOUT}s")
    report(scenario="presence", ok=True, vanished_removed_after_s=round(gone_after, 2))
    await watcher.disconnect()


run(main)
