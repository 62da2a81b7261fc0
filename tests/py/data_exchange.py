"""Two official-SDK participants exchange publish_data both ways, with topics and
destinations; a third proves that destination-limited packets skip it."""

import asyncio

from lkcommon import check, connect, report, run, wait_for, wait_remote


async def main():
    got = {"alice": [], "bob": [], "carol": []}

    alice = await connect("alice")
    bob = await connect("bob")
    carol = await connect("carol")
    for name, room in (("alice", alice), ("bob", bob), ("carol", carol)):
        room.on("data_received", lambda p, name=name: got[name].append(
            (p.participant.identity if p.participant else None, p.topic, bytes(p.data), p.kind)))
    for room, others in ((alice, ("bob", "carol")), (bob, ("alice", "carol")), (carol, ("alice", "bob"))):
        for o in others:
            await wait_remote(room, o)

    # Both ways, with topics, reliable.
    await alice.local_participant.publish_data(b"hello bob", topic="greet", destination_identities=["bob"])
    await bob.local_participant.publish_data(b"hello alice", topic="greet", destination_identities=["alice"])
    # Broadcast after the addressed packet: same sender, reliable, so carol seeing
    # the broadcast but not the addressed one proves destinations were honoured.
    await alice.local_participant.publish_data(b"to all", topic="news")
    # Ordering: 200 numbered packets.
    for i in range(200):
        await alice.local_participant.publish_data(f"{i}".encode(), topic="seq", destination_identities=["bob"])
    # Lossy packet on an idle link arrives too (best effort, but the link is local).
    await bob.local_participant.publish_data(b"lossy hi", reliable=False, topic="lossy")

    await wait_for(lambda: any(t == "greet" for _, t, _, _ in got["bob"]), 10, "bob's greeting")
    await wait_for(lambda: any(t == "greet" for _, t, _, _ in got["alice"]), 10, "alice's greeting")
    await wait_for(lambda: any(t == "news" for _, t, _, _ in got["carol"]), 10, "carol's news")
    await wait_for(lambda: sum(1 for _, t, _, _ in got["bob"] if t == "seq") == 200, 20, "200 sequenced packets")

    check(("alice", "greet", b"hello bob") in [(a, b, c) for a, b, c, _ in got["bob"]], f"bob got {got['bob'][:3]}")
    check(("bob", "greet", b"hello alice") in [(a, b, c) for a, b, c, _ in got["alice"]], f"alice got {got['alice'][:3]}")
    check(all(t != "greet" for _, t, _, _ in got["carol"]), f"carol saw addressed packets: {got['carol']}")
    seq = [int(d) for _, t, d, _ in got["bob"] if t == "seq"]
    check(seq == list(range(200)), f"reliable order broken: {seq[:20]}...")
    check(all(s == "alice" for s, t, _, _ in got["bob"] if t == "seq"), "sender identity not stamped")
    lossy_seen = any(t == "lossy" for _, t, _, _ in got["alice"])

    report(scenario="data_exchange", ok=True, seq=len(seq), lossy_seen=lossy_seen)
    for r in (alice, bob, carol):
        await r.disconnect()


run(main)
