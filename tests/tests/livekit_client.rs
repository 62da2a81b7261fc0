//! `outpost-livekit` against both servers (`outpost-room` and the real livekit-server,
//! see `outpost_tests::server`) with an official-SDK Python peer
//! (`tests/py/lk_peer.py`), each test in its own pair of network namespaces: the
//! server and the Python peers in one, the Rust client (entered with `setns`) in the
//! other, joined by a veth pair that tests can take down.
//! Needs root, iproute2 and the venv (see `outpost_tests::python`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::time::{Duration, Instant};

use outpost_livekit::{
    ConnectionState, DataOptions, DisconnectReason, Error, Room, RoomEvent, RoomOptions,
    StreamOptions,
};
use outpost_tests::cutproxy::CutProxy;
use outpost_tests::lkclient::{self, Env, PyPeer, in_netns};
use outpost_tests::pki::TestPki;
use outpost_tests::server::ServerKind;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "lk-client";

outpost_tests::both_servers!(
    data_packets_both_ways_with_topics_destinations_and_order,
    data_streams_10mib_both_ways_files_text_cancel_and_cap,
    reconnects_after_the_server_restarts_without_loss_or_duplicates,
    reconnects_after_the_link_drops_without_loss_or_duplicates,
    assistant_leave_and_rejoin_are_reported,
    bad_token_and_unreachable_urls_fail_clearly_and_quickly,
    connects_through_a_token_endpoint,
    resumes_after_the_signal_connection_is_cut,
    a_peer_connection_failure_is_resumed_without_loss_or_duplicates,
    another_participant_cannot_inject_into_the_assistants_stream,
    seventy_unfinished_streams_from_a_participant_do_not_block_the_assistant,
    an_idle_stream_is_dropped_after_the_timeout_and_frees_its_slot,
);

/// The Rust client plus the events it has not looked at yet.
struct Client {
    room: Room,
    events: lkclient::Events,
}

impl Client {
    /// The assistant peer's account of the reliable packets numbered on topic "seq": the
    /// first `n` exactly once and in order (`exact`), or what went wrong.
    async fn seq_report(&mut self, n: usize) -> Value {
        self.cmd("assistant", json!({"op": "report", "topic": "seq", "n": n}))
            .await;
        self.reply("assistant", "report", Duration::from_secs(20))
            .await
    }

    /// Who the assistant peer is and whom it saw join and leave (`presence`).
    async fn whoami(&mut self) -> Value {
        self.cmd("assistant", json!({"op": "whoami"})).await;
        self.reply("assistant", "whoami", Duration::from_secs(10))
            .await
    }

    async fn connect(url: &str, identity: &str) -> Client {
        Self::connect_with(url, identity, RoomOptions::default()).await
    }

    async fn connect_with(url: &str, identity: &str, opts: RoomOptions) -> Client {
        let (room, events) = lkclient::join(url, ROOM, identity, opts.assistant("assistant")).await;
        Client { room, events }
    }

    /// Sends a command to a Python peer.
    async fn cmd(&self, to: &str, cmd: Value) {
        lkclient::send_cmd(&self.room, to, &cmd).await;
    }

    /// Waits for a JSON reply with `op` from `from`.
    async fn reply(&mut self, from: &str, op: &str, timeout: Duration) -> Value {
        self.events.reply(from, op, timeout).await
    }

    /// Payloads (as strings) of every data message on `topic` seen so far, draining
    /// the event channel for `settle` first.
    async fn collect(&mut self, topic: &str, settle: Duration) -> Vec<(String, String)> {
        self.events.settle(settle).await;
        let mut out = Vec::new();
        self.events.backlog.retain(|ev| match ev {
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

fn data_packets_both_ways_with_topics_destinations_and_order(kind: ServerKind) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
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
        let joined =
            |e: &RoomEvent| matches!(e, RoomEvent::AssistantJoined(p) if p.identity == "assistant");
        c.events
            .wait_for("assistant joined", Duration::from_secs(5), joined)
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
        let r = c.seq_report(200).await;
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
                .events
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
        c.events
            .wait_for("disconnected", Duration::from_secs(5), |e| {
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
    if kind == ServerKind::LiveKit {
        // livekit-server takes us for what we are, not for the official Rust SDK.
        let log = env.server.proc.stderr();
        let ours = log
            .lines()
            .find(|l| l.contains("\"participant\": \"app\"") && l.contains("clientInfo"))
            .unwrap_or_default();
        assert!(
            !ours.contains("RUST")
                && ours.contains(&format!("\"version\": \"{}\"", env!("CARGO_PKG_VERSION"))),
            "how livekit-server saw us: {ours}"
        );
    }
}

/// Waits for the next incoming stream on `topic`.
async fn next_stream(c: &mut Client, topic: &str) -> outpost_livekit::StreamReader {
    let topic = topic.to_owned();
    let ev = c
        .events
        .wait_for(
            &format!("a stream on {topic}"),
            Duration::from_secs(30),
            |e| matches!(e, RoomEvent::StreamOpened(r) if r.info.topic == topic),
        )
        .await;
    let RoomEvent::StreamOpened(r) = ev else {
        unreachable!()
    };
    r
}

fn data_streams_10mib_both_ways_files_text_cancel_and_cap(kind: ServerKind) {
    const SIZE: usize = 10 * 1024 * 1024;
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let _assistant =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant").expect("assistant peer");
    let url = env.server.url.clone();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app").await;

        // Rust → Python: 10 MiB byte stream, checksum compared by the official SDK.
        let payload: Vec<u8> = (0..SIZE).map(|i| (i * 7 + i / 4099) as u8).collect();
        let mut w = c
            .room
            .stream_bytes(StreamOptions {
                topic: "bytes".into(),
                destination_identities: vec!["assistant".into()],
                name: Some("ten.bin".into()),
                total_length: Some(SIZE as u64),
                ..Default::default()
            })
            .unwrap();
        let progress = w.progress();
        let id = w.id().to_owned();
        let t0 = Instant::now();
        w.write(&payload).await.unwrap();
        w.close().await.unwrap();
        assert_eq!(
            *progress.borrow(),
            SIZE as u64,
            "progress counts every byte"
        );
        let r = c
            .reply("assistant", "stream_sha", Duration::from_secs(60))
            .await;
        eprintln!("10 MiB Rust → Python in {:?}", t0.elapsed());
        assert_eq!(r["id"], id.as_str());
        assert_eq!(r["size"], SIZE);
        assert_eq!(r["sha256"], sha_hex(&payload).as_str());
        assert_eq!(r["name"], "ten.bin");
        assert!(r["error"].is_null(), "{r}");

        // Python → Rust: 10 MiB stream_bytes.
        let t0 = Instant::now();
        c.cmd(
            "assistant",
            json!({"op": "stream_bytes", "size": SIZE, "topic": "bytes"}),
        )
        .await;
        let reader = next_stream(&mut c, "bytes").await;
        assert_eq!(reader.info.sender_identity, "assistant");
        assert_eq!(reader.info.total_length, Some(SIZE as u64));
        let got = reader.read_all().await.unwrap();
        eprintln!("10 MiB Python → Rust in {:?}", t0.elapsed());
        let sent = c
            .reply("assistant", "sent_stream", Duration::from_secs(30))
            .await;
        assert_eq!(got.len(), SIZE);
        assert_eq!(sent["sha256"], sha_hex(&got).as_str());

        // Python send_file → Rust.
        c.cmd(
            "assistant",
            json!({"op": "send_file", "size": 300_000, "topic": "file"}),
        )
        .await;
        let reader = next_stream(&mut c, "file").await;
        let name = reader.info.name.clone().unwrap();
        assert!(
            name.starts_with("lkpeer-") && name.ends_with(".bin"),
            "{name}"
        );
        let got = reader.read_all().await.unwrap();
        let sent = c
            .reply("assistant", "sent_stream", Duration::from_secs(30))
            .await;
        assert_eq!(sent["sha256"], sha_hex(&got).as_str());

        // Rust send_file → Python.
        // Its own folder: the test runs on both servers at once in this process.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, &payload[..123_456]).unwrap();
        let opts = StreamOptions {
            topic: "file".into(),
            destination_identities: vec!["assistant".into()],
            ..Default::default()
        };
        c.room.send_file(&path, opts).await.unwrap();
        let r = c
            .reply("assistant", "stream_sha", Duration::from_secs(30))
            .await;
        drop(dir);
        assert_eq!(r["name"], "notes.txt");
        assert_eq!(r["sha256"], sha_hex(&payload[..123_456]).as_str());

        // Text both ways (multi-byte characters across chunk boundaries).
        let text = "héllo ✓ 😀 ".repeat(4000);
        let opts = StreamOptions {
            topic: "text".into(),
            destination_identities: vec!["assistant".into()],
            ..Default::default()
        };
        c.room.send_text(&text, opts).await.unwrap();
        let r = c
            .reply("assistant", "stream_sha", Duration::from_secs(30))
            .await;
        assert_eq!(r["kind"], "text");
        assert_eq!(r["sha256"], sha_hex(text.as_bytes()).as_str());
        c.cmd(
            "assistant",
            json!({"op": "send_text", "size": 50_000, "topic": "text"}),
        )
        .await;
        let reader = next_stream(&mut c, "text").await;
        assert_eq!(reader.info.kind, outpost_livekit::StreamKind::Text);
        let got = reader.read_to_string().await.unwrap();
        let sent = c
            .reply("assistant", "sent_stream", Duration::from_secs(30))
            .await;
        assert_eq!(sent["sha256"], sha_hex(got.as_bytes()).as_str());

        // Cancellation both ways.
        let mut w = c
            .room
            .stream_bytes(StreamOptions {
                topic: "bytes".into(),
                destination_identities: vec!["assistant".into()],
                ..Default::default()
            })
            .unwrap();
        w.write(&payload[..40_000]).await.unwrap();
        w.cancel("user stop").await.unwrap();
        let r = c
            .reply("assistant", "stream_sha", Duration::from_secs(30))
            .await;
        assert!(
            !r["error"].is_null(),
            "the official SDK should see the cancelled stream as failed: {r}"
        );
        c.cmd(
            "assistant",
            json!({"op": "stream_cancel", "topic": "bytes"}),
        )
        .await;
        let reader = next_stream(&mut c, "bytes").await;
        let err = reader.read_all().await.unwrap_err();
        assert!(err.to_string().contains("peer cancelled"), "{err}");
        c.room.leave().await.unwrap();

        // A receiver with a 100 kB cap refuses a bigger stream with a clear error.
        let token = lkclient::token(ROOM, "small", lkclient::DEV_SECRET).unwrap();
        let mut opts = RoomOptions::default();
        opts.stream_receive_cap = 100_000;
        let (room, events) = Room::connect(&url, &token, opts).await.unwrap();
        let mut small = Client {
            room,
            events: lkclient::Events::new(events),
        };
        small
            .cmd(
                "assistant",
                json!({"op": "stream_bytes", "size": 300_000, "topic": "bytes"}),
            )
            .await;
        let reader = next_stream(&mut small, "bytes").await;
        let err = reader.read_all().await.unwrap_err();
        assert!(err.to_string().contains("cap"), "{err}");
        // The link is still fine afterwards.
        small.cmd("assistant", json!({"op": "ping", "n": 1})).await;
        small
            .reply("assistant", "pong", Duration::from_secs(10))
            .await;
        small.room.leave().await.unwrap();
        Ok(())
    })
    .unwrap();
}

/// Sends `range` as numbered packets on `topic` to the assistant.
async fn send_numbers(c: &Client, topic: &str, range: std::ops::Range<usize>) {
    for i in range {
        c.room
            .send_data(
                i.to_string().into_bytes(),
                DataOptions::topic(topic).to("assistant"),
            )
            .await
            .unwrap();
    }
}

/// Waits until the assistant echoed packet `n` on `topic`.
async fn wait_echo(c: &mut Client, topic: &str, n: usize) {
    let want = n.to_string();
    let topic = format!("echo:{topic}");
    c.events.wait_for(&format!("echo of {want}"), Duration::from_secs(30), |e| {
        matches!(e, RoomEvent::Data(m) if m.topic.as_deref() == Some(topic.as_str()) && m.payload == want.as_bytes())
    })
    .await;
}

async fn wait_reconnect(c: &mut Client) -> (String, bool) {
    let ev = c
        .events
        .wait_for("reconnecting", Duration::from_secs(20), |e| {
            matches!(e, RoomEvent::Reconnecting { .. })
        })
        .await;
    let RoomEvent::Reconnecting { reason } = ev else {
        unreachable!()
    };
    let ev = c
        .events
        .wait_for("reconnected", Duration::from_secs(40), |e| {
            matches!(e, RoomEvent::Reconnected { .. })
        })
        .await;
    let RoomEvent::Reconnected { resumed } = ev else {
        unreachable!()
    };
    (reason, resumed)
}

fn reconnects_after_the_server_restarts_without_loss_or_duplicates(kind: ServerKind) {
    let mut env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let assistant =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant").expect("assistant peer");
    let url = env.server.url.clone();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let _assistant = assistant;
        let mut c = Client::connect(&url, "app").await;
        send_numbers(&c, "seq", 0..50).await;
        wait_echo(&mut c, "seq", 49).await;

        // A pause first, past livekit-server's delayed SCTP acknowledgement (pion's
        // 200 ms): a packet delivered but not yet acknowledged when the link vanishes
        // cannot be told from one that was lost, and is sent again after a full rejoin
        // (docs/LIVEKIT_CLIENT.md, Reconnect).
        tokio::time::sleep(Duration::from_millis(400)).await;
        // Kill -9 the server. Keep our link down while it restarts, so the official
        // peer is back before our queued packets are flushed: the server drops
        // packets addressed to participants who are not (yet) in the room.
        let killed = Instant::now();
        env.pair.set_client_link(false)?;
        env.kill_server()?;
        send_numbers(&c, "seq", 50..100).await;
        env.restart_server(Path::new(BIN))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !env.server.log_says_joined("assistant") {
            assert!(
                Instant::now() < deadline,
                "the official peer did not rejoin: {}",
                env.server.proc.stderr()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        env.pair.set_client_link(true)?;
        let (reason, resumed) = wait_reconnect(&mut c).await;
        eprintln!(
            "reconnected {:?} after the kill ({reason})",
            killed.elapsed()
        );
        assert!(
            !resumed,
            "a restarted server has no session to resume; this must be a full rejoin"
        );
        assert_eq!(c.room.connection_state(), ConnectionState::Connected);
        send_numbers(&c, "seq", 100..150).await;
        wait_echo(&mut c, "seq", 149).await;
        let r = c.seq_report(150).await;
        assert_eq!(
            r["exact"], true,
            "after a server restart the assistant got {r}"
        );
        c.room.leave().await.unwrap();
        Ok(())
    })
    .unwrap();
}

fn reconnects_after_the_link_drops_without_loss_or_duplicates(kind: ServerKind) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let _assistant =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant").expect("assistant peer");
    let url = env.server.url.clone();
    let pair = &env.pair;
    let client_ns = pair.client_ns.clone();
    // The link is switched from this thread while the client runs in the namespace.
    let (tx, rx) = std::sync::mpsc::channel::<bool>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        in_netns(&client_ns, move || async move {
            let mut c = Client::connect(&url, "app").await;
            send_numbers(&c, "seq", 0..50).await;
            wait_echo(&mut c, "seq", 49).await;
            tx.send(false)?; // link down
            tokio::time::sleep(Duration::from_millis(200)).await;
            // These go into SCTP on a dead link: unacknowledged, so they must be
            // sent again on the new link, once.
            send_numbers(&c, "seq", 50..100).await;
            done_rx.recv_timeout(Duration::from_secs(40))?;
            let (reason, resumed) = wait_reconnect(&mut c).await;
            eprintln!("reconnected after the link drop ({reason}), resumed={resumed}");
            send_numbers(&c, "seq", 100..150).await;
            wait_echo(&mut c, "seq", 149).await;
            let r = c.seq_report(150).await;
            if resumed || kind == ServerKind::Room {
                assert_eq!(r["exact"], true, "after a link drop the assistant got {r}");
            } else {
                // A full rejoin on livekit-server: nothing lost, but the old session is
                // kept for a resume past its ping timeout, and its SCTP can still deliver
                // some of what was sent on the dead link when the link comes back, while
                // the new session sends it again (README, Known gaps: exactly-once across
                // a full rejoin needs the assistant's help). Seen: 5 of the 50.
                assert_eq!(
                    r["missing"],
                    json!([]),
                    "after a link drop the assistant got {r}"
                );
                let dups = r["dups"].as_u64().unwrap_or(u64::MAX);
                assert!(dups <= 50, "more than what was sent on the dead link: {r}");
                eprintln!(
                    "livekit-server, full rejoin: {dups} duplicates of the 50 sent while down"
                );
            }
            c.room.leave().await.unwrap();
            Ok(())
        })
    });
    assert!(
        !rx.recv_timeout(Duration::from_secs(40))
            .expect("client asks for link down")
    );
    pair.set_client_link(false).unwrap();
    // Longer than the server's ping timeout (outpost-room's test setting 4 s,
    // livekit-server's fixed 15 s): both sides give up on the session, and the client
    // rejoins. Shorter on livekit-server, the old session may still deliver what SCTP
    // held when the link comes back while the client rejoins and sends it again: the
    // duplicates of a full rejoin that README's Known gaps describe.
    std::thread::sleep(kind.ping_timeout() + Duration::from_secs(2));
    pair.set_client_link(true).unwrap();
    done_tx.send(()).unwrap();
    client.join().unwrap().unwrap();
}

fn assistant_leave_and_rejoin_are_reported(kind: ServerKind) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let _assistant =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant").expect("assistant peer");
    let url = env.server.url.clone();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app").await;
        c.events
            .wait_for("assistant joined", Duration::from_secs(5), |e| {
                matches!(e, RoomEvent::AssistantJoined(_))
            })
            .await;
        c.cmd("assistant", json!({"op": "leave_rejoin", "delay": 1.5}))
            .await;
        let ev = c
            .events
            .wait_for("assistant left", Duration::from_secs(15), |e| {
                matches!(e, RoomEvent::AssistantLeft(_))
            })
            .await;
        let RoomEvent::AssistantLeft(p) = ev else {
            unreachable!()
        };
        assert_eq!(p.identity, "assistant");
        if kind == ServerKind::Room {
            // outpost-room reports the leave at once. livekit-server batches the news of
            // a participant without tracks for up to 3 s, and a client of protocol 12 and
            // up then hears only of the new session (identity-based reconnection): the
            // client concludes the leave from the new sid, in the same update.
            assert!(c.room.assistant().is_none());
            assert!(c.room.participants().is_empty());
        }
        let ev = c
            .events
            .wait_for("assistant back", Duration::from_secs(20), |e| {
                matches!(e, RoomEvent::AssistantJoined(_))
            })
            .await;
        let RoomEvent::AssistantJoined(back) = ev else {
            unreachable!()
        };
        assert_eq!(back.identity, "assistant");
        assert_ne!(back.sid, p.sid, "a rejoin gets a new sid");
        assert_eq!(c.room.assistant().map(|a| a.sid), Some(back.sid));
        // The plain participant events came too.
        let left =
            |e: &RoomEvent| matches!(e, RoomEvent::ParticipantLeft(p) if p.identity == "assistant");
        c.events
            .wait_for("participant left", Duration::from_secs(1), left)
            .await;
        // And data flows to the new session.
        c.cmd("assistant", json!({"op": "ping", "n": 7})).await;
        let r = c.reply("assistant", "pong", Duration::from_secs(10)).await;
        assert_eq!(r["n"], 7);
        c.room.leave().await.unwrap();
        Ok(())
    })
    .unwrap();
}

fn bad_token_and_unreachable_urls_fail_clearly_and_quickly(kind: ServerKind) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let url = env.server.url.clone();
    let server_ip = env.pair.server_ip;
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut opts = RoomOptions::default();
        opts.connect_timeout = Duration::from_secs(2);

        // Signed with the wrong secret: the server's reason comes through.
        let bad = lkclient::token(ROOM, "app", "not-the-secret").unwrap();
        let t0 = Instant::now();
        let err = Room::connect(&url, &bad, opts.clone()).await.unwrap_err();
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t0.elapsed()
        );
        assert!(
            matches!(err, Error::Unauthorized { status: 401, .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("refused the access token"),
            "{err}"
        );

        // Not a token at all.
        let err = Room::connect(&url, "garbage", opts.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unauthorized { .. }), "{err}");

        // Nothing listens on this port: refused at once.
        let t0 = Instant::now();
        let closed = format!("ws://{server_ip}:7999");
        let good = lkclient::token(ROOM, "app", lkclient::DEV_SECRET).unwrap();
        let err = Room::connect(&closed, &good, opts.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unreachable { .. }), "{err}");
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t0.elapsed()
        );

        // No host answers at this address: bounded by the connect timeout.
        let octets = server_ip.octets();
        let nobody = format!("ws://{}.{}.{}.99:7880", octets[0], octets[1], octets[2]);
        let t0 = Instant::now();
        let err = Room::connect(&nobody, &good, opts.clone())
            .await
            .unwrap_err();
        eprintln!("unreachable host: {err} after {:?}", t0.elapsed());
        assert!(matches!(err, Error::Unreachable { .. }), "{err}");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "took {:?}",
            t0.elapsed()
        );

        // Not a URL.
        let err = Room::connect("ftp://x", &good, opts.clone())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::BadUrl { .. }), "{err}");
        Ok(())
    })
    .unwrap();
}

/// A one-route HTTP token endpoint on loopback: answers POST (JSON body) and GET
/// (query) with `status` and, for 2xx, connection details for the requested identity.
async fn token_server(
    server_url: String,
    status: u16,
    body_override: Option<&'static str>,
) -> (String, tokio::task::JoinHandle<Vec<String>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(Ok((mut sock, _))) =
            tokio::time::timeout(Duration::from_secs(20), listener.accept()).await
        {
            let mut buf = Vec::new();
            let mut tmp = [0u8; 4096];
            let (head, body) = loop {
                let n = sock.read(&mut tmp).await.unwrap();
                if n == 0 {
                    break (String::new(), Vec::new());
                }
                buf.extend_from_slice(&tmp[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).into_owned();
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    while buf.len() < i + 4 + len {
                        let n = sock.read(&mut tmp).await.unwrap();
                        buf.extend_from_slice(&tmp[..n]);
                    }
                    break (head, buf[i + 4..i + 4 + len].to_vec());
                }
            };
            let request_line = head.lines().next().unwrap_or("").to_owned();
            let identity = if request_line.starts_with("POST") {
                let v: Value = serde_json::from_slice(&body).unwrap();
                v["participant_identity"]
                    .as_str()
                    .unwrap_or("anon")
                    .to_owned()
            } else {
                request_line
                    .split(['?', '&', ' '])
                    .find_map(|kv| kv.strip_prefix("participant_identity="))
                    .unwrap_or("anon")
                    .to_owned()
            };
            seen.push(format!("{request_line} {}", String::from_utf8_lossy(&body)));
            let answer = match body_override {
                Some(b) => b.to_owned(),
                None => json!({
                    "server_url": server_url,
                    "participant_token": lkclient::token(ROOM, &identity, lkclient::DEV_SECRET).unwrap(),
                })
                .to_string(),
            };
            let resp = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            sock.write_all(resp.as_bytes()).await.unwrap();
        }
        seen
    });
    (format!("http://{addr}/token"), handle)
}

fn connects_through_a_token_endpoint(kind: ServerKind) {
    use outpost_livekit::{EndpointMethod, TokenEndpoint, TokenRequest};
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let url = env.server.url.clone();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let request = TokenRequest {
            room_name: Some(ROOM.into()),
            participant_identity: Some("endpoint-user".into()),
            participant_name: Some("Endpoint User".into()),
            ..Default::default()
        };
        // Standard POST.
        let (ep, server) = token_server(url.clone(), 201, None).await;
        let endpoint = TokenEndpoint::new(ep).header("X-App-Auth", "s3cret");
        let (room, _events) =
            Room::connect_with_endpoint(&endpoint, &request, RoomOptions::default())
                .await
                .unwrap();
        assert_eq!(room.local_participant().unwrap().identity, "endpoint-user");
        room.leave().await.unwrap();
        // GET variant.
        let mut get = endpoint.clone();
        get.method = EndpointMethod::Get;
        let (room, _events) = Room::connect_with_endpoint(&get, &request, RoomOptions::default())
            .await
            .unwrap();
        assert_eq!(room.local_participant().unwrap().identity, "endpoint-user");
        room.leave().await.unwrap();
        drop(endpoint);
        server.abort();

        // The endpoint refuses: its status and body come through.
        let (ep, server) = token_server(url.clone(), 403, Some(r#"{"error":"not allowed"}"#)).await;
        let err =
            Room::connect_with_endpoint(&TokenEndpoint::new(ep), &request, RoomOptions::default())
                .await
                .unwrap_err();
        assert!(matches!(err, Error::TokenEndpoint { .. }), "{err}");
        assert!(
            err.to_string().contains("403") && err.to_string().contains("not allowed"),
            "{err}"
        );
        server.abort();

        // An answer without a token.
        let (ep, server) = token_server(url.clone(), 200, Some(r#"{"serverUrl":"ws://x"}"#)).await;
        let err =
            Room::connect_with_endpoint(&TokenEndpoint::new(ep), &request, RoomOptions::default())
                .await
                .unwrap_err();
        assert!(err.to_string().contains("participant_token"), "{err}");
        server.abort();

        // Nothing listening.
        let err = Room::connect_with_endpoint(
            &TokenEndpoint::new("http://127.0.0.1:9/token"),
            &request,
            RoomOptions::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, Error::TokenEndpoint { .. }), "{err}");
        Ok(())
    })
    .unwrap();
}

// ---------------------------------------------------------------------------------
// outpost-room's optional modes: session resume, subscriber_primary, wss://.
// ---------------------------------------------------------------------------------

/// Every reliable echo on `echo:<topic>` until the one carrying `last` (inclusive), in
/// arrival order, taken out of the backlog.
async fn echoes_until(c: &mut Client, topic: &str, last: usize) -> Vec<String> {
    let want = last.to_string();
    let topic = format!("echo:{topic}");
    c.events.wait_for(&format!("echo of {want}"), Duration::from_secs(30), |e| {
        matches!(e, RoomEvent::Data(m) if m.topic.as_deref() == Some(topic.as_str()) && m.payload == want.as_bytes())
    })
    .await;
    let mut out = Vec::new();
    c.events.backlog.retain(|ev| match ev {
        RoomEvent::Data(m) if m.topic.as_deref() == Some(topic.as_str()) => {
            out.push(String::from_utf8_lossy(&m.payload).into_owned());
            false
        }
        _ => true,
    });
    out.push(want);
    out
}

/// Presence and reconnect events in the backlog that concern `identity`.
fn presence_events(c: &Client, identity: &str) -> Vec<String> {
    c.events
        .backlog
        .iter()
        .filter_map(|ev| match ev {
            RoomEvent::ParticipantJoined(p) if p.identity == identity => {
                Some(format!("joined {}", p.sid))
            }
            RoomEvent::ParticipantLeft(p) if p.identity == identity => {
                Some(format!("left {}", p.sid))
            }
            RoomEvent::AssistantJoined(p) if p.identity == identity => {
                Some(format!("assistant joined {}", p.sid))
            }
            RoomEvent::AssistantLeft(p) if p.identity == identity => {
                Some(format!("assistant left {}", p.sid))
            }
            _ => None,
        })
        .collect()
}

/// Session resume in a room with `--resume-window`: first the Rust client's signaling
/// WebSocket is cut (through a proxy; its peer connections stay up), then the official
/// SDK peer's. Each resumes the same session: same sid, nobody sees it leave or join,
/// and every reliable packet sent before, during and after arrives exactly once, in
/// order. `extra` adds server options (the subscriber-primary variant).
fn resume_after_signal_cut(kind: ServerKind, extra: &[&str]) {
    let mut args = vec!["--resume-window", "10s"];
    args.extend_from_slice(extra);
    let env = Env::on_with(kind, Path::new(BIN), &args).expect("namespaces and server");
    let upstream = format!("{}:7880", env.pair.server_ip).parse().unwrap();
    // The official peer's signaling goes through a proxy in the server namespace, the
    // Rust client's through one in the client namespace.
    let py_proxy = CutProxy::start(
        &env.pair.server_ns,
        format!("{}:0", env.pair.server_ip).parse().unwrap(),
        upstream,
    )
    .expect("proxy for the official peer");
    let rs_proxy = CutProxy::start(
        &env.pair.client_ns,
        format!("{}:0", env.pair.client_ip).parse().unwrap(),
        upstream,
    )
    .expect("proxy for the Rust client");
    let assistant =
        PyPeer::start(&env.pair, &py_proxy.url(false), ROOM, "assistant").expect("assistant peer");
    let url = rs_proxy.url(false);
    let server = &env.server;
    std::thread::scope(|scope| {
        let client = scope.spawn(|| {
            in_netns(&env.pair.client_ns.clone(), move || async move {
                let mut c = Client::connect(&url, "app").await;
                let me = c.room.local_participant().unwrap().sid;
                let assistant_sid = c.room.assistant().unwrap().sid;
                c.events
                    .wait_for("assistant joined", Duration::from_secs(5), |e| {
                        matches!(e, RoomEvent::AssistantJoined(_))
                    })
                    .await;
                c.events
                    .wait_for("participant joined", Duration::from_secs(5), |e| {
                        matches!(e, RoomEvent::ParticipantJoined(_))
                    })
                    .await;
                send_numbers(&c, "seq", 0..50).await;
                let echoed = echoes_until(&mut c, "seq", 49).await;
                assert_eq!(echoed, numbers(50));

                // 1. Our signaling connection is cut; packets sent right away cross
                //    the (still open) data channel while we resume.
                rs_proxy.cut();
                send_numbers(&c, "seq", 50..100).await;
                let (reason, resumed) = wait_reconnect(&mut c).await;
                eprintln!("Rust client: {reason}; resumed={resumed}");
                assert!(resumed, "the session must be resumed, not rejoined");
                assert_eq!(c.room.local_participant().unwrap().sid, me);
                assert_eq!(c.room.connection_state(), ConnectionState::Connected);
                assert!(
                    rs_proxy.accepted() >= 2,
                    "the resume came through the proxy"
                );
                send_numbers(&c, "seq", 100..150).await;
                let echoed = echoes_until(&mut c, "seq", 149).await;
                assert_eq!(echoed, numbers(150)[50..].to_vec());
                let r = c.seq_report(150).await;
                assert_eq!(r["exact"], true, "after our resume the assistant got {r}");
                let w = c.whoami().await;
                assert_eq!(
                    w["presence"],
                    json!([["joined", "app", me]]),
                    "the official SDK saw us leave or join again: {w}"
                );
                assert_eq!(w["sid"], assistant_sid.as_str());

                // 2. The official peer's signaling connection is cut. Our packets keep
                //    flowing to it while it resumes.
                py_proxy.cut();
                send_numbers(&c, "seq", 150..200).await;
                let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
                let mut w;
                loop {
                    c.cmd("assistant", json!({"op": "whoami"})).await;
                    w = c
                        .reply("assistant", "whoami", Duration::from_secs(30))
                        .await;
                    if w["reconnects"] == json!(["reconnecting", "reconnected"]) {
                        break;
                    }
                    assert!(
                        w["reconnects"] == json!([]) || w["reconnects"] == json!(["reconnecting"]),
                        "{w}"
                    );
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "the official SDK did not get back: {w}"
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                assert_eq!(w["sid"], assistant_sid.as_str(), "the SDK rejoined: {w}");
                assert_eq!(
                    w["presence"],
                    json!([["joined", "app", me]]),
                    "after its resume the SDK saw us come and go: {w}"
                );
                assert_eq!(w["remote"], json!({"app": me}));
                let r = c.seq_report(200).await;
                assert_eq!(r["exact"], true, "after its resume the assistant got {r}");
                let echoed = echoes_until(&mut c, "seq", 199).await;
                assert_eq!(echoed, numbers(200)[150..].to_vec());
                // The SDK's own packets after its resume reach us too.
                c.cmd(
                    "assistant",
                    json!({"op": "send_seq", "topic": "down", "n": 50, "start": 0, "to": ["app"]}),
                )
                .await;
                c.reply("assistant", "sent_seq", Duration::from_secs(20))
                    .await;
                let down = c.collect("down", Duration::from_millis(300)).await;
                assert_eq!(
                    down.into_iter().map(|(_, p)| p).collect::<Vec<_>>(),
                    numbers(50)
                );

                // Nobody left or joined, as far as we could see.
                assert_eq!(
                    presence_events(&c, "assistant"),
                    Vec::<String>::new(),
                    "backlog: {:?}",
                    c.events.backlog
                );
                assert_eq!(c.room.assistant().unwrap().sid, assistant_sid);
                c.room.leave().await.unwrap();
                Ok(())
            })
        });
        let result = client.join().expect("client thread");
        if let Err(e) = &result {
            panic!(
                "{e:#}\n--- server log ---\n{}\n--- official peer ---\n{}",
                server.proc.stderr(),
                assistant.proc.stderr()
            );
        }
    });
    let (resumes, refused) = env.server.log_resumes();
    assert!(
        resumes == 2 && !refused,
        "the server should log two resumes and no refusal:\n{}",
        env.server.proc.stderr()
    );
}

fn resumes_after_the_signal_connection_is_cut(kind: ServerKind) {
    resume_after_signal_cut(kind, &[]);
}

/// UDP is dropped in the client's namespace for longer than ICE waits (the signal
/// connection, over TCP, stays up): the peer connections fail, the session is resumed
/// (an ICE restart on the same session: same sid, nobody sees us leave), and the
/// reliable packets sent before, during and after arrive exactly once, in order.
fn a_peer_connection_failure_is_resumed_without_loss_or_duplicates(kind: ServerKind) {
    let env = Env::on_with(kind, Path::new(BIN), &["--resume-window", "30s"])
        .expect("namespaces and server");
    let assistant =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant").expect("assistant peer");
    let url = env.server.url.clone();
    let pair = &env.pair;
    let (tx, rx) = std::sync::mpsc::channel::<bool>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let result = std::thread::scope(|scope| {
        let client = scope.spawn(move || {
            in_netns(&pair.client_ns.clone(), move || async move {
                let mut c = Client::connect(&url, "app").await;
                let me = c.room.local_participant().unwrap().sid;
                send_numbers(&c, "seq", 0..50).await;
                wait_echo(&mut c, "seq", 49).await;
                tokio::time::sleep(Duration::from_millis(400)).await;
                tx.send(true)?; // UDP blocked
                tokio::time::sleep(Duration::from_millis(200)).await;
                send_numbers(&c, "seq", 50..100).await;
                done_rx.recv_timeout(Duration::from_secs(90))?;
                let (reason, resumed) = wait_reconnect(&mut c).await;
                eprintln!("after the UDP outage: {reason}; resumed={resumed}");
                assert!(
                    resumed,
                    "the session must be resumed, not rejoined ({reason})"
                );
                assert_eq!(c.room.local_participant().unwrap().sid, me);
                send_numbers(&c, "seq", 100..150).await;
                wait_echo(&mut c, "seq", 149).await;
                let r = c.seq_report(150).await;
                assert_eq!(r["exact"], true, "after the resume the assistant got {r}");
                let w = c.whoami().await;
                assert_eq!(
                    w["presence"],
                    json!([["joined", "app", me]]),
                    "the official SDK saw us leave or join again: {w}"
                );
                c.room.leave().await.unwrap();
                Ok(())
            })
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(60))
                .expect("client asks")
        );
        pair.set_client_udp_blocked(true).unwrap();
        // Past both sides' ICE "disconnected" (5 s) but within the resume's wait for
        // the ICE restart (the peer connection timeout, 15 s).
        std::thread::sleep(Duration::from_secs(10));
        pair.set_client_udp_blocked(false).unwrap();
        done_tx.send(()).unwrap();
        client.join().expect("client thread")
    });
    if let Err(e) = result {
        panic!(
            "{e:#}\n--- server log ---\n{}\n--- official peer ---\n{}",
            env.server.proc.stderr(),
            assistant.proc.stderr()
        );
    }
}

/// outpost-room's optional subscriber-primary mode (livekit-server is always in it, so
/// the test above covers it there).
#[test]
fn resumes_in_a_subscriber_primary_room() {
    resume_after_signal_cut(ServerKind::Room, &["--subscriber-primary"]);
}

/// outpost-room's `--subscriber-primary` (livekit-server's only mode, so every test on
/// it covers this): the server offers each client a subscriber connection and
/// delivers data on its own channels there. Data flows both ways between the Rust
/// client and official-SDK peers, with destinations honoured, and streams work.
#[test]
fn subscriber_primary_room_carries_data_both_ways() {
    let env =
        Env::start_with(Path::new(BIN), &["--subscriber-primary"]).expect("namespaces and server");
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

        send_numbers(&c, "seq", 0..200).await;
        let echoed = echoes_until(&mut c, "seq", 199).await;
        assert_eq!(echoed, numbers(200));
        let r = c.seq_report(200).await;
        assert_eq!(r["exact"], true, "assistant got {r}");
        c.cmd("carol", json!({"op": "report", "topic": "seq", "n": 0}))
            .await;
        let r = c.reply("carol", "report", Duration::from_secs(10)).await;
        assert_eq!(
            r["count"], 0,
            "carol got packets addressed to the assistant: {r}"
        );

        c.cmd(
            "assistant",
            json!({"op": "send_seq", "topic": "down", "n": 100, "start": 0, "to": ["app"]}),
        )
        .await;
        c.reply("assistant", "sent_seq", Duration::from_secs(20))
            .await;
        let down = c.collect("down", Duration::from_millis(300)).await;
        assert_eq!(
            down.into_iter().map(|(_, p)| p).collect::<Vec<_>>(),
            numbers(100)
        );

        // A 1 MiB byte stream each way.
        const SIZE: usize = 1024 * 1024;
        let payload: Vec<u8> = (0..SIZE).map(|i| (i * 31 + i / 7919) as u8).collect();
        let opts = StreamOptions {
            topic: "bytes".into(),
            destination_identities: vec!["assistant".into()],
            ..Default::default()
        };
        c.room.send_bytes(&payload, opts).await.unwrap();
        let r = c
            .reply("assistant", "stream_sha", Duration::from_secs(60))
            .await;
        assert_eq!(r["sha256"], sha_hex(&payload).as_str(), "{r}");
        c.cmd(
            "assistant",
            json!({"op": "stream_bytes", "size": SIZE, "topic": "bytes"}),
        )
        .await;
        let reader = next_stream(&mut c, "bytes").await;
        let got = reader.read_all().await.unwrap();
        let sent = c
            .reply("assistant", "sent_stream", Duration::from_secs(30))
            .await;
        assert_eq!(sent["sha256"], sha_hex(&got).as_str());
        c.room.leave().await.unwrap();
        Ok(())
    })
    .unwrap();
}

/// `wss://` with a server certificate from a throw-away CA: refused with a clear error
/// until the client trusts the CA (`RoomOptions::extra_root_ca_pem`), then data flows
/// both ways with an official-SDK peer that also connects over TLS.
#[test]
fn wss_with_a_private_ca() {
    let pair_ip = lkclient::NsPair::create().expect("namespaces");
    // The certificate names the server's address, which the namespace pair decides.
    let pki = TestPki::new(&[pair_ip.server_ip.to_string()]).expect("test CA");
    let cert = pki.cert_path().display().to_string();
    let key = pki.key_path().display().to_string();
    let server = lkclient::Server::start_in(
        &pair_ip,
        ServerKind::Room,
        Path::new(BIN),
        &["--tls-cert", &cert, "--tls-key", &key],
    )
    .expect("server");
    assert!(server.url.starts_with("wss://"), "{}", server.url);
    let ca_file = pki.ca_path().display().to_string();
    let _assistant = PyPeer::start_with_env(
        &pair_ip,
        &server.url,
        ROOM,
        "assistant",
        &[("SSL_CERT_FILE", &ca_file)],
    )
    .expect("assistant peer over wss");
    let url = server.url.clone();
    let ca_pem = pki.ca_pem.clone();
    in_netns(&pair_ip.client_ns.clone(), move || async move {
        let token = lkclient::token(ROOM, "app", lkclient::DEV_SECRET).unwrap();
        let mut opts = RoomOptions::default();
        opts.connect_timeout = Duration::from_secs(3);
        let err = Room::connect(&url, &token, opts.clone()).await.unwrap_err();
        assert!(matches!(err, Error::Unreachable { .. }), "{err}");
        assert!(
            err.to_string().to_lowercase().contains("certificate"),
            "the error should say the certificate is not trusted: {err}"
        );
        let err = Room::connect(&url, &token, opts.clone().trust_root_ca_pem("not pem"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");

        let mut c = Client::connect_with(&url, "app", opts.trust_root_ca_pem(ca_pem)).await;
        send_numbers(&c, "seq", 0..50).await;
        let echoed = echoes_until(&mut c, "seq", 49).await;
        assert_eq!(echoed, numbers(50));
        c.cmd("assistant", json!({"op": "ping", "n": 3})).await;
        let r = c.reply("assistant", "pong", Duration::from_secs(10)).await;
        assert_eq!(r["n"], 3);
        c.room.leave().await.unwrap();
        Ok(())
    })
    .unwrap();
    drop(server);
}

/// Waits for the next incoming stream on `topic` from `sender`.
async fn next_stream_from(
    c: &mut Client,
    topic: &str,
    sender: &str,
) -> outpost_livekit::StreamReader {
    let (topic, sender) = (topic.to_owned(), sender.to_owned());
    let ev = c
        .events
        .wait_for(
            &format!("a stream on {topic} from {sender}"),
            Duration::from_secs(30),
            |e| {
                matches!(e, RoomEvent::StreamOpened(r)
                    if r.info.topic == topic && r.info.sender_identity == sender)
            },
        )
        .await;
    let RoomEvent::StreamOpened(r) = ev else {
        unreachable!()
    };
    r
}

/// The first item of a stream, with a deadline (an open stream may send nothing).
async fn first_item(
    r: &mut outpost_livekit::StreamReader,
    within: Duration,
) -> Result<Vec<u8>, String> {
    match tokio::time::timeout(within, r.next_chunk()).await {
        Ok(Some(Ok(b))) => Ok(b.to_vec()),
        Ok(Some(Err(e))) => Err(e.to_string()),
        Ok(None) => Err("ended".into()),
        Err(_) => Err("nothing arrived".into()),
    }
}

/// Issue 17, finding 4: a third participant who sees the id of the assistant's
/// broadcast stream sends a stream of its own under that id (header, chunk, trailer)
/// and a cancelled one, from a second outpost-livekit client. The receiver still gets
/// the assistant's bytes unchanged, and the hostile streams as the hostile sender's.
fn another_participant_cannot_inject_into_the_assistants_stream(kind: ServerKind) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let _assistant =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant").expect("assistant peer");
    let url = env.server.url.clone();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app").await;
        let mut mallory = Client::connect(&url, "mallory").await;

        // A broadcast stream that pauses right after its header (no length announced,
        // so a hijacked stream could end cleanly with the wrong bytes).
        c.cmd(
            "assistant",
            json!({"op": "stream_paused", "size": 40_000, "first": 0, "topic": "bytes"}),
        )
        .await;
        let id = c
            .reply("assistant", "paused", Duration::from_secs(20))
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let theirs = next_stream_from(&mut c, "bytes", "assistant").await;
        assert_eq!(theirs.info.id, id);
        // Mallory sees the same stream, so she knows its id.
        let seen = next_stream_from(&mut mallory, "bytes", "assistant").await;
        assert_eq!(seen.info.id, id);

        let forged = |name: &str| StreamOptions {
            topic: "bytes".into(),
            destination_identities: vec!["app".into()],
            stream_id: Some(id.clone()),
            name: Some(name.into()),
            ..Default::default()
        };
        mallory
            .room
            .send_bytes(&b"EVIL".repeat(100), forged("evil.bin"))
            .await
            .unwrap();
        let mut w = mallory.room.stream_bytes(forged("cut.bin")).unwrap();
        w.write(b"more").await.unwrap();
        w.cancel("hijacked").await.unwrap();
        // Both forged headers reached the client (so did the chunks and trailers
        // sent before the second one) before the assistant carries on.
        let hers1 = next_stream_from(&mut c, "bytes", "mallory").await;
        let hers2 = next_stream_from(&mut c, "bytes", "mallory").await;

        c.cmd(
            "assistant",
            json!({"op": "stream_resume", "id": id, "first": 0}),
        )
        .await;
        let got = theirs.read_all().await;
        let sent = c
            .reply("assistant", "sent_stream", Duration::from_secs(20))
            .await;
        let got = got.unwrap_or_else(|e| panic!("the assistant's stream failed: {e}"));
        assert_eq!(got.len(), 40_000);
        assert_eq!(
            sent["sha256"],
            sha_hex(&got).as_str(),
            "the assistant's bytes arrived unchanged"
        );
        // Mallory's streams are hers: one complete, one cancelled.
        assert_eq!(hers1.info.id, id);
        assert_eq!(hers1.read_all().await.unwrap(), b"EVIL".repeat(100));
        let err = hers2.read_all().await.unwrap_err();
        assert!(err.to_string().contains("hijacked"), "{err}");
        drop(seen);
        mallory.room.leave().await.unwrap();
        c.room.leave().await.unwrap();
        Ok(())
    })
    .unwrap();
}

/// Issue 17, finding 4: a participant opens 70 byte streams to the client and never
/// finishes them; the assistant's 30 KB stream still arrives (the flood only uses up
/// its own sender's slots).
fn seventy_unfinished_streams_from_a_participant_do_not_block_the_assistant(kind: ServerKind) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let _assistant =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "assistant").expect("assistant peer");
    let _mallory =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "mallory").expect("mallory peer");
    let url = env.server.url.clone();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app").await;
        c.cmd(
            "mallory",
            json!({"op": "hold_streams", "n": 70, "topic": "bytes"}),
        )
        .await;
        let held = c.reply("mallory", "held", Duration::from_secs(30)).await;
        assert_eq!(held["ids"].as_array().unwrap().len(), 70);
        // Keep every reader: an application that is slow to read must not help.
        let mut readers = Vec::new();
        for _ in 0..70 {
            readers.push(next_stream_from(&mut c, "bytes", "mallory").await);
        }

        c.cmd(
            "assistant",
            json!({"op": "stream_bytes", "size": 30_000, "topic": "bytes"}),
        )
        .await;
        let reader = next_stream_from(&mut c, "bytes", "assistant").await;
        let got = reader.read_all().await;
        let sent = c
            .reply("assistant", "sent_stream", Duration::from_secs(30))
            .await;
        let got = got.unwrap_or_else(|e| panic!("the assistant's 30 KB stream failed: {e}"));
        assert_eq!(sent["sha256"], sha_hex(&got).as_str());

        // Mallory got her per-sender quota (16 by default), the rest were refused.
        let mut open = 0;
        let mut refused = 0;
        for r in &mut readers {
            match first_item(r, Duration::from_secs(5)).await {
                Ok(b) => {
                    assert_eq!(b, b"x");
                    open += 1;
                }
                Err(e) => {
                    assert!(e.contains("already has 16 incoming streams open"), "{e}");
                    refused += 1;
                }
            }
        }
        assert_eq!((open, refused), (16, 54));
        c.room.leave().await.unwrap();
        Ok(())
    })
    .unwrap();
}

/// Issue 17, finding 4: a stream that stops receiving chunks is dropped after
/// `RoomOptions::stream_idle_timeout`: its reader gets an error and its slot is free
/// for the sender's next stream.
fn an_idle_stream_is_dropped_after_the_timeout_and_frees_its_slot(kind: ServerKind) {
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let _mallory =
        PyPeer::start(&env.pair, &env.server.url, ROOM, "mallory").expect("mallory peer");
    let url = env.server.url.clone();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut opts = RoomOptions::default();
        opts.stream_idle_timeout = Duration::from_secs(1);
        opts.max_streams_per_sender = 4;
        let mut c = Client::connect_with(&url, "app", opts).await;
        for round in 0..2 {
            c.cmd(
                "mallory",
                json!({"op": "hold_streams", "n": 4, "topic": "bytes"}),
            )
            .await;
            c.reply("mallory", "held", Duration::from_secs(30)).await;
            let mut readers = Vec::new();
            for _ in 0..4 {
                readers.push(next_stream_from(&mut c, "bytes", "mallory").await);
            }
            let t0 = Instant::now();
            for r in &mut readers {
                // Accepted (in round 1 only because round 0's streams were dropped)...
                assert_eq!(
                    first_item(r, Duration::from_secs(5)).await,
                    Ok(b"x".to_vec()),
                    "round {round}"
                );
                // ...then dropped for idleness.
                let err = first_item(r, Duration::from_secs(10)).await.unwrap_err();
                assert!(err.contains("idle timeout"), "round {round}: {err}");
            }
            let waited = t0.elapsed();
            assert!(
                waited < Duration::from_secs(4),
                "round {round}: dropped after {waited:?}"
            );
        }
        c.room.leave().await.unwrap();
        Ok(())
    })
    .unwrap();
}
