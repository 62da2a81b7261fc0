"""An official-SDK participant driven by the Rust client under test
(tests/tests/livekit_client.rs).

It joins as LK_IDENTITY (default "assistant") and obeys JSON commands that arrive as
reliable data on topic "cmd" from any participant. Answers go back to the commanding
participant as reliable data on topic "reply" (JSON). It echoes every other user
packet back to its sender on topic "echo:<topic>", and answers every incoming byte or
text stream with {"op": "stream_sha", ...} (size and SHA-256 of what it read).

Prints "ready" on stdout once connected, then JSON lines of what it did.
Environment: LK_URL, LK_IDENTITY, LK_ROOM, LK_API_KEY, LK_API_SECRET, and LK_STARTUP
(a JSON command to run once connected).
"""

import asyncio
import hashlib
import json
import os
import sys
import tempfile

from livekit import rtc

from lkcommon import ROOM, URL, finish, inbound_stats, token

IDENTITY = os.environ.get("LK_IDENTITY", "assistant")


def log(**kv):
    print(json.dumps(kv), flush=True)


class Peer:
    def __init__(self):
        self.room = None
        self.seen = {}  # topic -> list of payload strings, in arrival order
        self.done = asyncio.Event()
        self.tasks = set()
        self.presence = []  # ["joined"|"left", identity, sid] as the SDK reported them
        self.reconnects = []  # "reconnecting" / "reconnected", in order
        self.held = []  # stream writers left open on purpose (hold_streams)
        self.paused = {}  # stream id -> (writer, payload) (stream_paused)
        self.track_events = []  # [event, identity, track sid] as the SDK reported them
        self.speakers = []  # identities in each active_speakers_changed, in order
        self.tone = None  # (Tone, publication) while publishing a tone (publish_tone)
        self.speaker = None  # audio_tone.Player of publish_speech
        self.listeners = {}  # track sid -> [asyncio.Queue of its played-out frames]

    def spawn(self, coro):
        t = asyncio.ensure_future(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    async def connect(self):
        room = rtc.Room()
        room.on("data_received", self.on_data)
        room.register_byte_stream_handler("bytes", lambda r, s: self.spawn(self.read_bytes(r, s)))
        room.register_byte_stream_handler("file", lambda r, s: self.spawn(self.read_bytes(r, s)))
        room.register_text_stream_handler("text", lambda r, s: self.spawn(self.read_text(r, s)))
        room.on("reconnecting", lambda: self.on_reconnect("reconnecting"))
        room.on("reconnected", lambda: self.on_reconnect("reconnected"))
        room.on("participant_connected",
                lambda p: self.presence.append(["joined", p.identity, p.sid]))
        room.on("participant_disconnected",
                lambda p: self.presence.append(["left", p.identity, p.sid]))
        room.on("track_published",
                lambda pub, p: self.track_events.append(["published", p.identity, pub.sid]))
        room.on("track_unpublished",
                lambda pub, p: self.track_events.append(["unpublished", p.identity, pub.sid]))
        room.on("track_muted",
                lambda p, pub: self.track_events.append(["muted", p.identity, pub.sid]))
        room.on("track_unmuted",
                lambda p, pub: self.track_events.append(["unmuted", p.identity, pub.sid]))
        room.on("track_subscribed", self.on_track_subscribed)
        room.on("active_speakers_changed",
                lambda speakers: self.speakers.append([p.identity for p in speakers]))
        auto = os.environ.get("LK_AUTO_SUBSCRIBE") == "1"  # outpost-room has no manual subscription
        await room.connect(URL, token(IDENTITY, ROOM), rtc.RoomOptions(auto_subscribe=auto))
        self.room = room

    def on_reconnect(self, what):
        self.reconnects.append(what)
        log(event=what)

    def on_track_subscribed(self, track, pub, participant):
        self.track_events.append(["subscribed", participant.identity, pub.sid])
        # Every subscribed audio track is played out at once, as an app would: its
        # frames go to whoever listens (hear_speech), otherwise nowhere.
        if track.kind == rtc.TrackKind.KIND_AUDIO:
            self.spawn(self.play_out(track, pub.sid))

    async def play_out(self, track, sid):
        stream = rtc.AudioStream(track, sample_rate=48000, num_channels=1)
        async for ev in stream:
            for q in self.listeners.get(sid, []):
                q.put_nowait(ev.frame)

    async def audio_track(self, identity, sid=None):
        """The subscribed track of `identity`'s audio publication `sid` (or its first)."""
        pub = None
        for _ in range(100):
            p = self.room.remote_participants.get(identity)
            pubs = [x for x in (p.track_publications.values() if p else [])
                    if x.kind == rtc.TrackKind.KIND_AUDIO and sid in (None, x.sid)]
            if pubs:
                pub = pubs[0]
                break
            await asyncio.sleep(0.1)
        if pub is None:
            raise RuntimeError(f"no audio track from {identity}")
        pub.set_subscribed(True)
        for _ in range(100):
            if pub.track is not None:
                break
            await asyncio.sleep(0.1)
        if pub.track is None:
            raise RuntimeError("the track was not subscribed within 10 s")
        return pub

    async def reply(self, to, **kv):
        await self.room.local_participant.publish_data(
            json.dumps(kv).encode(), topic="reply", destination_identities=[to])

    async def read_bytes(self, reader, sender):
        h = hashlib.sha256()
        n = 0
        error = None
        try:
            async for chunk in reader:
                h.update(chunk)
                n += len(chunk)
        except Exception as e:  # noqa: BLE001 - reported to the test
            error = str(e)
        info = reader.info
        log(event="stream", kind="bytes", id=info.stream_id, size=n, error=error)
        await self.reply(sender, op="stream_sha", kind="bytes", id=info.stream_id, topic=info.topic,
                         name=info.name, size=n, sha256=h.hexdigest(), error=error,
                         attributes=dict(info.attributes or {}))

    async def read_text(self, reader, sender):
        error = None
        text = ""
        try:
            text = await reader.read_all()
        except Exception as e:  # noqa: BLE001
            error = str(e)
        data = text.encode()
        info = reader.info
        log(event="stream", kind="text", id=info.stream_id, size=len(data), error=error)
        await self.reply(sender, op="stream_sha", kind="text", id=info.stream_id, topic=info.topic,
                         size=len(data), sha256=hashlib.sha256(data).hexdigest(), error=error)

    def on_data(self, p):
        sender = p.participant.identity if p.participant else ""
        topic = p.topic or ""
        if topic == "cmd":
            self.spawn(self.command(sender, json.loads(bytes(p.data))))
            return
        self.seen.setdefault(topic, []).append(bytes(p.data).decode(errors="replace"))
        if topic.startswith("noecho"):
            return
        self.spawn(self.room.local_participant.publish_data(
            bytes(p.data), topic="echo:" + topic, destination_identities=[sender]))

    async def command(self, sender, cmd):
        op = cmd.get("op")
        log(event="cmd", op=op)
        lp = self.room.local_participant
        if op == "ping":
            await self.reply(sender, op="pong", n=cmd.get("n"))
        elif op == "whoami":
            # Presence as this SDK saw it, its own sid, and its reconnect events.
            await self.reply(sender, op="whoami", sid=self.room.local_participant.sid,
                             presence=self.presence, reconnects=self.reconnects,
                             remote={i: p.sid for i, p in self.room.remote_participants.items()})
        elif op == "send_seq":
            to = cmd.get("to") or [sender]
            for i in range(cmd["start"], cmd["start"] + cmd["n"]):
                await lp.publish_data(str(i).encode(), topic=cmd["topic"], destination_identities=to)
            await self.reply(sender, op="sent_seq", topic=cmd["topic"])
        elif op == "report":
            got = self.seen.get(cmd["topic"], [])
            nums = [int(x) for x in got]
            expected = list(range(cmd["n"]))
            await self.reply(sender, op="report", topic=cmd["topic"], count=len(nums),
                             dups=len(nums) - len(set(nums)), ordered=nums == sorted(nums),
                             missing=[i for i in expected if i not in set(nums)][:50],
                             exact=nums == expected)
        elif op == "stream_bytes":
            size = cmd["size"]
            payload = os.urandom(size)
            writer = await lp.stream_bytes("blob.bin", total_size=size, topic=cmd.get("topic", "bytes"),
                                           destination_identities=[sender])
            step = 64 * 1024
            for i in range(0, size, step):
                await writer.write(payload[i:i + step])
            await writer.aclose()
            await self.reply(sender, op="sent_stream", id=writer.info.stream_id, size=size,
                             sha256=hashlib.sha256(payload).hexdigest())
        elif op == "send_file":
            size = cmd["size"]
            payload = os.urandom(size)
            with tempfile.NamedTemporaryFile(prefix="lkpeer-", suffix=".bin", delete=False) as f:
                f.write(payload)
                path = f.name
            try:
                info = await lp.send_file(path, topic=cmd.get("topic", "file"), destination_identities=[sender])
            finally:
                os.unlink(path)
            await self.reply(sender, op="sent_stream", id=info.stream_id, size=size, name=info.name,
                             sha256=hashlib.sha256(payload).hexdigest())
        elif op == "send_text":
            text = cmd.get("text") or ("héllo ✓ " * (cmd.get("size", 16) // 10 + 1))
            info = await lp.send_text(text, topic=cmd.get("topic", "text"), destination_identities=[sender])
            data = text.encode()
            await self.reply(sender, op="sent_stream", id=info.stream_id, size=len(data),
                             sha256=hashlib.sha256(data).hexdigest())
        elif op == "stream_cancel":
            writer = await lp.stream_bytes("cut.bin", topic=cmd.get("topic", "bytes"),
                                           destination_identities=[sender])
            await writer.write(os.urandom(40_000))
            await writer.aclose(reason="peer cancelled")
            await self.reply(sender, op="sent_cancel", id=writer.info.stream_id)
        elif op == "hold_streams":
            # A hostile participant: opens n byte streams (one byte each) and never
            # finishes them. "to" defaults to the commanding participant; "wait_for"
            # first waits until that identity is in the room (startup commands).
            to = cmd.get("to") or [sender]
            if cmd.get("wait_for"):
                while cmd["wait_for"] not in self.room.remote_participants:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(cmd.get("settle", 0))
            ids = []
            for _ in range(cmd["n"]):
                w = await lp.stream_bytes("held.bin", topic=cmd.get("topic", "bytes"),
                                          destination_identities=to)
                await w.write(b"x")
                self.held.append(w)
                ids.append(w.info.stream_id)
            log(event="held", n=len(ids))
            # Also on stderr (its log file), which a test can read after "ready".
            print(json.dumps({"event": "held", "n": len(ids)}), file=sys.stderr, flush=True)
            if sender:
                await self.reply(sender, op="held", ids=ids)
        elif op == "stream_paused":
            # A broadcast byte stream (no destinations) that stops after `first` bytes
            # until "stream_resume" names it.
            size = cmd["size"]
            payload = os.urandom(size)
            w = await lp.stream_bytes("paused.bin", total_size=size, topic=cmd.get("topic", "bytes"))
            await w.write(payload[:cmd["first"]])
            self.paused[w.info.stream_id] = (w, payload)
            await self.reply(sender, op="paused", id=w.info.stream_id)
        elif op == "stream_resume":
            w, payload = self.paused.pop(cmd["id"])
            await w.write(payload[cmd["first"]:])
            await w.aclose()
            await self.reply(sender, op="sent_stream", id=cmd["id"], size=len(payload),
                             sha256=hashlib.sha256(payload).hexdigest())
        elif op == "leave_rejoin":
            await self.room.disconnect()
            log(event="left")
            await asyncio.sleep(cmd.get("delay", 1.0))
            await self.connect()
            log(event="rejoined")
        elif op == "hear_tone":
            # Subscribe to `from`'s audio track `sid` (or its first), record `seconds`
            # and analyse it like audio_tone.py (frequency, gaps).
            import audio_tone
            result = {}
            try:
                pub = await self.audio_track(cmd["from"], cmd.get("sid"))
                samples, arrivals = await audio_tone.record(pub.track, cmd.get("seconds", 5))
                result = audio_tone.analyse(samples, arrivals)
                result.update(sid=pub.sid, mime=pub.mime_type, source=int(pub.source))
            except (Exception, SystemExit) as e:  # noqa: BLE001 - reported to the test
                result = {"error": repr(e)}
            await self.reply(sender, op="heard", **result)
        elif op == "hear_speech":
            # Subscribe to `from`'s audio track, reply "listening" once frames flow,
            # record `seconds`, and compare with the reference WAV `ref` (speech.py).
            import numpy as np
            import speech
            result = {}
            try:
                pub = await self.audio_track(cmd["from"], cmd.get("sid"))
                q = asyncio.Queue()
                self.listeners.setdefault(pub.sid, []).append(q)
                chunks = []
                want = int(cmd["seconds"] * speech.RATE)
                got = 0
                await self.reply(sender, op="listening", sid=pub.sid)
                while got < want:
                    frame = await asyncio.wait_for(q.get(), 2)
                    x = np.frombuffer(frame.data, dtype=np.int16).astype(np.float64)
                    chunks.append(x)
                    got += len(x)
                self.listeners[pub.sid].remove(q)
                rec = np.concatenate(chunks)
                if cmd.get("save"):
                    rec.astype("<i2").tofile(cmd["save"])
                _, ref = speech.read_wav(cmd["ref"])
                result = speech.compare(ref, rec)
                result["receiver"] = await inbound_stats(pub.track)
            except (Exception, SystemExit) as e:  # noqa: BLE001 - reported to the test
                result = {"error": repr(e)}
            await self.reply(sender, op="heard_speech", **result)
        elif op == "publish_speech":
            # Publish a track that carries silence until "play_speech" plays the WAV
            # `ref` into it once (then silence again).
            import audio_tone
            import speech
            source, track, pub = await audio_tone.publish(self.room)
            self.speaker = audio_tone.Player(source)
            await self.reply(sender, op="speech_published", sid=pub.sid)
        elif op == "play_speech":
            import speech
            _, ref = speech.read_wav(cmd["ref"])
            done = self.speaker.play(ref)
            await self.reply(sender, op="playing")
            await done
            await self.reply(sender, op="played")
        elif op == "track_events":
            await self.reply(sender, op="track_events", events=self.track_events)
        elif op == "speakers":
            # Every active-speaker change the server sent, oldest first; then cleared.
            # Taken before the reply is awaited: a change arriving while it is sent
            # belongs to the next answer (clearing after the await lost it once, in CI).
            changes, self.speakers = self.speakers, []
            await self.reply(sender, op="speakers", changes=changes)
        elif op == "publish_tone":
            import audio_tone
            source, track, pub = await audio_tone.publish(self.room)
            self.tone = (audio_tone.Tone(source, cmd.get("freq", audio_tone.FREQ)), pub, track)
            await self.reply(sender, op="tone_published", sid=pub.sid)
        elif op == "mute_tone":
            tone, pub, track = self.tone
            track.mute() if cmd.get("muted", True) else track.unmute()
            await self.reply(sender, op="tone_muted", sid=pub.sid)
        elif op == "stop_tone":
            tone, pub, track = self.tone
            self.tone = None
            await self.room.local_participant.unpublish_track(pub.sid)
            await tone.stop()
            await self.reply(sender, op="tone_stopped", sid=pub.sid)
        elif op == "exit":
            self.done.set()


async def main():
    peer = Peer()
    await peer.connect()
    print("ready", flush=True)
    if os.environ.get("LK_STARTUP"):
        # A command to run at once, as if sent by nobody (replies are not sent).
        peer.spawn(peer.command("", json.loads(os.environ["LK_STARTUP"])))
    await peer.done.wait()
    await asyncio.sleep(0.3)
    await peer.room.disconnect()


try:
    asyncio.run(main())
except KeyboardInterrupt:
    pass
finish(0)
