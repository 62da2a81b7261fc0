"""A LiveKit standard token endpoint (docs.livekit.io "Endpoint token generation"), as an
app developer writes one with the official `livekit-api`: POST JSON with any of
`room_name`, `participant_identity`, `participant_name`, `participant_metadata`,
`participant_attributes` and `room_config` (passed to the token as it is, agent dispatch
included) → 201 with `server_url` and `participant_token`.

Environment: LK_URL (the server_url handed out), LK_API_KEY, LK_API_SECRET, TOKEN_BIND
(HOST:PORT to listen on). Prints {"event": "listening", "url": ...} once it listens, and one
line per request it served ({"event": "minted", "request": {...}}).
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf import json_format
from livekit import api

URL = os.environ["LK_URL"]
KEY = os.environ.get("LK_API_KEY", "devkey")
SECRET = os.environ.get("LK_API_SECRET", "secret")
HOST, PORT = os.environ.get("TOKEN_BIND", "127.0.0.1:0").rsplit(":", 1)


def report(**kv):
    print(json.dumps(kv), flush=True)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_args):
        pass

    def do_POST(self):
        size = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(size) or b"{}")
        except ValueError:
            return self.answer(400, {"error": "the body is not JSON"})
        identity = body.get("participant_identity") or "user"
        token = (
            api.AccessToken(KEY, SECRET)
            .with_identity(identity)
            .with_name(body.get("participant_name") or identity)
            .with_metadata(body.get("participant_metadata") or "")
            .with_attributes(body.get("participant_attributes") or {})
            .with_grants(api.VideoGrants(room_join=True, room=body.get("room_name") or "room"))
        )
        if body.get("room_config"):
            config = json_format.ParseDict(body["room_config"], api.RoomConfiguration())
            token = token.with_room_config(config)
        report(event="minted", request=body)
        self.answer(201, {"server_url": URL, "participant_token": token.to_jwt()})

    def answer(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = HTTPServer((HOST, int(PORT)), Handler)
report(event="listening", url=f"http://{HOST}:{server.server_address[1]}")
try:
    server.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
