"""Participant attributes, metadata and name set through the signal connection
(`UpdateParticipantMetadata`), between official-SDK participants: the change reaches
the others as events and later joiners in the participant list, an empty value
deletes a key, the setter's own call completes (the server answers with a
`RequestResponse`), and a participant without `canUpdateOwnMetadata` changes nothing."""

import asyncio
import time

from lkcommon import check, connect, report, run, wait_for


async def timed(coro, what, limit=3.0):
    """Awaits an SDK request; it must complete well before the SDK's own 5 s timeout,
    which is what happens when the server never answers."""
    t0 = time.monotonic()
    await asyncio.wait_for(coro, 10)
    secs = time.monotonic() - t0
    check(secs < limit, f"{what} took {secs:.2f}s: the server did not answer the request")
    return secs


async def main():
    agent = await connect("agent", update_own_metadata=True)
    user = await connect("user")
    await wait_for(lambda: "agent" in user.remote_participants, 10, "user to see agent")
    changes = []  # (identity, changed attributes) as the user's SDK reported them
    metas = []
    names = []
    user.on("participant_attributes_changed", lambda changed, p: changes.append((p.identity, dict(changed))))
    user.on("participant_metadata_changed", lambda p, old, new: metas.append((p.identity, old, new)))
    user.on("participant_name_changed", lambda p, old, new: names.append((p.identity, old, new)))
    own = []
    agent.on("participant_attributes_changed", lambda changed, p: own.append((p.identity, dict(changed))))

    # Set: the other side sees the event with the value and the participant's attributes.
    secs = await timed(agent.local_participant.set_attributes({"lk.agent.state": "thinking"}), "set_attributes")
    await wait_for(lambda: ("agent", {"lk.agent.state": "thinking"}) in changes, 10, "attribute change at user")
    remote = user.remote_participants["agent"]
    check(dict(remote.attributes) == {"lk.agent.state": "thinking"}, f"user sees {dict(remote.attributes)}")
    # The setter hears about its own change too (livekit-server sends it the update).
    await wait_for(lambda: ("agent", {"lk.agent.state": "thinking"}) in own, 10, "own attribute change")
    check(dict(agent.local_participant.attributes) == {"lk.agent.state": "thinking"},
          f"agent's own attributes: {dict(agent.local_participant.attributes)}")

    # A second key merges with the first.
    await timed(agent.local_participant.set_attributes({"lk.extra": "1"}), "set_attributes (merge)")
    await wait_for(lambda: dict(remote.attributes) == {"lk.agent.state": "thinking", "lk.extra": "1"}, 10,
                   "merged attributes at user")

    # Metadata and name.
    await timed(agent.local_participant.set_metadata('{"role": "assistant"}'), "set_metadata")
    await wait_for(lambda: ("agent", "", '{"role": "assistant"}') in metas, 10, "metadata change at user")
    await timed(agent.local_participant.set_name("Agent Smith"), "set_name")
    await wait_for(lambda: ("agent", "Agent", "Agent Smith") in names, 10, "name change at user")

    # A later joiner gets all of it in the participant list.
    late = await connect("late")
    await wait_for(lambda: "agent" in late.remote_participants, 10, "late joiner to see agent")
    seen = late.remote_participants["agent"]
    check(dict(seen.attributes) == {"lk.agent.state": "thinking", "lk.extra": "1"},
          f"late joiner sees attributes {dict(seen.attributes)}")
    check(seen.metadata == '{"role": "assistant"}', f"late joiner sees metadata {seen.metadata!r}")
    check(seen.name == "Agent Smith", f"late joiner sees name {seen.name!r}")

    # Deleting a key: an empty value.
    await timed(agent.local_participant.set_attributes({"lk.extra": ""}), "set_attributes (delete)")
    await wait_for(lambda: ("agent", {"lk.extra": ""}) in changes, 10, "deletion at user")
    check(dict(remote.attributes) == {"lk.agent.state": "thinking"}, f"after delete user sees {dict(remote.attributes)}")
    await wait_for(lambda: dict(late.remote_participants["agent"].attributes) == {"lk.agent.state": "thinking"},
                   10, "deletion at the late joiner")

    # Without the grant: the request is answered (the call completes) and nothing changes.
    agent_seen_user = []
    agent.on("participant_attributes_changed",
             lambda changed, p: agent_seen_user.append(p.identity) if p.identity == "user" else None)
    await timed(user.local_participant.set_attributes({"lk.agent.state": "forged"}), "refused set_attributes")
    await asyncio.sleep(1.0)
    check(agent_seen_user == [], f"a refused update still reached others: {agent_seen_user}")
    check(dict(agent.remote_participants["user"].attributes) == {},
          f"refused update changed attributes: {dict(agent.remote_participants['user'].attributes)}")

    report(scenario="attributes", ok=True, set_attributes_s=round(secs, 3))
    for r in (late, user, agent):
        await r.disconnect()


run(main)
