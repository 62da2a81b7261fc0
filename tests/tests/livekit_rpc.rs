//! `outpost-livekit`'s RPC, text streams and participant attributes against an
//! official-SDK peer that acts like a LiveKit agent (`tests/py/agent_peer.py`):
//! the server (`outpost-room` and livekit-server, each test on both) and the peer in one
//! network namespace, the Rust client (entered
//! with `setns`) in the other. Needs root, iproute2 and the venv.
//!
//! Run twice: with RPC version 2 (the default: we advertise `client_protocol` 1, the
//! SDK advertises 2, both sides carry payloads in data streams) and with it turned off
//! (we advertise 0, and the SDK falls back to version 1 packets towards us, as it does
//! with any client that does not speak version 2).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outpost_livekit::{
    DataOptions, Error, PerformRpc, Room, RoomEvent, RoomOptions, RpcError, RpcErrorCode,
    StreamOptions,
};
use outpost_tests::lkclient::{self, Env, in_netns};
use outpost_tests::proc::Proc;
use outpost_tests::python;
use outpost_tests::server::ServerKind;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_room_server");
const ROOM: &str = "lk-rpc";

outpost_tests::both_servers!(
    rpc_v2_text_streams_and_attributes_with_an_official_sdk_agent,
    rpc_v1_with_an_official_sdk_agent_when_we_do_not_advertise_v2,
);

/// A token that may update its own metadata and attributes (or not).
fn token(identity: &str, update_own_metadata: bool) -> String {
    livekit_token::AccessToken::with_api_key(lkclient::DEV_KEY, lkclient::DEV_SECRET)
        .with_identity(identity)
        .with_name(identity)
        .with_ttl(Duration::from_secs(3600))
        .with_grants(livekit_token::VideoGrants {
            room_join: true,
            room: ROOM.to_owned(),
            can_update_own_metadata: Some(update_own_metadata),
            ..Default::default()
        })
        .to_jwt()
        .unwrap()
}

struct Client {
    room: Room,
    events: lkclient::Events,
}

impl Client {
    async fn connect(url: &str, identity: &str, update_own_metadata: bool, v2: bool) -> Client {
        let (room, events) = Room::connect(url, &token(identity, update_own_metadata), {
            // Answered from the moment we join: the agent calls it as soon as it
            // sees us, without retrying.
            let mut o = RoomOptions::default().assistant("agent");
            o.rpc_v2 = v2;
            o.rpc_methods.register("early", |inv| async move {
                Ok(format!("early:{}", inv.payload))
            });
            o
        })
        .await
        .unwrap_or_else(|e| panic!("connect {url}: {e}"));
        Client {
            room,
            events: lkclient::Events::new(events),
        }
    }

    /// The first event (backlog first) that `pred` accepts; others stay in the backlog.
    async fn wait_for(&mut self, what: &str, pred: impl FnMut(&RoomEvent) -> bool) -> RoomEvent {
        self.events
            .wait_for(what, Duration::from_secs(30), pred)
            .await
    }

    async fn ctl(&self, op: &str) {
        self.room
            .send_data(
                json!({ "op": op }).to_string().into_bytes(),
                DataOptions::topic("ctl").to("agent"),
            )
            .await
            .unwrap();
    }

    async fn result(&mut self, op: &str) -> Value {
        let ev = self
            .wait_for(&format!("result {op}"), |ev| match ev {
                RoomEvent::Data(m) if m.topic.as_deref() == Some("result") => {
                    serde_json::from_slice::<Value>(&m.payload).is_ok_and(|v| v["op"] == op)
                }
                _ => false,
            })
            .await;
        let RoomEvent::Data(m) = ev else {
            unreachable!()
        };
        serde_json::from_slice(&m.payload).unwrap()
    }

    /// The next incoming stream on `topic`.
    async fn stream(&mut self, topic: &str) -> outpost_livekit::StreamReader {
        let ev = self
            .wait_for(
                &format!("a stream on {topic}"),
                |ev| matches!(ev, RoomEvent::StreamOpened(r) if r.info.topic == topic),
            )
            .await;
        let RoomEvent::StreamOpened(r) = ev else {
            unreachable!()
        };
        r
    }
}

fn attrs(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Sets a flag when dropped: shows that a handler was stopped at its deadline.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn start_agent(env: &Env, v2: bool) -> Proc {
    let py = python::python().expect("the venv");
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(python::scripts_dir().join("agent_peer.py"))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_APP", "app")
        .env("LK_RPC", if v2 { "v2" } else { "v1" })
        .env("PYTHONWARNINGS", "ignore");
    let mut proc = Proc::spawn("agent_peer", cmd).expect("agent peer");
    proc.wait_for_line("ready", Duration::from_secs(30))
        .expect("agent peer ready");
    proc
}

fn rpc_v2_text_streams_and_attributes_with_an_official_sdk_agent(kind: ServerKind) {
    run(kind, true);
}

fn rpc_v1_with_an_official_sdk_agent_when_we_do_not_advertise_v2(kind: ServerKind) {
    run(kind, false);
}

fn run(kind: ServerKind, v2: bool) {
    // RUST_LOG=outpost_livekit=info shows how the malformed RPC streams were handled.
    let env = Env::on(kind, Path::new(BIN)).expect("namespaces and server");
    let agent = start_agent(&env, v2);
    let url = env.server.url.clone();
    let result = in_netns(&env.pair.client_ns.clone(), move || async move {
        let mut c = Client::connect(&url, "app", true, v2).await;
        c.wait_for("the agent", |e| matches!(e, RoomEvent::AssistantJoined(_)))
            .await;
        // outpost-room relays the client_protocol each side advertised: the SDK 1.2.1
        // advertises 2 (RPC version 2 and data streams version 2).
        let agent_protocol = c.room.assistant().unwrap().client_protocol;
        assert!(agent_protocol >= 1, "the SDK advertised {agent_protocol}");

        // Our methods, called by the SDK's perform_rpc.
        c.room.register_rpc_method("echo", |inv| async move {
            Ok(format!("app-echo:{}:{}", inv.caller_identity, inv.payload))
        });
        c.room.register_rpc_method("fail", |_inv| async move {
            Err(RpcError::new(
                2001,
                "tool failed",
                Some(r#"{"seed":"EXECUTION_ERROR"}"#.into()),
            ))
        });
        c.room
            .register_rpc_method("big", |_inv| async move { Ok("x".repeat(15_361)) });
        c.room
            .register_rpc_method("max", |_inv| async move { Ok("y".repeat(15_360)) });
        c.room.register_rpc_method("large", |inv| async move {
            Ok(format!("{}:{}", inv.payload.len(), "r".repeat(100_000)))
        });
        c.room.register_rpc_method("panic", |inv| async move {
            if inv.payload.is_empty() {
                panic!("a handler bug");
            }
            Ok(String::new())
        });
        let slow_dropped = Arc::new(AtomicBool::new(false));
        let flag = slow_dropped.clone();
        let slow_timeout = Arc::new(std::sync::Mutex::new(None));
        let seen_timeout = slow_timeout.clone();
        c.room.register_rpc_method("slow", move |inv| {
            let guard = Dropped(flag.clone());
            *seen_timeout.lock().unwrap() = Some(inv.response_timeout);
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok("too late".to_owned())
            }
        });
        c.ctl("go").await;

        let rpc = c.result("rpc").await;
        let r = &rpc["results"];
        eprintln!("SDK perform_rpc results: {r}");
        assert_eq!(
            r["early"]["ok"], "early:first",
            "a call the instant we joined"
        );
        assert_eq!(r["echo"]["ok"], "app-echo:agent:hello ✓");
        assert_eq!(r["unknown"]["code"], 1400);
        assert_eq!(
            r["unknown"]["message"],
            "Method not supported at destination"
        );
        assert_eq!(r["fail"]["code"], 2001);
        assert_eq!(r["fail"]["message"], "tool failed");
        assert_eq!(r["fail"]["data"], r#"{"seed":"EXECUTION_ERROR"}"#);
        if v2 {
            // Version 2 has no 15 KiB limit, either way.
            assert_eq!(r["big"]["ok"], 15_361);
            assert_eq!(r["large"]["ok"], "100000:".len() + 100_000);
            // Malformed request streams were refused or dropped; we still answer.
            assert_eq!(r["after_malformed"]["ok"], "app-echo:agent:still there");
        } else {
            assert_eq!(r["big"]["code"], 1504);
            assert_eq!(r["big"]["message"], "Response payload too large");
        }
        assert_eq!(r["max"]["ok"], 15_360);
        assert_eq!(r["panic"]["code"], 1500);
        assert_eq!(r["slow"]["code"], 1502);
        // We answered at the handler deadline the SDK sent (2 s), well before its own
        // 9 s timer would have run out, and the handler was stopped.
        let secs = r["slow"]["secs"].as_f64().unwrap();
        assert!((1.5..6.0).contains(&secs), "slow call took {secs} s");
        assert_eq!(*slow_timeout.lock().unwrap(), Some(Duration::from_secs(2)));
        assert!(
            slow_dropped.load(Ordering::SeqCst),
            "the slow handler still runs"
        );

        // lk.chat from the SDK's send_text, with its attributes.
        let chat = c.stream("lk.chat").await.into_text();
        assert_eq!(chat.info().sender_identity, "agent");
        assert_eq!(chat.info().attributes, attrs(&[("lk.test", "1")]));
        assert!(!chat.info().id.is_empty());
        assert_eq!(chat.read_all().await.unwrap(), "hi from the agent ✓");

        // An interim transcript arrives piece by piece: the first piece is here before
        // the SDK writes the rest (it waits for our "got-chunk").
        let mut interim = c.stream("lk.transcription").await.into_text();
        assert_eq!(
            interim.info().attributes,
            attrs(&[
                ("lk.segment_id", "SG_1"),
                ("lk.transcription_final", "false"),
                ("lk.transcribed_track_id", "TR_x"),
            ])
        );
        let first = tokio::time::timeout(Duration::from_secs(10), interim.next_text())
            .await
            .expect("the first piece before the stream ends")
            .unwrap()
            .unwrap();
        assert_eq!(first, "Hel");
        c.ctl("got-chunk").await;
        let rest = interim.read_all().await.unwrap();
        assert_eq!(format!("{first}{rest}"), "Hello world 😀");
        let fin = c.stream("lk.transcription").await.into_text();
        assert_eq!(fin.info().attributes["lk.transcription_final"], "true");
        assert_eq!(fin.info().attributes["lk.segment_id"], "SG_1");
        assert_eq!(fin.read_all().await.unwrap(), "Hello world 😀");

        // The agent's state attribute: an event, and the participant model.
        let ev = c
            .wait_for("lk.agent.state", |e| {
                matches!(e, RoomEvent::ParticipantAttributesChanged { participant, .. }
                    if participant.identity == "agent")
            })
            .await;
        let RoomEvent::ParticipantAttributesChanged {
            participant,
            changed,
        } = ev
        else {
            unreachable!()
        };
        assert_eq!(changed, attrs(&[("lk.agent.state", "thinking")]));
        assert_eq!(participant.attributes, changed);
        assert_eq!(
            c.room.assistant().unwrap().attributes,
            attrs(&[("lk.agent.state", "thinking")])
        );
        c.result("your-turn").await;

        // Our side: attributes, metadata, a chat message, calls to the agent.
        c.room
            .set_attributes(attrs(&[("outpost.mode", "agents")]))
            .await
            .unwrap();
        let ev = c
            .wait_for("our own attribute change", |e| {
                matches!(e, RoomEvent::ParticipantAttributesChanged { participant, .. }
                    if participant.identity == "app")
            })
            .await;
        assert!(
            matches!(ev, RoomEvent::ParticipantAttributesChanged { changed, .. }
            if changed == attrs(&[("outpost.mode", "agents")]))
        );
        assert_eq!(
            c.room.local_participant().unwrap().attributes,
            attrs(&[("outpost.mode", "agents")])
        );
        c.room.set_metadata("m-app").await.unwrap();
        c.room
            .send_text(
                "hello from Outpost ✓",
                StreamOptions {
                    topic: "lk.chat".into(),
                    attributes: attrs(&[("lk.test", "from-app")]),
                    destination_identities: vec!["agent".into()],
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let echo = c
            .room
            .perform_rpc(PerformRpc::new("agent", "agent.echo", "x"))
            .await;
        assert_eq!(echo, Ok("agent-echo:app:x".to_owned()));
        let fail = c
            .room
            .perform_rpc(PerformRpc::new("agent", "agent.fail", ""))
            .await
            .unwrap_err();
        assert_eq!(
            fail,
            RpcError::new(2002, "agent says no", Some(r#"{"why": "test"}"#.into()))
        );
        let unknown = c
            .room
            .perform_rpc(PerformRpc::new("agent", "nope", ""))
            .await
            .unwrap_err();
        assert_eq!(
            unknown.built_in_code(),
            Some(RpcErrorCode::UnsupportedMethod)
        );
        let over_v1 = c
            .room
            .perform_rpc(PerformRpc::new("agent", "agent.echo", "z".repeat(15_361)))
            .await;
        if v2 {
            assert_eq!(
                over_v1,
                Ok(format!("agent-echo:app:{}", "z".repeat(15_361)))
            );
            let large = c
                .room
                .perform_rpc(PerformRpc::new("agent", "agent.large", "q".repeat(50_000)))
                .await
                .unwrap();
            assert_eq!(large, format!("50000:{}", "A".repeat(300_000)));
            // A response stream the agent aborts half-way fails the call, and says why.
            let bad = c
                .room
                .perform_rpc(PerformRpc::new("agent", "agent.bad_response", ""))
                .await
                .unwrap_err();
            assert_eq!(bad.built_in_code(), Some(RpcErrorCode::ApplicationError));
            assert!(
                bad.data.as_deref().unwrap_or("").contains("agent gave up"),
                "{bad:?}"
            );
        } else {
            assert_eq!(
                over_v1.unwrap_err().built_in_code(),
                Some(RpcErrorCode::RequestPayloadTooLarge)
            );
        }
        let started = std::time::Instant::now();
        let slow = c
            .room
            .perform_rpc(
                PerformRpc::new("agent", "agent.slow", "").response_timeout(Duration::from_secs(3)),
            )
            .await
            .unwrap_err();
        assert_eq!(slow.built_in_code(), Some(RpcErrorCode::ResponseTimeout));
        assert!(started.elapsed() < Duration::from_secs(6));
        let ghost = c
            .room
            .perform_rpc(
                PerformRpc::new("ghost", "agent.echo", "")
                    .max_round_trip_latency(Duration::from_millis(800)),
            )
            .await
            .unwrap_err();
        assert_eq!(ghost.built_in_code(), Some(RpcErrorCode::ConnectionTimeout));

        c.ctl("check").await;
        let seen = c.result("seen").await;
        eprintln!("the SDK saw: {seen}");
        assert_eq!(
            seen["chats"],
            json!([{"sender": "app", "topic": "lk.chat", "text": "hello from Outpost ✓",
                    "attributes": {"lk.test": "from-app"}}])
        );
        assert_eq!(seen["app_attributes"], json!({"outpost.mode": "agents"}));
        assert_eq!(seen["app_metadata"], "m-app");
        assert_eq!(seen["app_client_protocol"], if v2 { 1 } else { 0 });
        assert!(
            seen["app_attr_events"]
                .as_array()
                .unwrap()
                .contains(&json!({"outpost.mode": "agents"}))
        );
        c.ctl("exit").await;

        // Without the token grant the server refuses, and says why.
        let other = Client::connect(&url, "app-2", false, v2).await;
        let refused = other
            .room
            .set_attributes(attrs(&[("lk.agent.state", "forged")]))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, Error::Refused { reason, .. } if reason == "NOT_ALLOWED"),
            "{refused:?}"
        );
        other.room.leave().await.unwrap();
        // RPC streams are never shown to the application.
        c.events.take_queued();
        assert!(
            !c.events.backlog.iter().any(
                |e| matches!(e, RoomEvent::StreamOpened(r) if r.info.topic.starts_with("lk.rpc_"))
            ),
            "an RPC stream reached the application"
        );
        c.room.leave().await.unwrap();
        Ok::<(), anyhow::Error>(())
    });
    let (status, _out, err) = agent.finish(Duration::from_secs(20)).unwrap();
    result.unwrap_or_else(|e| panic!("{e:#}\nagent peer stderr:\n{err}"));
    assert!(status.success(), "agent peer failed: {err}");
}
