//! `outpost-livekit` against `outpost-room` with an official-SDK Python peer
//! (`tests/py/lk_peer.py`), each test in its own pair of network namespaces: the
//! server and the Python peers in one, the Rust client (entered with `setns`) in the
//! other, joined by a veth pair that tests can take down.
//! Needs root, iproute2 and the venv (see `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use outpost_livekit::{
    ConnectionState, DataOptions, DisconnectReason, Error, Room, RoomEvent, RoomEvents,
    RoomOptions, StreamOptions,
};
use outpost_tests::lkclient::{self, Env, PyPeer, in_netns};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "lk-client";

/// The Rust client plus the events it has not looked at yet.
struct Client {
    room: Room,
    events: RoomEvents,
    backlog: Vec<RoomEvent>,
}

impl Client {
    async fn connect(url: &str, identity: &str) -> Client {
        let token = lkclient::token(ROOM, identity, lkclient::DEV_SECRET).unwrap();
        let opts = RoomOptions::default().assistant("assistant");
        let (room, events) = Room::connect(url, &token, opts)
            .await
            .unwrap_or_else(|e| panic!("connect {url}: {e}"));
        Client {
            room,
            events,
            backlog: Vec::new(),
        }
    }

    /// The first event (backlog first) that `pred` accepts; others stay in the backlog.
    async fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&RoomEvent) -> bool,
    ) -> RoomEvent {
        if let Some(i) = self.backlog.iter().position(&mut pred) {
            return self.backlog.remove(i);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let ev = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "timed out after {timeout:?} waiting for {what}; backlog: {:?}",
                        self.backlog
                    )
                })
                .unwrap_or_else(|| panic!("event channel closed waiting for {what}"));
            if pred(&ev) {
                return ev;
            }
            self.backlog.push(ev);
        }
    }

    /// Sends a command to a Python peer.
    async fn cmd(&self, to: &str, cmd: Value) {
        self.room
            .send_data(
                cmd.to_string().into_bytes(),
                DataOptions::topic("cmd").to(to),
            )
            .await
            .unwrap();
    }

    /// Waits for a JSON reply with `op` from `from`.
    async fn reply(&mut self, from: &str, op: &str, timeout: Duration) -> Value {
        let from = from.to_owned();
        let op = op.to_owned();
        let ev = self
            .wait_for(&format!("{op} from {from}"), timeout, |ev| match ev {
                RoomEvent::Data(m)
                    if m.topic.as_deref() == Some("reply") && m.sender_identity == from =>
                {
                    serde_json::from_slice::<Value>(&m.payload)
                        .map(|v| v["op"] == op.as_str())
                        .unwrap_or(false)
                }
                _ => false,
            })
            .await;
        let RoomEvent::Data(m) = ev else {
            unreachable!()
        };
        serde_json::from_slice(&m.payload).unwrap()
    }

    /// Payloads (as strings) of every data message on `topic` seen so far, draining
    /// the event channel for `settle` first.
    async fn collect(&mut self, topic: &str, settle: Duration) -> Vec<(String, String)> {
        let deadline = tokio::time::Instant::now() + settle;
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, self.events.recv()).await {
            self.backlog.push(ev);
        }
        let mut out = Vec::new();
        self.backlog.retain(|ev| match ev {
            RoomEvent::Data(m) if m.topic.as_deref() == Some(topic) => {
                out.push((
                    m.sender_identity.clone(),
                    String::from_utf8_lossy(&m.payload).into_owned(),
                ));
                false
            }
            _ => true,
        });
        out
    }
}

fn sha_hex(data: &[u8]) -> String {
    let d = Sha256::digest(data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn numbers(n: usize) -> Vec<String> {
    (0..n).map(|i| i.to_string()).collect()
}

#[test]
fn data_packets_both_ways_with_topics_destinations_and_order() {
    let env = Env::start(Path::new(BIN)).expect("namespaces and server");
    let _assistant =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant").expect("assistant peer");
    let _carol = PyPeer::start(&env.pair, &env.server.url, ROOM, "carol").expect("carol peer");
    let url = env.server.url.clone();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app").await;
        let mut names: Vec<String> = c
            .room
            .participants()
            .into_iter()
            .map(|p| p.identity)
            .collect();
        names.sort();
        assert_eq!(names, vec!["assistant", "carol"]);
        assert_eq!(
            c.room.assistant().map(|p| p.identity).as_deref(),
            Some("assistant")
        );
        assert_eq!(c.room.connection_state(), ConnectionState::Connected);
        c.wait_for(
            "assistant joined",
            Duration::from_secs(5),
            |e| matches!(e, RoomEvent::AssistantJoined(p) if p.identity == "assistant"),
        )
        .await;

        // Rust → Python: 200 numbered packets to the assistant only.
        for i in 0..200 {
            c.room
                .send_data(
                    i.to_string().into_bytes(),
                    DataOptions::topic("seq").to("assistant"),
                )
                .await
                .unwrap();
        }
        c.cmd(
            "assistant",
            json!({"op": "report", "topic": "seq", "n": 200}),
        )
        .await;
        let r = c
            .reply("assistant", "report", Duration::from_secs(20))
            .await;
        assert_eq!(r["exact"], true, "assistant got {r}");
        // Python → Rust: the assistant echoed each, in order.
        let echoed = c.collect("echo:seq", Duration::from_millis(300)).await;
        assert_eq!(
            echoed.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>(),
            numbers(200)
        );
        assert!(echoed.iter().all(|(s, _)| s == "assistant"));

        // Destination filtering: carol saw none of it, and does not echo it.
        c.cmd("carol", json!({"op": "report", "topic": "seq", "n": 0}))
            .await;
        let r = c.reply("carol", "report", Duration::from_secs(10)).await;
        assert_eq!(r["count"], 0, "carol got addressed packets: {r}");

        // Python → Rust with destinations: only we get them; carol does not.
        c.cmd(
            "assistant",
            json!({"op": "send_seq", "topic": "down", "n": 100, "start": 0, "to": ["app"]}),
        )
        .await;
        c.reply("assistant", "sent_seq", Duration::from_secs(20))
            .await;
        let down = c.collect("down", Duration::from_millis(500)).await;
        assert_eq!(
            down.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>(),
            numbers(100)
        );
        c.cmd("carol", json!({"op": "report", "topic": "down", "n": 0}))
            .await;
        let r = c.reply("carol", "report", Duration::from_secs(10)).await;
        assert_eq!(r["count"], 0, "carol got packets addressed to app: {r}");

        // Broadcast reaches both.
        c.room
            .send_data(b"hello all".to_vec(), DataOptions::topic("bcast"))
            .await
            .unwrap();
        let mut from = Vec::new();
        while from.len() < 2 {
            let ev = c
                .wait_for(
                    "broadcast echoes",
                    Duration::from_secs(10),
                    |e| matches!(e, RoomEvent::Data(m) if m.topic.as_deref() == Some("echo:bcast")),
                )
                .await;
            if let RoomEvent::Data(m) = ev {
                assert_eq!(m.payload, b"hello all");
                from.push(m.sender_identity);
            }
        }
        from.sort();
        assert_eq!(from, vec!["assistant", "carol"]);

        // Too large for a packet: a clear error, nothing sent.
        let err = c
            .room
            .send_data(vec![0u8; 20_000], DataOptions::topic("big"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::PayloadTooLarge { size: 20_000, .. }),
            "{err}"
        );

        // Clean leave: the event, then sends are refused.
        c.room.leave().await.unwrap();
        c.wait_for("disconnected", Duration::from_secs(5), |e| {
            matches!(
                e,
                RoomEvent::Disconnected {
                    reason: DisconnectReason::ClientLeft
                }
            )
        })
        .await;
        assert_eq!(c.room.connection_state(), ConnectionState::Disconnected);
        let err = c
            .room
            .send_data(b"late".to_vec(), DataOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Closed(_)), "{err}");
        Ok(())
    })
    .unwrap();
}
