"""An Outpost app stand-in built on the official LiveKit SDK and msgpack, talking to
outpost-agent (scripted brain) through outpost-room. It checks the whole server side of
the protocol: early messages, hello/welcome, streamed deltas, client/either/server tool
requests, a denial, consent-aware timeouts with ToolUseCancel, messages typed ahead
(answered in order), an interrupt by a new hello, a conversation continued from the app's
history (hello `history`), an attachment (type 13), malformed input, and messages above
15 000 bytes as byte streams in both directions.

Env: LK_URL, LK_ROOM, AGENT (identity), E2E_FILE (a file this client "reads" for the
agent), GRACE_S (the agent's --result-grace-ms, in seconds). Prints one JSON report."""

import asyncio
import base64
import hashlib
import os
import time

import msgpack

from lkcommon import check, connect, fail, report, run, wait_remote

AGENT = os.environ.get("AGENT", "outpost-agent")
FILE = os.environ["E2E_FILE"]
GRACE = float(os.environ.get("GRACE_S", "2"))
TOPIC = "outpost"


def tool(name, props):
    return {"name": name, "description": f"{name} for the e2e test",
            "parameters": {"type": "object", "properties": props}}


class Client:
    def __init__(self, room):
        self.room = room
        self.inbox = []
        self.cursor = 0
        self.streams_in = 0
        room.on("data_received", self.on_data)
        room.register_byte_stream_handler(TOPIC, lambda r, s: asyncio.ensure_future(self.on_stream(r, s)))

    def on_data(self, p):
        if p.topic == TOPIC and p.participant and p.participant.identity == AGENT:
            self.inbox.append(msgpack.unpackb(bytes(p.data), raw=False))

    async def on_stream(self, reader, sender):
        buf = b""
        async for chunk in reader:
            buf += chunk
        if sender == AGENT:
            self.streams_in += 1
            self.inbox.append(msgpack.unpackb(buf, raw=False))

    async def send(self, msg):
        data = msgpack.packb(msg, use_bin_type=True)
        if len(data) <= 15_000:
            await self.room.local_participant.publish_data(data, topic=TOPIC, destination_identities=[AGENT])
        else:
            w = await self.room.local_participant.stream_bytes("msg", total_size=len(data), topic=TOPIC,
                                                               destination_identities=[AGENT])
            for i in range(0, len(data), 15_000):
                await w.write(data[i:i + 15_000])
            await w.aclose()

    async def next(self, pred, what, timeout=15):
        """The next message (after the cursor) matching pred; earlier ones are skipped."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while self.cursor < len(self.inbox):
                m = self.inbox[self.cursor]
                self.cursor += 1
                if pred(m):
                    return m
            await asyncio.sleep(0.01)
        fail(f"timed out after {timeout}s waiting for {what}; recent: {self.inbox[-5:]}")

    def since(self, start):
        return self.inbox[start:]


def of(t, **kv):
    return lambda m: m.get("type") == t and all(m.get(k) == v for k, v in kv.items())


async def turn(c, uid, text, on_request=None):
    """Sends a UserMessage and follows the turn to its AssistantMessage."""
    start = len(c.inbox)
    await c.send({"type": 4, "id": uid, "text": text})
    requests = []
    while True:
        m = await c.next(lambda m: m.get("type") in (5, 6), f"reply to {uid}", timeout=20)
        if m["type"] == 6:
            requests.append(m)
            if on_request:
                await on_request(m)
            continue
        check(m.get("inReplyTo") == uid, f"AssistantMessage answers {m.get('inReplyTo')}, not {uid}")
        msgs = c.since(start)
        deltas = sorted((d for d in msgs if d.get("type") == 8 and d["messageId"] == m["id"]), key=lambda d: d["seq"])
        seqs = [d["seq"] for d in deltas]
        check(seqs == list(range(len(seqs))), f"delta seqs {seqs}")
        assembled = "".join(d["delta"] for d in deltas)
        for r in requests:
            check(r["messageId"] == m["id"], "ToolUseRequest.messageId names the AssistantMessage")
        return m, requests, assembled, msgs


async def main():
    with open(FILE) as f:
        file_text = f.read()
    room = await connect("e2e-user")
    await wait_remote(room, AGENT, timeout=20)
    agent_kind = int(room.remote_participants[AGENT].kind)
    c = Client(room)
    out = {}

    # Before hello: refused as too early, and garbage is malformed.
    await c.send({"type": 4, "id": "early", "text": "hi"})
    e = await c.next(of(1), "early error")
    check(e["code"] == "unexpected_message" and e.get("refId") == "early", f"early: {e}")
    await room.local_participant.publish_data(b"\xc1\x00", topic=TOPIC, destination_identities=[AGENT])
    e = await c.next(of(1), "malformed error")
    check(e["code"] == "malformed_message", f"malformed: {e}")

    # Unsupported version: fatal error, no welcome.
    await c.send({"type": 2, "protocolVersion": 9, "minProtocolVersion": 7, "clientName": "e2e", "clientVersion": "0"})
    e = await c.next(of(1), "version error")
    check(e["code"] == "unsupported_version" and e.get("fatal") is True, f"version: {e}")

    await c.send({"type": 2, "protocolVersion": 3, "minProtocolVersion": 1, "clientName": "e2e",
                  "clientVersion": "0.0.1",
                  "tools": [tool("read_local_file", {"filePath": {"type": "string"}}),
                            tool("list_directory", {"path": {"type": "string"}}),
                            tool("search_files", {"root": {"type": "string"}}),
                            tool("calculator", {"expression": {"type": "string"}})]})
    w = await c.next(of(3), "welcome")
    # The agent speaks 1..=2: the highest version in both ranges.
    check(w["protocolVersion"] == 2, f"negotiated {w['protocolVersion']}")
    check("not an AI" in w["assistantName"], w["assistantName"])
    out["assistant_name"] = w["assistantName"]
    await c.next(of(9, state="idle"), "idle after welcome")

    # 1. A client tool: read_local_file, answered with the file's content (> 15 000 bytes,
    #    so the agent's delta and final message come back as byte streams).
    async def answer_read(req):
        check(req["toolName"] == "read_local_file" and req["execution"] == "client", f"request {req}")
        check(req["parameters"] == {"filePath": FILE}, f"parameters {req['parameters']}")
        check(isinstance(req.get("timeoutMs"), int) and req["timeoutMs"] > 0, "timeoutMs")
        await c.send({"type": 11, "id": req["id"], "state": "running"})
        await c.send({"type": 7, "id": req["id"], "success": True,
                      "result": {"content": file_text, "size": len(file_text)}})
    m, reqs, assembled, msgs = await turn(c, "u1", f"read {FILE}", answer_read)
    check(len(reqs) == 1, f"{len(reqs)} requests")
    check(file_text.strip() in m["text"], "final message carries the file content")
    check(assembled == m["text"], "deltas assemble to the final text")
    states = [x["state"] for x in msgs if x.get("type") == 9]
    check(states[:1] == ["thinking"] and "using_tool" in states and "speaking" in states, f"states {states}")
    check(c.streams_in >= 1, "large messages arrived as byte streams")
    out["read"] = {"text_len": len(m["text"]), "deltas_ok": True, "streams_in": c.streams_in, "states": states}

    # 2. either: the client declines with unknown_tool; the agent runs it and reports.
    async def decline(req):
        check(req["toolName"] == "calculator" and req["execution"] == "either", f"either request {req}")
        await c.send({"type": 7, "id": req["id"], "success": False, "errorCode": "unknown_tool",
                      "errorMessage": "Tool 'calculator' is not supported by this client"})
    start = len(c.inbox)
    m, reqs, _, msgs = await turn(c, "u2", "compute 6 * 7", decline)
    server_results = [x for x in msgs if x.get("type") == 7 and x["id"] == reqs[0]["id"]]
    check(len(server_results) == 1 and server_results[0]["success"] and server_results[0]["result"]["answer"] == 42,
          f"server's result for the either call: {server_results}")
    check("42" in m["text"] and "assistant's server" in m["text"], m["text"])
    out["either"] = m["text"]

    # 3. server: the agent runs it and sends the result for transparency.
    m, reqs, _, msgs = await turn(c, "u3", "calculate 2 + 3")
    check(reqs[0]["execution"] == "server" and reqs[0]["toolName"] == "server_calculator", f"{reqs[0]}")
    res = [x for x in msgs if x.get("type") == 7 and x["id"] == reqs[0]["id"]]
    check(len(res) == 1 and res[0]["result"]["answer"] == 5, f"server result {res}")
    check("= 5" in m["text"], m["text"])
    out["server"] = m["text"]

    # 4. A denial.
    async def deny(req):
        check(req["parameters"] == {"filePath": "~/.ssh/id_rsa"}, f"{req}")
        await c.send({"type": 7, "id": req["id"], "success": False, "errorCode": "permission_denied",
                      "errorMessage": "Permission denied by your policy: secrets are never shared"})
    m, _, _, _ = await turn(c, "u4", "read my ssh key", deny)
    check("refused" in m["text"] and "secrets are never shared" in m["text"], m["text"])
    out["denied"] = m["text"]

    # 5. Timeout: consent pauses the clock; once running, the agent cancels after
    #    timeoutMs + grace and tells the user.
    timing = {}

    async def stall(req):
        check(req["toolName"] == "search_files" and req["timeoutMs"] == 1, f"{req}")
        await c.send({"type": 11, "id": req["id"], "state": "awaiting_consent", "detail": "asking"})
        await asyncio.sleep(GRACE + 1.5)
        cancels = [x for x in c.inbox if x.get("type") == 10 and x["id"] == req["id"]]
        check(not cancels, "no cancel while awaiting consent")
        await c.send({"type": 11, "id": req["id"], "state": "running"})
        t0 = time.monotonic()
        cancel = await c.next(of(10, id=req["id"]), "ToolUseCancel after the deadline", timeout=GRACE + 5)
        timing["cancel_after_running_s"] = round(time.monotonic() - t0, 2)
        timing["reason"] = cancel.get("reason")
        timing["id"] = req["id"]
    m, _, _, _ = await turn(c, "u5", "show me a timeout", stall)
    check("timed out" in m["text"], m["text"])
    check(timing["cancel_after_running_s"] >= GRACE * 0.8, f"cancelled too early: {timing}")
    # A late result for the cancelled call is ignored silently.
    errs_before = sum(1 for x in c.inbox if x.get("type") == 1)
    await c.send({"type": 7, "id": timing["id"], "success": True, "result": {"late": True}})
    out["timeout"] = {"text": m["text"], **timing}

    # 6. Type-ahead: a new message while a client tool is pending waits its turn; both
    #    are answered, in order, and nothing is cancelled.
    await c.send({"type": 4, "id": "u6", "text": f"read {FILE}"})
    req = await c.next(of(6), "request of the first message")
    queued_at = len(c.inbox)
    await c.send({"type": 4, "id": "u7", "text": "calculate 1 + 1"})
    await asyncio.sleep(0.5)
    early = [x for x in c.inbox[queued_at:] if x.get("type") in (5, 6, 10)]
    check(not early, f"the queued message must wait for the first answer: {early}")
    await c.send({"type": 7, "id": req["id"], "success": True,
                  "result": {"content": "typed ahead", "size": 11}})
    first = await c.next(lambda x: x.get("type") == 5, "first answer")
    check(first.get("inReplyTo") == "u6" and "typed ahead" in first["text"], f"first: {first}")
    second = await c.next(lambda x: x.get("type") == 5, "second answer")
    check(second.get("inReplyTo") == "u7" and "= 2" in second["text"], f"second: {second}")
    check(not [x for x in c.inbox[queued_at:] if x.get("type") == 10], "no ToolUseCancel")
    out["queue"] = [first["inReplyTo"], second["inReplyTo"]]

    # 6b. A hello again (a rejoin) interrupts the turn in progress: its pending call is
    #     cancelled with the reason and the message closed; the conversation goes on.
    await c.send({"type": 4, "id": "u7b", "text": f"read {FILE}"})
    req = await c.next(of(6), "request to interrupt")
    await c.send({"type": 2, "protocolVersion": 1, "clientName": "e2e", "clientVersion": "0.0.1",
                  "conversationId": w["conversationId"],
                  "tools": [tool("read_local_file", {"filePath": {"type": "string"}})]})
    cancel = await c.next(of(10, id=req["id"]), "cancel on interrupt")
    closed = await c.next(lambda x: x.get("type") == 5 and x.get("inReplyTo") == "u7b", "interrupted message")
    check("(interrupted)" in closed["text"], closed["text"])
    w2 = await c.next(of(3), "welcome again")
    check(w2["conversationId"] == w["conversationId"], f"same conversation: {w2}")
    out["interrupt"] = {"reason": cancel.get("reason"), "closed": closed["text"][-20:]}

    # 7. A UserMessage above 15 000 bytes, sent as a byte stream.
    m, _, _, _ = await turn(c, "u8", "help" + " " * 20_000)
    check("scripted demo" in m["text"], m["text"][:80])

    # 8. Continuing a conversation the agent never held (the app's history, after the
    #    agent restarted): welcomed under the asked id, with the hello's history as memory.
    await c.send({"type": 2, "protocolVersion": 2, "minProtocolVersion": 1, "clientName": "e2e",
                  "clientVersion": "0.0.1", "conversationId": "from-the-history",
                  "history": [{"role": "user", "text": "remember the otter"},
                              {"role": "assistant", "text": "Noted."}]})
    w3 = await c.next(of(3), "welcome for the continued conversation")
    check(w3["conversationId"] == "from-the-history", f"continued under the asked id: {w3}")
    m, _, _, _ = await turn(c, "u9", "recall")
    check("remember the otter" in m["text"], f"the agent was told the earlier part: {m['text']}")
    out["continued"] = m["text"]

    # 9. An attachment (type 13, offered because the welcome lists "attachments"), then the
    #    message it belongs to: the agent's model is told its name, type, size and hash.
    check("attachments" in w3.get("capabilities", []), f"capabilities: {w3}")
    body = b"The otter swims at dawn.\n"
    digest = hashlib.sha256(body).hexdigest()
    await c.send({"type": 13, "id": "a1", "messageId": "u10", "name": "otter.txt",
                  "mimeType": "text/plain", "size": len(body), "sha256": digest,
                  "data": base64.b64encode(body).decode()})
    m, _, _, _ = await turn(c, "u10", "what did I give you?")
    check(f"otter.txt, text/plain, {len(body)} bytes, sha256 {digest}" in m["text"], m["text"])
    out["attachment"] = m["text"]

    await asyncio.sleep(0.3)
    errs_after = sum(1 for x in c.inbox if x.get("type") == 1)
    check(errs_after == errs_before, f"unexpected ErrorMessages: {[x for x in c.inbox if x.get('type') == 1][-3:]}")
    report(ok=True, agent_kind=agent_kind, **out)
    await room.disconnect()


run(main)
