//! Outpost connects wherever the official SDK connects (issue 26): the real
//! livekit-server in one namespace, the client's namespace behind nftables rules that
//! leave only some paths open (see `outpost_tests::lkclient::NsPair`).
//!
//! Each test first shows the official Python SDK connecting through the same
//! restrictions (the baseline), then runs Outpost's session engine (`outpost_core::Core`,
//! in the client namespace) against `tests/py/net_assistant.py`: an Outpost-protocol
//! tool call, a LiveKit RPC tool call, and voice both ways.
//!
//! Two tests hold the server's link to the client to 1 Mbit/s with `tc` instead (the
//! slow reader, issue 25's finding 8): what livekit-server does with reliable data to a
//! receiver that slow, with and without its slow threshold, and that Outpost never takes
//! a stream with a hole as complete.
//!
//! livekit-server only: outpost-room offers no ICE/TCP candidates (`webrtc` 0.21 has no
//! shared TCP listener to advertise) and runs no TURN server, so with UDP blocked there
//! is nothing there for any client to fall back to.
//! Needs root, iproute2 (with `tc`), nftables, the venv and livekit-server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};
use outpost_core::{ConnectOptions, Core, Credentials, PolicySource, ToolsConfig, UiEvent};
use outpost_livekit::{
    AudioStream, DataOptions, LocalAudioTrack, PathKind, Room, RoomEvent, RoomEvents, RoomOptions,
};
use outpost_tests::lkclient::{self, Env, PyPeer, in_netns};
use outpost_tests::pki::{SystemCa, TestPki};
use outpost_tests::proc::Proc;
use outpost_tests::python;
use outpost_tests::server::{ServerKind, ServerOptions};
use serde_json::Value;

const ROOM_BIN: &str = env!("CARGO_BIN_EXE_room_server");
const CLI_BIN: &str = env!("CARGO_BIN_EXE_outpost_cli");
const ROOM: &str = "net";
const OUTPOST: &str = "app";
const ASSISTANT: &str = "assistant";
/// Generous: two Python processes with libwebrtc and the Rust client share 2 busy cores.
const WAIT: Duration = Duration::from_secs(90);
/// What the assistant publishes; what we publish is 660 Hz.
const ASSISTANT_TONE_HZ: f64 = 440.0;
const OUR_TONE_HZ: f64 = 660.0;

/// An official-SDK scenario (`tests/py/<script>`, two participants in one process) run
/// in the client namespace, so both go through the client's restrictions; its verdict.
fn sdk_baseline(env: &Env, script: &str, extra: &[(&str, &str)]) -> Value {
    sdk_baseline_or_timeout(env, script, extra).unwrap_or_else(|err| {
        panic!(
            "the official SDK did not get through ({script}):\n{err}\n--- server ---\n{}",
            env.server.proc.stderr()
        )
    })
}

/// [`sdk_baseline`], but when the SDK's connection timed out on both goes, its stderr
/// as `Err` (every other failure still panics).
fn sdk_baseline_or_timeout(
    env: &Env,
    script: &str,
    extra: &[(&str, &str)],
) -> Result<Value, String> {
    let py = python::python().unwrap();
    let run = || {
        let mut cmd = env.pair.client_command(&py);
        cmd.arg(python::scripts_dir().join(script))
            .current_dir(python::scripts_dir())
            .env("LK_URL", &env.server.url)
            .env("LK_ROOM", format!("{ROOM}-sdk"))
            .env("LK_TIMEOUT", "100")
            .env("PYTHONWARNINGS", "ignore");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let proc = Proc::spawn(&format!("sdk baseline {script}"), cmd).unwrap();
        proc.finish(Duration::from_secs(120)).unwrap()
    };
    let (mut status, mut out, mut err) = run();
    // The SDK's libwebrtc sometimes gives up on its first ICE over a relay while the
    // machine is busy with the other tests ("wait_pc_connection timed out", three times
    // in ~20 s); that is the baseline's trouble, not what is tested, so it gets one
    // more go. Any other failure fails at once.
    if !status.success() && err.contains("wait_pc_connection timed out") {
        eprintln!("the official SDK's connection timed out; once more:\n{err}");
        (status, out, err) = run();
        if !status.success() && err.contains("wait_pc_connection timed out") {
            return Err(err);
        }
    }
    assert!(
        status.success(),
        "the official SDK did not get through ({script}, {status}):\n{out}\n{err}\n--- server ---\n{}",
        env.server.proc.stderr()
    );
    let verdict: Value = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .next_back()
        .unwrap_or_else(|| panic!("{script} printed no verdict:\n{out}"));
    assert_eq!(verdict["ok"], true, "{script}: {verdict}");
    eprintln!("official SDK baseline, {script}: {verdict}");
    Ok(verdict)
}

/// The assistant, in the server namespace.
fn start_assistant(env: &Env) -> (Proc, std::sync::mpsc::Receiver<String>) {
    let py = python::python().unwrap();
    let mut cmd = env.pair.server_command(&py);
    cmd.arg(python::scripts_dir().join("net_assistant.py"))
        .current_dir(python::scripts_dir())
        .env("LK_URL", &env.server.url)
        .env("LK_ROOM", ROOM)
        .env("LK_IDENTITY", ASSISTANT)
        .env("OUTPOST_IDENTITY", OUTPOST)
        .env("LK_TIMEOUT", "150")
        .env("PYTHONWARNINGS", "ignore");
    let mut proc = Proc::spawn("net_assistant", cmd).unwrap();
    let lines = proc.stdout_lines().unwrap();
    (proc, lines)
}

/// Pushes a phase-continuous sine at `hz` into `track` in real time until aborted.
fn sine_into(track: LocalAudioTrack, hz: f64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let step = 2.0 * std::f64::consts::PI * hz / 48_000.0;
        let mut phase = 0.0f64;
        let mut pace = tokio::time::interval(Duration::from_millis(10));
        loop {
            pace.tick().await;
            let mut frame = [0i16; 480];
            for s in &mut frame {
                *s = (phase.sin() * 12_000.0) as i16;
                phase = (phase + step) % (2.0 * std::f64::consts::PI);
            }
            if track.push_frame(&frame).await.is_err() {
                return;
            }
        }
    })
}

/// `seconds` of `stream` on its timeline (skipped time as silence).
async fn listen(stream: &mut AudioStream, seconds: f64) -> anyhow::Result<Vec<f64>> {
    let want = (seconds * 48_000.0) as usize;
    let mut out = Vec::with_capacity(want);
    while out.len() < want {
        let frame = tokio::time::timeout(Duration::from_secs(3), stream.recv())
            .await
            .context("the assistant's audio stalled for 3 s")?
            .context("the assistant's audio ended")?;
        out.extend(std::iter::repeat_n(0.0, frame.skipped_before));
        out.extend(frame.samples.iter().map(|&s| f64::from(s)));
    }
    Ok(out)
}

/// What Outpost's session saw.
#[derive(Debug)]
struct Seen {
    /// Tool calls that finished, with their success.
    tools: Vec<(String, bool)>,
    /// The strongest frequency of the assistant's audio, and the share of 20 ms
    /// windows that carried sound.
    heard_hz: f64,
    sounding: f64,
}

/// Outpost's session engine in the client namespace against net_assistant.py, with
/// `room` as its link settings.
fn outpost_session(env: &Env, dir: &Path, room: RoomOptions) -> anyhow::Result<Seen> {
    let url = env.server.url.clone();
    let data_dir = dir.join("data");
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "consent_timeout_secs = 5\n[tools]\n")?;
    let home = dir.to_path_buf();
    in_netns(&env.pair.client_ns.clone(), move || async move {
        let core = Core::open(
            Some(data_dir),
            ToolsConfig {
                policy: PolicySource::File(policy),
                home,
                protected: Vec::new(),
            },
        )?;
        let mut opts = ConnectOptions::new(Credentials::Token {
            url,
            token: lkclient::token(ROOM, OUTPOST, lkclient::DEV_SECRET)?,
        });
        opts.assistant_identity = Some(ASSISTANT.into());
        opts.room_options = room;
        opts.voice = true;
        opts.room_name = Some(ROOM.into());
        let (session, mut events) = core.connect(opts).await?;
        let mut voice = session.take_voice_events().context("voice events")?;
        let mic = session.publish_microphone(false).await?;
        let tone = sine_into(mic, OUR_TONE_HZ);

        let mut stream = loop {
            match tokio::time::timeout(WAIT, voice.recv()).await {
                Ok(Some(outpost_core::VoiceEvent::AssistantAudio { stream, .. })) => break stream,
                Ok(Some(_)) => {}
                Ok(None) => bail!("the session ended before the assistant's audio"),
                Err(_) => bail!("no audio from the assistant within {WAIT:?}"),
            }
        };
        let heard = listen(&mut stream, 3.0).await?;
        // From the first sound on: the track starts with whatever the SFU sent first.
        let windows: Vec<bool> = heard
            .chunks(960)
            .map(|w| (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt() > 1000.0)
            .collect();
        let first = windows.iter().position(|&w| w).unwrap_or(windows.len());
        let sounding = windows[first..].iter().filter(|&&w| w).count() as f64
            / (windows.len() - first).max(1) as f64;
        let tail = &heard[heard.len() - 24_000..];
        let heard_hz = outpost_tests::pulse::peak_hz(tail);

        let mut tools = Vec::new();
        loop {
            let ev = tokio::time::timeout(WAIT, events.recv())
                .await
                .with_context(|| format!("no 'network checks done' within {WAIT:?}: {tools:?}"))?
                .context("the session ended early")?;
            match ev {
                UiEvent::ToolCallFinished {
                    tool_name, success, ..
                } => tools.push((tool_name, success)),
                UiEvent::AssistantMessage { text, .. } if text == "network checks done" => break,
                _ => {}
            }
        }
        // The assistant listens to us for 4 s after it published: keep talking until
        // it says it is done (above), then leave.
        tone.abort();
        session.leave().await?;
        Ok(Seen {
            tools,
            heard_hz,
            sounding,
        })
    })
}

/// Checks what both sides of the session saw.
fn judge(env: &Env, assistant: Proc, lines: &std::sync::mpsc::Receiver<String>, seen: &Seen) {
    let (status, _, err) = assistant.finish(Duration::from_secs(30)).unwrap();
    let steps: Vec<Value> = lines
        .try_iter()
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    eprintln!("assistant: {steps:?}\noutpost: {seen:?}");
    assert!(
        status.success(),
        "the assistant's checks failed ({status}): {steps:#?}\n{err}\n--- server ---\n{}",
        env.server.proc.stderr()
    );
    for name in ["protocol_tool", "rpc_tool", "hear_client"] {
        assert!(
            steps.iter().any(|s| s["step"] == name && s["ok"] == true),
            "{name} did not pass: {steps:#?}"
        );
    }
    assert_eq!(
        seen.tools,
        vec![
            ("calculator".to_owned(), true),
            ("calculator".to_owned(), true)
        ],
        "one call by the protocol, one by RPC"
    );
    assert!(
        (seen.heard_hz - ASSISTANT_TONE_HZ).abs() < 10.0,
        "we heard {} Hz",
        seen.heard_hz
    );
    assert!(
        seen.sounding > 0.95,
        "gaps in the assistant's tone: {seen:?}"
    );
}

/// All UDP dropped in the client's namespace (the signal connection is TCP): the
/// official SDK gets through over ICE/TCP to the server's port 7881, and so does
/// Outpost: both tool-call paths and voice both ways.
#[test]
fn with_udp_blocked_outpost_connects_over_ice_tcp_like_the_sdk() {
    let env = Env::on(ServerKind::LiveKit, Path::new(ROOM_BIN)).expect("namespaces and server");
    env.pair.set_client_udp_blocked(true).unwrap();
    sdk_baseline(&env, "streams_rpc.py", &[]);
    sdk_baseline(
        &env,
        "audio_tone.py",
        &[
            ("LK_TONE_SECONDS", "3"),
            ("LK_TONE_MIMES", "audio/opus,audio/red"),
        ],
    );

    let dir = tempfile::tempdir().unwrap();
    let (assistant, lines) = start_assistant(&env);
    let seen = outpost_session(&env, dir.path(), RoomOptions::default())
        .unwrap_or_else(|e| panic!("{e:#}\n--- server ---\n{}", env.server.proc.stderr()));
    judge(&env, assistant, &lines, &seen);
}

/// Sends `n` numbered packets on `topic` to the official-SDK peer `peer` (tests/py/lk_peer.py,
/// which echoes them) and waits for every echo, in order.
async fn echo_round(
    room: &Room,
    events: &mut RoomEvents,
    topic: &str,
    n: usize,
) -> anyhow::Result<()> {
    for i in 0..n {
        room.send_data(
            i.to_string().into_bytes(),
            DataOptions::topic(topic).to("peer"),
        )
        .await?;
    }
    let echo = format!("echo:{topic}");
    let mut got = Vec::new();
    while got.len() < n {
        let ev = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .with_context(|| format!("echoes on {topic}: only {got:?} within 30 s"))?
            .context("the room closed")?;
        if let RoomEvent::Data(m) = ev {
            if m.topic.as_deref() == Some(echo.as_str()) {
                got.push(String::from_utf8_lossy(&m.payload).into_owned());
            }
        }
    }
    let want: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    anyhow::ensure!(got == want, "echoes out of order: {got:?}");
    Ok(())
}

/// The next `Reconnecting` and the `Reconnected` after it: (reason, resumed).
async fn reconnect(events: &mut RoomEvents) -> anyhow::Result<(String, bool)> {
    let mut reason = None;
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .with_context(|| format!("no reconnect within 60 s (lost: {reason:?})"))?
            .context("the room closed")?;
        match ev {
            RoomEvent::Reconnecting { reason: r } => reason = Some(r),
            RoomEvent::Reconnected { resumed } if reason.is_some() => {
                return Ok((reason.unwrap_or_default(), resumed));
            }
            RoomEvent::Disconnected { reason } => bail!("disconnected: {reason}"),
            _ => {}
        }
    }
}

/// Fails unless the room's publisher connection took a path of `kind`.
fn expect_path(room: &Room, kind: PathKind) -> anyhow::Result<()> {
    let path = room.connection_path();
    anyhow::ensure!(
        path.publisher.as_ref().map(|p| p.kind) == Some(kind),
        "expected a {kind} path: {path:?}"
    );
    Ok(())
}

/// livekit-server (with `opts`) and the official-SDK echo peer "peer" in the server
/// namespace; `body(url, client namespace)` runs as Outpost in the client namespace.
/// Fails with the server's and the peer's logs; returns the server's log.
fn with_echo_peer<F, Fut>(opts: ServerOptions, body: F) -> String
where
    F: FnOnce(String, String) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let env = Env::on_with_opts(ServerKind::LiveKit, Path::new(ROOM_BIN), &[], opts)
        .expect("namespaces and server");
    echo_session(&env, body)
}

/// [`with_echo_peer`] in an environment already made.
fn echo_session<F, Fut>(env: &Env, body: F) -> String
where
    F: FnOnce(String, String) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let peer = PyPeer::start(&env.pair, &env.server.url, ROOM, "peer").expect("official-SDK peer");
    let url = env.server.url.clone();
    let ns = env.pair.client_ns.clone();
    let result = in_netns(&ns.clone(), move || body(url, ns));
    let log = env.server.proc.stderr();
    if let Err(e) = result {
        panic!(
            "{e:#}\n--- server ---\n{log}\n--- peer ---\n{}",
            peer.proc.stderr()
        );
    }
    log
}

/// Drops the client's TCP to the server's ICE/TCP port (7881) too (`blocked`), on top
/// of [`lkclient::set_udp_blocked`]: no media path at all, the signal connection (7880)
/// stays.
fn set_ice_tcp_blocked(ns: &str, blocked: bool) -> anyhow::Result<()> {
    lkclient::nft(
        ns,
        if blocked {
            "table inet outpost_ice_tcp {\n chain output {\n  type filter hook output priority 0; policy accept;\n  tcp dport 7881 drop\n }\n}\n"
        } else {
            "delete table inet outpost_ice_tcp\n"
        },
    )
}

/// Joins as Outpost with `opts`, the official-SDK peer "peer" as the assistant.
async fn join(url: &str, opts: RoomOptions) -> anyhow::Result<(Room, RoomEvents)> {
    let token = lkclient::token(ROOM, OUTPOST, lkclient::DEV_SECRET)?;
    Ok(Room::connect(url, &token, opts.assistant("peer")).await?)
}

/// UDP dropped mid-session (ICE/TCP open): the session resumes over ICE/TCP at once, and
/// the resume tells livekit-server the publisher connection failed (RR_PUBLISHER_FAILED,
/// as the official SDKs say; it was always RR_SIGNAL_DISCONNECTED before). A new session
/// with UDP still blocked goes over ICE/TCP from the start; with UDP back, over UDP.
#[test]
fn udp_lost_mid_session_resumes_over_ice_tcp_and_rejoins_either_way() {
    let log = with_echo_peer(ServerOptions::default(), |url, ns| async move {
        let (room, mut events) = join(&url, RoomOptions::default()).await?;
        let me = room
            .local_participant()
            .context("no local participant")?
            .sid;
        echo_round(&room, &mut events, "udp", 5).await?;
        expect_path(&room, PathKind::Udp)?;

        lkclient::set_udp_blocked(&ns, true)?;
        let (reason, resumed) = reconnect(&mut events).await?;
        anyhow::ensure!(resumed, "rejoined, not resumed ({reason})");
        anyhow::ensure!(
            room.local_participant().map(|p| p.sid) == Some(me),
            "a new sid"
        );
        expect_path(&room, PathKind::Tcp)?;
        echo_round(&room, &mut events, "after-cut", 5).await?;
        room.leave().await?;

        let (room, mut events) = join(&url, RoomOptions::default()).await?;
        expect_path(&room, PathKind::Tcp)?;
        echo_round(&room, &mut events, "rejoin-blocked", 5).await?;
        room.leave().await?;

        lkclient::set_udp_blocked(&ns, false)?;
        let (room, mut events) = join(&url, RoomOptions::default()).await?;
        expect_path(&room, PathKind::Udp)?;
        echo_round(&room, &mut events, "rejoin-open", 5).await?;
        room.leave().await?;
        Ok(())
    });
    assert!(
        log.lines()
            // Whichever of the two peer connections noticed first (a race under load).
            .any(|l| l.contains("resuming RTC session")
                && (l.contains("RR_PUBLISHER_FAILED") || l.contains("RR_SUBSCRIBER_FAILED"))),
        "the resume did not say the peer connection failed:\n{log}"
    );
}

/// What livekit-server's ICE/TCP fallback (ICT_TCP) amounts to for a client: TCP
/// candidates only, and the client's UDP candidates dropped. Forced here with
/// `rtc.force_tcp` (v1.13.5 seldom keeps ICT_TCP for a client that resumes with an ICE
/// restart at once: its resume path applies the ICE configuration it read before the
/// client's reconnect reason, and its failure count is reset when it closes the signal
/// connection for the Leave it sends). Outpost connects with UDP open, over ICE/TCP; it
/// could not before.
#[test]
fn a_server_offering_tcp_candidates_only_is_reached_over_ice_tcp() {
    let opts = ServerOptions {
        rtc_extra: vec!["force_tcp: true".into()],
        ..ServerOptions::default()
    };
    with_echo_peer(opts, |url, _| async move {
        let (room, mut events) = join(&url, RoomOptions::default()).await?;
        expect_path(&room, PathKind::Tcp)?;
        echo_round(&room, &mut events, "tcp-only", 20).await?;
        room.leave().await?;
        Ok(())
    });
}

/// Every media path lost for longer than livekit-server's ICE waits (UDP and ICE/TCP
/// dropped, the signal connection up): the server's ICE fails every 15 s and it asks
/// the client to resume (Leave RESUME) each time. The client resumes each time, so when
/// the paths are back the session is the same one (same sid), not a rejoin; before, the
/// first such Leave during a resume ended in a full rejoin that was reported as a resume.
#[test]
fn a_long_outage_of_every_media_path_is_resumed_not_rejoined() {
    let log = with_echo_peer(ServerOptions::default(), |url, ns| async move {
        let mut opts = RoomOptions::default();
        // Longer than the outage: the client must not give up on the resume itself.
        opts.peer_connection_timeout = Duration::from_secs(60);
        let (room, mut events) = join(&url, opts).await?;
        let me = room
            .local_participant()
            .context("no local participant")?
            .sid;
        echo_round(&room, &mut events, "before", 5).await?;
        lkclient::set_udp_blocked(&ns, true)?;
        set_ice_tcp_blocked(&ns, true)?;
        tokio::time::sleep(Duration::from_secs(35)).await;
        set_ice_tcp_blocked(&ns, false)?;
        lkclient::set_udp_blocked(&ns, false)?;
        let (reason, resumed) = reconnect(&mut events).await?;
        eprintln!(
            "after the outage: {reason}; resumed={resumed}; {}",
            room.connection_path().describe()
        );
        anyhow::ensure!(resumed, "rejoined, not resumed ({reason})");
        anyhow::ensure!(
            room.local_participant().map(|p| p.sid) == Some(me),
            "reported as resumed with a new sid"
        );
        echo_round(&room, &mut events, "after", 5).await?;
        room.leave().await?;
        Ok(())
    });
    assert!(
        log.matches("resuming RTC session").count() >= 2,
        "the server never asked for a second resume:\n{log}"
    );
}

/// livekit-server with its TURN server on (UDP 3478, TLS on 443 with a certificate from a
/// throw-away CA for the server's address, which is also the TURN "domain": a domain name
/// would need DNS in the client namespace), relaying to peers inside the test's subnet;
/// and the CA.
fn turn_env() -> (Env, TestPki) {
    Env::livekit_with_turn(Path::new(ROOM_BIN)).expect("livekit-server with TURN")
}

/// Only TCP to the signal port (7880) and to the TURN/TLS port (443) leaves the client's
/// namespace: no UDP, no ICE/TCP.
fn set_only_turn_tls(ns: &str) -> anyhow::Result<()> {
    only(ns, "tcp dport { 7880, 443 } accept")
}

/// Only the signal connection (TCP 7880) and UDP to the TURN port (3478) leave the
/// client's namespace: no direct UDP, no ICE/TCP, no TURN/TLS.
fn set_only_turn_udp(ns: &str) -> anyhow::Result<()> {
    only(ns, "tcp dport 7880 accept\n  udp dport 3478 accept")
}

/// Drops everything leaving namespace `ns` but loopback and what `allow` accepts.
fn only(ns: &str, allow: &str) -> anyhow::Result<()> {
    lkclient::allow_only(ns, allow)
}

/// Only TLS to the TURN port (and the signal connection) gets out of the client's
/// namespace. Outpost (given the test CA as the server's) connects through the server's
/// TURN over TLS: its path is TURN/TLS, data goes both ways, and its session engine runs
/// both tool-call paths and voice both ways through the relay.
///
/// No official-SDK baseline here: its libwebrtc trusts only its built-in root
/// certificates for TURN over TLS (neither the system's store nor `SSL_CERT_FILE`: the
/// server logs "tls: unknown certificate authority"), so with a throw-away CA it cannot
/// connect, and a publicly trusted certificate cannot be had offline. The SDK's relayed
/// baseline is TURN over UDP, below.
#[test]
fn only_turn_tls_gets_through_and_outpost_relays_over_it() {
    let (env, pki) = turn_env();
    set_only_turn_tls(&env.pair.client_ns).unwrap();
    let ca = pki.ca_pem.clone();
    let trusting = move || RoomOptions::default().trust_root_ca_pem(ca.clone());
    let opts = trusting.clone();
    echo_session(&env, move |url, _| async move {
        let (room, mut events) = join(&url, opts()).await?;
        expect_path(&room, PathKind::TurnTls)?;
        echo_round(&room, &mut events, "relayed", 20).await?;
        room.leave().await?;
        Ok(())
    });
    let dir = tempfile::tempdir().unwrap();
    let (assistant, lines) = start_assistant(&env);
    let seen = outpost_session(&env, dir.path(), trusting())
        .unwrap_or_else(|e| panic!("{e:#}\n--- server ---\n{}", env.server.proc.stderr()));
    judge(&env, assistant, &lines, &seen);
}

/// Only UDP to the TURN port (and the signal connection) gets out: the official SDK and
/// Outpost both relay through the server's TURN over UDP (`webrtc`'s own TURN client).
#[test]
fn only_turn_udp_gets_through_and_both_relay_over_it() {
    // About one fresh server in eight, the SDK's relayed ICE never completes: both of
    // its goes (eight connection attempts over two minutes) time out, the server's
    // checks to the SDK's relay candidate go unanswered and none arrive through the
    // relay, while every other server passes at the first go (2026-11-27: 2 of 12 runs
    // alone, and one CI run; each time a fresh server passed). Not understood. The SDK is this test's control,
    // not what it tests, so a server where the control cannot connect is replaced by a
    // fresh one, once; Outpost is then tested where the control got through.
    let (env, _pki) = {
        let (env, pki) = turn_env();
        set_only_turn_udp(&env.pair.client_ns).unwrap();
        match sdk_baseline_or_timeout(&env, "streams_rpc.py", &[]) {
            Ok(_) => (env, pki),
            Err(err) => {
                eprintln!(
                    "the SDK could not connect through this server at all; a fresh one:\n{err}"
                );
                drop(env);
                let (env, pki) = turn_env();
                set_only_turn_udp(&env.pair.client_ns).unwrap();
                sdk_baseline(&env, "streams_rpc.py", &[]);
                (env, pki)
            }
        }
    };
    echo_session(&env, move |url, _| async move {
        let (room, mut events) = join(&url, RoomOptions::default()).await?;
        eprintln!("path: {}", room.connection_path().describe());
        expect_path(&room, PathKind::TurnUdp)?;
        echo_round(&room, &mut events, "relayed", 20).await?;
        room.leave().await?;
        Ok(())
    });
}

/// An `https://` token endpoint on 127.0.0.1 with `pki`'s certificate, answering every
/// request with a token for `identity` on `server_url`. Runs until aborted.
async fn https_token_endpoint(
    pki: &TestPki,
    server_url: String,
    identity: &'static str,
) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(pki.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(sock).await else {
                continue; // a client that refused our certificate
            };
            let mut buf = vec![0u8; 16 * 1024];
            let _ = tls.read(&mut buf).await;
            let answer = serde_json::json!({
                "server_url": server_url,
                "participant_token": lkclient::token(ROOM, identity, lkclient::DEV_SECRET).unwrap(),
            })
            .to_string();
            let resp = format!(
                "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            let _ = tls.write_all(resp.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    });
    (format!("https://{addr}/token"), task)
}

/// The sentence a refused certificate gives (outpost-tls).
const UNTRUSTED: &str = "not issued by an authority this system trusts";

/// A CA added to the system's certificate store the Debian way (a file in
/// /usr/local/share/ca-certificates, `update-ca-certificates`) is trusted for `wss://`
/// signaling and an `https://` token endpoint without being given to Outpost, and for
/// TURN over TLS; once removed, each is refused again, signaling and the token endpoint
/// with one sentence saying why. (outpost-room serves `wss://`; livekit-server, which has
/// no TLS listener, serves TURN/TLS.) The store is restored by a drop guard, also when
/// the test fails.
#[test]
fn a_ca_in_the_system_store_is_trusted_and_refused_once_removed() {
    use outpost_livekit::{Error, TokenEndpoint, TokenRequest};
    let pair = lkclient::NsPair::create().expect("namespaces");
    let pki = TestPki::new(&[pair.server_ip.to_string(), "127.0.0.1".into()]).expect("test CA");
    let cert = pki.cert_path().display().to_string();
    let key = pki.key_path().display().to_string();
    let server = lkclient::Server::start_in(
        &pair,
        ServerKind::Room,
        Path::new(ROOM_BIN),
        &["--tls-cert", &cert, "--tls-key", &key],
    )
    .expect("outpost-room over wss");
    let ca_file = pki.ca_path().display().to_string();
    let _peer = PyPeer::start_with_env(
        &pair,
        &server.url,
        ROOM,
        "peer",
        &[("SSL_CERT_FILE", &ca_file)],
    )
    .expect("official-SDK peer over wss");
    let pki = std::sync::Arc::new(pki);
    // Connects through the https token endpoint; `Ok` with the room, or the error.
    let attempt = |pki: std::sync::Arc<TestPki>, url: String| {
        in_netns(&pair.client_ns.clone(), move || async move {
            let (endpoint, task) = https_token_endpoint(&pki, url.clone(), OUTPOST).await;
            let request = TokenRequest {
                room_name: Some(ROOM.into()),
                participant_identity: Some(OUTPOST.into()),
                ..Default::default()
            };
            let mut opts = RoomOptions::default().assistant("peer");
            opts.connect_timeout = Duration::from_secs(3);
            let via_endpoint =
                Room::connect_with_endpoint(&TokenEndpoint::new(endpoint), &request, opts.clone())
                    .await;
            let token = lkclient::token(ROOM, OUTPOST, lkclient::DEV_SECRET)?;
            let direct = match via_endpoint {
                Ok((room, mut events)) => {
                    echo_round(&room, &mut events, "trusted", 5).await?;
                    room.leave().await?;
                    Ok(())
                }
                Err(e) => Err((e, Room::connect(&url, &token, opts).await.err())),
            };
            task.abort();
            Ok(direct)
        })
    };
    let refused = |what: &str, r: anyhow::Result<Result<(), (Error, Option<Error>)>>| {
        let Err((endpoint, direct)) = r.unwrap() else {
            panic!("{what}: connected without trusting the CA");
        };
        assert!(
            matches!(endpoint, Error::TokenEndpoint { .. })
                && endpoint.to_string().contains(UNTRUSTED),
            "{what}, token endpoint: {endpoint}"
        );
        let direct = direct.expect("the wss connection was refused too");
        assert!(
            matches!(direct, Error::Unreachable { .. }) && direct.to_string().contains(UNTRUSTED),
            "{what}, signaling: {direct}"
        );
        eprintln!("{what}: {endpoint}\n{what}: {direct}");
    };

    refused("before", attempt(pki.clone(), server.url.clone()));
    let ca = SystemCa::install(&pki).expect("CA into the system store");
    attempt(pki.clone(), server.url.clone())
        .unwrap()
        .unwrap_or_else(|(e, _)| panic!("with the CA in the system store: {e}"));

    // TURN over TLS trusts it too (livekit-server; only TLS to 443 gets out).
    let (env, turn_pki) = turn_env();
    drop(ca);
    let turn_ca = SystemCa::install(&turn_pki).expect("TURN CA into the system store");
    set_only_turn_tls(&env.pair.client_ns).unwrap();
    echo_session(&env, |url, _| async move {
        let (room, mut events) = join(&url, RoomOptions::default()).await?;
        expect_path(&room, PathKind::TurnTls)?;
        echo_round(&room, &mut events, "relayed", 5).await?;
        room.leave().await?;
        Ok(())
    });
    turn_ca.remove().expect("TURN CA out of the system store");
    let url = env.server.url.clone();
    let relayed = in_netns(&env.pair.client_ns.clone(), move || async move {
        Ok(join(&url, RoomOptions::default()).await.err())
    })
    .unwrap();
    assert!(
        relayed.is_some(),
        "TURN/TLS connected after its CA left the system store"
    );

    refused("after", attempt(pki.clone(), server.url.clone()));
}

/// How `connect` fails as Outpost with default options (`None` if it connects).
async fn refusal(url: &str) -> Option<outpost_livekit::Error> {
    let token = lkclient::token(ROOM, OUTPOST, lkclient::DEV_SECRET).ok()?;
    Room::connect(url, &token, RoomOptions::default())
        .await
        .err()
}

/// Only the signal connection gets out (then also TLS to 443, with the TURN server's CA
/// not trusted): `connect` fails after the peer connection timeout saying, for each kind
/// of path, which server it tried and what came of it, and `outpost connect` prints the
/// same and exits non-zero.
#[test]
fn when_nothing_gets_through_the_failure_names_every_path_tried() {
    let (env, _pki) = turn_env();
    only(&env.pair.client_ns, "tcp dport 7880 accept").unwrap();
    let url = env.server.url.clone();
    let err = in_netns(&env.pair.client_ns.clone(), move || async move {
        Ok(refusal(&url).await)
    })
    .unwrap()
    .expect("connected with every media path blocked");
    let text = err.to_string();
    eprintln!("nothing through: {text}");
    assert!(
        matches!(err, outpost_livekit::Error::NoPath { .. }),
        "{text}"
    );
    let ip = env.server.ip().to_string();
    for (path, port) in [
        ("UDP", 7882),
        ("TCP", 7881),
        ("TURN/UDP", 3478),
        ("TURN/TLS", 443),
    ] {
        let want = format!("{path} to {ip}:{port}: ");
        assert!(text.contains(&want), "no {want:?} in: {text}");
    }
    assert!(text.contains("no answer"), "{text}");

    // The CLI says the same.
    let dir = tempfile::tempdir().unwrap();
    let token = lkclient::token(ROOM, OUTPOST, lkclient::DEV_SECRET).unwrap();
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &env.pair.client_ns, CLI_BIN, "connect"])
        .args(["--url", &env.server.url, "--token", &token, "--room", ROOM])
        .args(["--assistant-identity", ASSISTANT, "--no-mcp"])
        .arg("--data-dir")
        .arg(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("no network path") && stderr.contains(&format!("TURN/TLS to {ip}:443")),
        "outpost connect said: {stderr}"
    );

    // TLS to 443 gets out now, but the TURN server's certificate is not trusted.
    only(&env.pair.client_ns, "tcp dport { 7880, 443 } accept").unwrap();
    let url = env.server.url.clone();
    let err = in_netns(&env.pair.client_ns.clone(), move || async move {
        Ok(refusal(&url).await)
    })
    .unwrap()
    .expect("connected through an untrusted TURN server");
    let text = err.to_string();
    eprintln!("untrusted TURN/TLS: {text}");
    assert!(
        text.contains(&format!(
            "TURN/TLS to {ip}:443: the server's certificate was refused: its certificate is {UNTRUSTED}"
        )),
        "{text}"
    );
}

/// livekit-server's slow-reader drop (issue 25, finding 8), with Outpost as the slow
/// reader: `rtc.datachannel_slow_threshold` set to 4 Mbit/s and the server's link to the
/// client held to 1 Mbit/s (a token bucket on the server's end of the veth), the
/// official-SDK peer streams 1 MiB to Outpost. The server drops reliable packets to it
/// (its log says so), and Outpost's read fails saying a chunk is missing (or, had the
/// stream's header been the packet dropped, no stream opens: its chunks are ignored): a
/// stream with a hole is never taken as complete. The session carries data afterwards.
#[test]
fn a_stream_the_server_cuts_for_a_slow_reader_fails_saying_a_chunk_is_missing() {
    let (outcome, log) = slow_reader(Some(4_000_000));
    assert!(
        matches!(outcome, SlowRead::ChunkMissing | SlowRead::NeverOpened),
        "{outcome:?}\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("dropped by slow reader")),
        "the server dropped nothing, so this test showed nothing:\n{log}"
    );
}

/// The same slow link with livekit-server's default settings (no slow threshold): its
/// writes to the client do not block, nothing is dropped, and all 1 MiB arrives intact,
/// only later (what docs/ROOM.md's conformance table says of the default).
#[test]
fn a_slow_reader_gets_the_whole_stream_from_a_server_with_default_settings() {
    let (outcome, log) = slow_reader(None);
    assert_eq!(outcome, SlowRead::Intact, "{log}");
    assert!(
        !log.lines().any(|l| l.contains("dropped by slow reader")),
        "{log}"
    );
}

/// How a 1 MiB stream to a slow Outpost ended.
#[derive(Debug, PartialEq)]
enum SlowRead {
    /// Every byte, checksum equal to what the peer sent.
    Intact,
    /// The read failed saying a chunk is missing.
    ChunkMissing,
    /// No stream opened within 60 s.
    NeverOpened,
}

/// The scenario of the two tests above, with `threshold` as the server's
/// `rtc.datachannel_slow_threshold`; how the read ended, and the server's log.
fn slow_reader(threshold: Option<u32>) -> (SlowRead, String) {
    const SIZE: usize = 1024 * 1024;
    let opts = ServerOptions {
        rtc_extra: threshold
            .map(|t| format!("datachannel_slow_threshold: {t}"))
            .into_iter()
            .collect(),
        ..ServerOptions::default()
    };
    let env = Env::on_with_opts(ServerKind::LiveKit, Path::new(ROOM_BIN), &[], opts)
        .expect("namespaces and server");
    let server_ns = env.pair.server_ns.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let log = echo_session(&env, move |url, _| async move {
        let (room, mut events) = join(&url, RoomOptions::default()).await?;
        echo_round(&room, &mut events, "before", 3).await?;
        lkclient::set_server_link_rate(&server_ns, Some("1mbit"))?;
        lkclient::send_cmd(
            &room,
            "peer",
            &serde_json::json!({"op": "stream_bytes", "size": SIZE, "topic": "bytes"}),
        )
        .await;
        let mut sent = None;
        let mut outcome = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while outcome.is_none() {
            let ev = match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(ev)) => ev,
                Ok(None) => bail!("the room closed"),
                Err(_) => break,
            };
            match ev {
                RoomEvent::StreamOpened(r) if r.info.topic == "bytes" => {
                    let read = tokio::time::timeout_at(deadline, r.read_all()).await;
                    outcome = Some(read);
                }
                RoomEvent::Data(m) if m.topic.as_deref() == Some("reply") => {
                    let v: Value = serde_json::from_slice(&m.payload).unwrap_or(Value::Null);
                    if v["op"] == "sent_stream" {
                        sent = Some(v);
                    }
                }
                _ => {}
            }
        }
        lkclient::set_server_link_rate(&server_ns, None)?;
        match outcome {
            None => {
                eprintln!("no stream opened within 60 s");
                let _ = tx.send(SlowRead::NeverOpened);
            }
            Some(Err(_)) => bail!("the read neither ended nor failed within 60 s"),
            Some(Ok(Err(e))) => {
                eprintln!("the read failed: {e}");
                anyhow::ensure!(
                    e.to_string().contains("is missing"),
                    "the error does not say a chunk is missing: {e}"
                );
                let _ = tx.send(SlowRead::ChunkMissing);
            }
            Some(Ok(Ok(got))) => {
                // All of it arrived after all: it must be the very bytes sent.
                while sent.is_none() {
                    let ev = tokio::time::timeout(WAIT, events.recv())
                        .await
                        .context("no sent_stream from the peer")?
                        .context("the room closed")?;
                    if let RoomEvent::Data(m) = ev
                        && m.topic.as_deref() == Some("reply")
                    {
                        let v: Value = serde_json::from_slice(&m.payload).unwrap_or(Value::Null);
                        if v["op"] == "sent_stream" {
                            sent = Some(v);
                        }
                    }
                }
                let sent = sent.unwrap_or_default();
                anyhow::ensure!(
                    got.len() == SIZE && sent["sha256"] == sha_hex(&got).as_str(),
                    "a stream taken as complete is not what was sent ({} bytes)",
                    got.len()
                );
                eprintln!("all {SIZE} bytes arrived intact");
                let _ = tx.send(SlowRead::Intact);
            }
        }
        echo_round(&room, &mut events, "after", 3).await?;
        Ok(())
    });
    let outcome = rx.try_recv().expect("the scenario ended with an outcome");
    (outcome, log)
}

fn sha_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
