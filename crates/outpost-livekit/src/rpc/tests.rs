//! Unit tests of both RPC versions against the packets and streams they queue.
use super::*;

#[test]
fn codes_match_the_official_sdks() {
    let codes: Vec<(u32, &str)> = RpcErrorCode::ALL
        .iter()
        .map(|c| (c.code(), c.message()))
        .collect();
    assert!(codes.contains(&(1400, "Method not supported at destination")));
    assert!(codes.contains(&(1402, "Request payload too large")));
    assert!(codes.contains(&(1504, "Response payload too large")));
    assert!(codes.contains(&(1500, "Application error in method handler")));
    for c in RpcErrorCode::ALL {
        assert_eq!(RpcErrorCode::from_code(c.code()), Some(c));
    }
    assert_eq!(RpcErrorCode::from_code(2001), None);
}

#[test]
fn errors_are_cut_to_their_limits_at_character_boundaries() {
    let e = RpcError::new(7, "é".repeat(200), Some("x".repeat(20_000)));
    assert!(e.message.len() <= MAX_ERROR_MESSAGE_BYTES);
    assert!(e.message.chars().all(|c| c == 'é'));
    assert_eq!(e.data.as_ref().map(String::len), Some(MAX_PAYLOAD_BYTES));
    let back = RpcError::from_packet(e.to_packet());
    assert_eq!(back, e);
    // An empty data field on the wire means "no data".
    let none = RpcError::from_packet(RpcError::new(1, "m", None).to_packet());
    assert_eq!(none.data, None);
}

use crate::shared::Shared;

/// The RPC state of a connected room (see [`Shared::for_tests`]), version 1 only.
fn shared() -> Arc<Rpc> {
    rpc_with(false)
}

/// What was queued: (destination, packet value).
fn sent(rpc: &Rpc) -> Vec<(String, data_packet::Value)> {
    rpc.shared
        .outbox
        .take_pending()
        .iter()
        .map(|b| {
            let p = proto::decode_data_packet(b).unwrap();
            assert_eq!(p.participant_identity, "me");
            (p.destination_identities.join(","), p.value.unwrap())
        })
        .collect()
}

fn request(id: &str, method: &str, payload: &str) -> RpcRequest {
    RpcRequest {
        id: id.into(),
        method: method.into(),
        payload: payload.into(),
        response_timeout_ms: 5_000,
        version: 1,
        ..Default::default()
    }
}

fn error_code(v: &data_packet::Value) -> Option<u32> {
    match v {
        data_packet::Value::RpcResponse(RpcResponse {
            value: Some(rpc_response::Value::Error(e)),
            ..
        }) => Some(e.code),
        _ => None,
    }
}

#[tokio::test]
async fn requests_are_acked_at_once_then_answered_or_refused() {
    let s = shared();
    s.register(
        "echo".into(),
        handler(|inv: RpcInvocation| async move {
            Ok(format!("{}:{}", inv.caller_identity, inv.payload))
        }),
    );
    // Refusals: ack, then the error, without any handler.
    on_request(&s, "bob", request("1", "nope", ""));
    let mut v2 = request("2", "echo", "");
    v2.version = 2;
    on_request(&s, "bob", v2);
    on_request(
        &s,
        "bob",
        request("3", "echo", &"x".repeat(MAX_PAYLOAD_BYTES + 1)),
    );
    let out = sent(&s);
    assert_eq!(out.len(), 6);
    assert!(out.iter().all(|(to, _)| to == "bob"));
    assert!(matches!(&out[0].1, data_packet::Value::RpcAck(a) if a.request_id == "1"));
    assert_eq!(error_code(&out[1].1), Some(1400));
    assert_eq!(error_code(&out[3].1), Some(1404));
    assert_eq!(error_code(&out[5].1), Some(1402));
    // A served request: the ack is queued before the handler has run.
    on_request(&s, "bob", request("4", "echo", "hi"));
    let out = sent(&s);
    assert_eq!(out.len(), 1);
    assert!(matches!(&out[0].1, data_packet::Value::RpcAck(a) if a.request_id == "4"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let out = sent(&s);
    assert!(
        matches!(&out[..], [(to, data_packet::Value::RpcResponse(RpcResponse {
            request_id, value: Some(rpc_response::Value::Payload(p)) }))]
            if to == "bob" && request_id == "4" && p == "bob:hi"),
        "{out:?}"
    );
}

#[tokio::test]
async fn only_the_participant_called_can_answer() {
    let s = shared();
    let s2 = s.clone();
    let call = tokio::spawn(async move { perform(&s2, PerformRpc::new("bob", "m", "p")).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let out = sent(&s);
    let Some((to, data_packet::Value::RpcRequest(req))) = out.first() else {
        panic!("{out:?}")
    };
    assert_eq!(to, "bob");
    // 15 s response timeout minus the 7 s ack allowance.
    assert_eq!((req.version, req.response_timeout_ms), (1, 8_000));
    let answer = |value: &str| RpcResponse {
        request_id: req.id.clone(),
        value: Some(rpc_response::Value::Payload(value.into())),
    };
    s.on_ack(
        "mallory",
        RpcAck {
            request_id: req.id.clone(),
        },
    );
    s.on_response("mallory", answer("forged"));
    assert!(!call.is_finished());
    s.on_response("bob", answer("real"));
    assert_eq!(call.await.unwrap(), Ok("real".to_owned()));
    // A late duplicate is ignored.
    s.on_response("bob", answer("again"));

    // The destination leaves mid-call.
    let s3 = s.clone();
    let call = tokio::spawn(async move { perform(&s3, PerformRpc::new("carol", "m", "p")).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.participant_left("carol");
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(
        err.built_in_code(),
        Some(RpcErrorCode::RecipientDisconnected)
    );
}

use crate::proto::data_stream;
use crate::streams::{Limits, Receivers};

fn receivers() -> Receivers {
    Receivers::new(Limits {
        cap: 1 << 30,
        per_sender: 16,
        total: 64,
        idle: Duration::from_secs(60),
    })
}

/// A text (or byte) stream header on `topic` with `attrs`.
fn stream_header(id: &str, topic: &str, attrs: &[(&str, &str)], text: bool) -> data_stream::Header {
    data_stream::Header {
        stream_id: id.into(),
        topic: topic.into(),
        attributes: attrs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        content_header: Some(if text {
            data_stream::header::ContentHeader::TextHeader(data_stream::TextHeader::default())
        } else {
            data_stream::header::ContentHeader::ByteHeader(data_stream::ByteHeader {
                name: "f".into(),
            })
        }),
        ..Default::default()
    }
}

/// Feeds a whole stream from `from` (content in 15 000-byte chunks, then a trailer
/// with `reason`) and hands its reader to the RPC layer.
fn feed(
    s: &Arc<Rpc>,
    rx: &mut Receivers,
    from: &str,
    h: data_stream::Header,
    content: &[u8],
    reason: &str,
) {
    let id = h.stream_id.clone();
    on_stream_header(s, rx, from, false, h, Instant::now());
    for (i, piece) in content.chunks(15_000).enumerate() {
        rx.on_chunk(
            from,
            data_stream::Chunk {
                stream_id: id.clone(),
                chunk_index: i as u64,
                content: piece.to_vec(),
                ..Default::default()
            },
            Instant::now(),
        );
    }
    rx.on_trailer(
        from,
        data_stream::Trailer {
            stream_id: id,
            reason: reason.into(),
            ..Default::default()
        },
    );
}

fn v2_request<'a>(id: &'a str, method: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        (ATTR_REQUEST_ID, id),
        (ATTR_METHOD, method),
        (ATTR_RESPONSE_TIMEOUT_MS, "5000"),
        (ATTR_VERSION, "2"),
    ]
}

/// The error (code, data) of a response packet.
fn error_of(v: &data_packet::Value) -> Option<(u32, String)> {
    match v {
        data_packet::Value::RpcResponse(RpcResponse {
            value: Some(rpc_response::Value::Error(e)),
            ..
        }) => Some((e.code, e.data.clone())),
        _ => None,
    }
}

/// A stream that was sent, reassembled: (destination, topic, attributes, text).
fn sent_stream(
    out: &[(String, data_packet::Value)],
) -> (String, String, HashMap<String, String>, String) {
    let mut head = None;
    let mut text = Vec::new();
    let mut ended = false;
    for (to, v) in out {
        match v {
            data_packet::Value::StreamHeader(h) => {
                head = Some((to.clone(), h.topic.clone(), h.attributes.clone()))
            }
            data_packet::Value::StreamChunk(c) => {
                assert_eq!(
                    to,
                    &head.as_ref().unwrap().0,
                    "chunks go where the header went"
                );
                text.extend_from_slice(&c.content)
            }
            data_packet::Value::StreamTrailer(t) => {
                assert_eq!(t.reason, "");
                ended = true;
            }
            _ => {}
        }
    }
    assert!(ended, "the stream was closed: {out:?}");
    let (to, topic, attrs) = head.unwrap();
    (to, topic, attrs, String::from_utf8(text).unwrap())
}

fn remote(identity: &str, client_protocol: i32) -> crate::types::Participant {
    crate::types::Participant {
        sid: format!("PA_{identity}"),
        identity: identity.into(),
        name: String::new(),
        kind: crate::types::ParticipantKind::Standard,
        metadata: String::new(),
        attributes: HashMap::new(),
        client_protocol,
    }
}

fn rpc_with(v2: bool) -> Arc<Rpc> {
    let opts = crate::RoomOptions {
        rpc_v2: v2,
        ..crate::RoomOptions::default()
    };
    Arc::new(Rpc::new(opts.rpc_settings(), Shared::for_tests()))
}

fn shared_v2() -> Arc<Rpc> {
    let s = rpc_with(true);
    s.shared.roster().remote = vec![remote("bob", 2), remote("carol", 0)];
    s
}

/// Collects what was sent until `n` packets are there (a stream is sent from a task).
async fn sent_n(s: &Rpc, n: usize) -> Vec<(String, data_packet::Value)> {
    let mut out = Vec::new();
    for _ in 0..200 {
        out.extend(sent(s));
        if out.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    out
}

#[tokio::test]
async fn v2_requests_are_acked_then_answered_with_a_stream() {
    let s = shared_v2();
    s.register(
        "echo".into(),
        handler(|inv: RpcInvocation| async move {
            assert_eq!(inv.response_timeout, Duration::from_secs(5));
            Ok(format!("{}:{}", inv.caller_identity, inv.payload))
        }),
    );
    let mut rx = receivers();
    let big = "é".repeat(20_000); // 40 000 bytes, far over version 1's limit
    feed(
        &s,
        &mut rx,
        "bob",
        stream_header("S1", REQUEST_TOPIC, &v2_request("r1", "echo"), true),
        big.as_bytes(),
        "",
    );
    let out = sent_n(&s, 6).await;
    assert!(
        matches!(&out[0], (to, data_packet::Value::RpcAck(a)) if to == "bob" && a.request_id == "r1"),
        "{out:?}"
    );
    let (to, topic, attrs, text) = sent_stream(&out[1..]);
    assert_eq!((to.as_str(), topic.as_str()), ("bob", RESPONSE_TOPIC));
    assert_eq!(
        attrs,
        HashMap::from([(ATTR_REQUEST_ID.to_owned(), "r1".to_owned())])
    );
    assert_eq!(text, format!("bob:{big}"));
    // A handler error goes back as a version 1 packet.
    s.register(
        "fail".into(),
        handler(|_inv: RpcInvocation| async move { Err(RpcError::new(7, "no", Some("d".into()))) }),
    );
    feed(
        &s,
        &mut rx,
        "bob",
        stream_header("S2", REQUEST_TOPIC, &v2_request("r2", "fail"), true),
        b"x",
        "",
    );
    let out = sent_n(&s, 2).await;
    assert!(matches!(&out[0].1, data_packet::Value::RpcAck(a) if a.request_id == "r2"));
    assert_eq!(error_of(&out[1].1), Some((7, "d".into())));
    // Nothing was shown to the application, and no stream stays open.
    assert_eq!(rx.open_count(), 0);
}

/// Request id, stream attributes, content, trailer reason, the error code expected
/// and a text its `data` must contain.
type MalformedCase<'a> = (
    &'a str,
    Vec<(&'a str, &'a str)>,
    &'a [u8],
    &'a str,
    u32,
    &'a str,
);

#[tokio::test]
async fn malformed_v2_requests_get_a_clear_error_or_are_dropped() {
    let s = shared_v2();
    s.register(
        "echo".into(),
        handler(|inv: RpcInvocation| async move { Ok(inv.payload) }),
    );
    let mut rx = receivers();
    let cases: Vec<MalformedCase<'_>> = vec![
        (
            "v1",
            vec![
                (ATTR_REQUEST_ID, "v1"),
                (ATTR_METHOD, "echo"),
                (ATTR_VERSION, "1"),
            ],
            b"x",
            "",
            1404,
            "\"1\"",
        ),
        (
            "v9",
            vec![
                (ATTR_REQUEST_ID, "v9"),
                (ATTR_METHOD, "echo"),
                (ATTR_VERSION, "nine"),
            ],
            b"x",
            "",
            1404,
            "\"nine\"",
        ),
        (
            "nov",
            vec![(ATTR_REQUEST_ID, "nov"), (ATTR_METHOD, "echo")],
            b"x",
            "",
            1404,
            "no lk.rpc_request_version",
        ),
        (
            "nom",
            vec![(ATTR_REQUEST_ID, "nom"), (ATTR_VERSION, "2")],
            b"x",
            "",
            1400,
            "no lk.rpc_request_method",
        ),
        (
            "tmo",
            vec![
                (ATTR_REQUEST_ID, "tmo"),
                (ATTR_METHOD, "echo"),
                (ATTR_VERSION, "2"),
                (ATTR_RESPONSE_TIMEOUT_MS, "soon"),
            ],
            b"x",
            "",
            1500,
            "\"soon\"",
        ),
        ("unk", v2_request("unk", "nope"), b"x", "", 1400, ""),
        (
            "cut",
            v2_request("cut", "echo"),
            b"half",
            "sender gave up",
            1500,
            "sender gave up",
        ),
        (
            "utf",
            v2_request("utf", "echo"),
            &[0xff, 0xfe],
            "",
            1500,
            "UTF-8",
        ),
    ];
    for (i, (id, attrs, content, reason, code, data)) in cases.into_iter().enumerate() {
        feed(
            &s,
            &mut rx,
            "bob",
            stream_header(&format!("S{i}"), REQUEST_TOPIC, &attrs, true),
            content,
            reason,
        );
        let out = sent_n(&s, 2).await;
        assert_eq!(out.len(), 2, "{id}: {out:?}");
        assert!(
            matches!(&out[0].1, data_packet::Value::RpcAck(a) if a.request_id == id),
            "{id}: {out:?}"
        );
        let (got_code, got_data) = error_of(&out[1].1).unwrap_or_else(|| panic!("{id}: {out:?}"));
        assert_eq!(got_code, code, "{id}: {got_data}");
        assert!(got_data.contains(data), "{id}: {got_data:?} lacks {data:?}");
    }
    // No request id, or a byte stream: nobody to answer, nothing sent, no slot kept.
    feed(
        &s,
        &mut rx,
        "bob",
        stream_header(
            "N1",
            REQUEST_TOPIC,
            &[(ATTR_METHOD, "echo"), (ATTR_VERSION, "2")],
            true,
        ),
        b"x",
        "",
    );
    feed(
        &s,
        &mut rx,
        "bob",
        stream_header("N2", REQUEST_TOPIC, &v2_request("bytes", "echo"), false),
        b"x",
        "",
    );
    feed(
        &s,
        &mut rx,
        "bob",
        stream_header(
            "N3",
            RESPONSE_TOPIC,
            &[(ATTR_REQUEST_ID, "never-asked")],
            true,
        ),
        b"x",
        "",
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(sent(&s).is_empty());
    assert_eq!(rx.open_count(), 0);
}

#[tokio::test]
async fn reading_a_v2_request_counts_against_its_timeout() {
    let s = shared_v2();
    s.register(
        "echo".into(),
        handler(|inv: RpcInvocation| async move { Ok(inv.payload) }),
    );
    let mut rx = receivers();
    let mut attrs = v2_request("slow", "echo");
    attrs[2] = (ATTR_RESPONSE_TIMEOUT_MS, "200");
    // The header arrives, the content never does.
    on_stream_header(
        &s,
        &mut rx,
        "bob",
        false,
        stream_header("S", REQUEST_TOPIC, &attrs, true),
        Instant::now(),
    );
    let out = sent_n(&s, 2).await;
    assert!(matches!(&out[0].1, data_packet::Value::RpcAck(_)));
    assert_eq!(error_of(&out[1].1).map(|e| e.0), Some(1502));
}

#[tokio::test]
async fn calls_use_v2_when_the_callee_advertises_it() {
    let s = shared_v2();
    let big = "z".repeat(40_000);
    let s2 = s.clone();
    let payload = big.clone();
    let call =
        tokio::spawn(async move { perform(&s2, PerformRpc::new("bob", "m", payload)).await });
    let out = sent_n(&s, 5).await;
    let (to, topic, attrs, text) = sent_stream(&out);
    assert_eq!(
        (to.as_str(), topic.as_str(), text.len()),
        ("bob", REQUEST_TOPIC, 40_000)
    );
    assert_eq!(attrs[ATTR_METHOD], "m");
    assert_eq!(attrs[ATTR_VERSION], "2");
    assert_eq!(attrs[ATTR_RESPONSE_TIMEOUT_MS], "8000");
    let id = attrs[ATTR_REQUEST_ID].clone();
    s.on_ack(
        "bob",
        RpcAck {
            request_id: id.clone(),
        },
    );
    let mut rx = receivers();
    // A response from someone we did not call is ignored; the callee's is taken.
    feed(
        &s,
        &mut rx,
        "mallory",
        stream_header("F", RESPONSE_TOPIC, &[(ATTR_REQUEST_ID, &id)], true),
        b"forged",
        "",
    );
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(!call.is_finished());
    feed(
        &s,
        &mut rx,
        "bob",
        stream_header("R", RESPONSE_TOPIC, &[(ATTR_REQUEST_ID, &id)], true),
        big.as_bytes(),
        "",
    );
    assert_eq!(call.await.unwrap(), Ok(big.clone()));

    // A response stream that breaks ends the call with a clear error.
    let s2 = s.clone();
    let call = tokio::spawn(async move { perform(&s2, PerformRpc::new("bob", "m", "p")).await });
    let out = sent_n(&s, 3).await;
    let id = sent_stream(&out).2[ATTR_REQUEST_ID].clone();
    feed(
        &s,
        &mut rx,
        "bob",
        stream_header("B", RESPONSE_TOPIC, &[(ATTR_REQUEST_ID, &id)], true),
        b"par",
        "boom",
    );
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.built_in_code(), Some(RpcErrorCode::ApplicationError));
    assert!(
        err.data.as_deref().unwrap_or("").contains("boom"),
        "{err:?}"
    );

    // carol advertised 0: version 1, with its limit.
    let err = perform(&s, PerformRpc::new("carol", "m", big.clone()))
        .await
        .unwrap_err();
    assert_eq!(
        err.built_in_code(),
        Some(RpcErrorCode::RequestPayloadTooLarge)
    );
    let s2 = s.clone();
    let call = tokio::spawn(async move { perform(&s2, PerformRpc::new("carol", "m", "p")).await });
    let out = sent_n(&s, 1).await;
    assert!(
        matches!(&out[0], (to, data_packet::Value::RpcRequest(r)) if to == "carol" && r.version == 1)
    );
    call.abort();

    // With version 2 turned off, bob gets version 1 too.
    let s = rpc_with(false);
    s.shared.roster().remote = vec![remote("bob", 2)];
    let err = perform(&s, PerformRpc::new("bob", "m", big))
        .await
        .unwrap_err();
    assert_eq!(
        err.built_in_code(),
        Some(RpcErrorCode::RequestPayloadTooLarge)
    );
}

#[test]
fn server_version_gate() {
    assert!(server_supports_rpc("1.8.0"));
    assert!(server_supports_rpc("1.9.0"));
    assert!(server_supports_rpc("2.0.1-rc1"));
    assert!(!server_supports_rpc("1.7.9"));
    assert!(!server_supports_rpc("0.15.0"));
    assert!(server_supports_rpc("dev"));
}

/// A room that answers only `bot`, its assistant, with a version 2 cap of `cap` bytes;
/// its one method counts the calls it runs.
fn guarded(cap: usize) -> (Arc<Rpc>, Arc<std::sync::atomic::AtomicUsize>) {
    let opts = crate::RoomOptions {
        rpc_callers: RpcCallers::Assistant,
        rpc_max_v2_payload: cap,
        ..crate::RoomOptions::default()
    };
    let s = Arc::new(Rpc::new(opts.rpc_settings(), Shared::for_tests()));
    s.shared.roster().remote = vec![remote("bot", 2), remote("mallory", 2)];
    s.shared.roster().assistant = Some(remote("bot", 2));
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = runs.clone();
    s.register(
        "outpost.list_tools".into(),
        handler(move |inv: RpcInvocation| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move { Ok(format!("{} bytes", inv.payload.len())) }
        }),
    );
    (s, runs)
}

/// Feeds a whole request stream from `from` (stream `stream`, request `id`) calling
/// `outpost.list_tools` with `content`.
fn list_tools_stream(
    s: &Arc<Rpc>,
    rx: &mut Receivers,
    from: &str,
    stream: &str,
    id: &str,
    content: &[u8],
) {
    let h = stream_header(
        stream,
        REQUEST_TOPIC,
        &v2_request(id, "outpost.list_tools"),
        true,
    );
    feed(s, rx, from, h, content, "");
}

/// Issue 30, finding 1: a participant other than the assistant opens a request stream
/// and keeps writing. It is refused at the header: no slot, nothing buffered, no handler,
/// an answer at once (before the stream ends), and the refusal is reported.
#[tokio::test]
async fn a_caller_that_may_not_call_is_refused_at_the_header_and_nothing_is_read() {
    let (s, runs) = guarded(DEFAULT_MAX_V2_PAYLOAD_BYTES);
    let mut rx = receivers();
    let h = stream_header(
        "M",
        REQUEST_TOPIC,
        &v2_request("m1", "outpost.list_tools"),
        true,
    );
    let refused = on_stream_header(&s, &mut rx, "mallory", false, h, Instant::now());
    assert_eq!(
        refused,
        Some(Refused {
            caller: "mallory".into(),
            method: "outpost.list_tools".into()
        })
    );
    for i in 0..200u64 {
        rx.on_chunk(
            "mallory",
            data_stream::Chunk {
                stream_id: "M".into(),
                chunk_index: i,
                content: vec![b'x'; 15_000],
                ..Default::default()
            },
            Instant::now(),
        );
    }
    assert_eq!(rx.open_count(), 0, "no slot, so nothing is buffered");
    let out = sent(&s);
    assert!(
        matches!(&out[0], (to, data_packet::Value::RpcAck(a)) if to == "mallory" && a.request_id == "m1"),
        "{out:?}"
    );
    assert_eq!(error_code(&out[1].1), Some(1500), "{out:?}");
    // Version 1 packets too; the one method name is cut for the report.
    let long = "m".repeat(10_000);
    let refused = on_request(&s, "mallory", request("m2", &long, "{}")).unwrap();
    assert_eq!(refused.method.len(), MAX_REFUSED_METHOD_BYTES);
    assert_eq!(sent(&s).len(), 2);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);

    // The assistant's calls are served, in either version.
    assert_eq!(
        on_request(&s, "bot", request("b1", "outpost.list_tools", "{}")),
        None
    );
    list_tools_stream(&s, &mut rx, "bot", "B", "b2", b"{}");
    let _ = sent_n(&s, 5).await;
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(rx.open_count(), 0);
}

/// Issue 30, finding 13: a flood of refused calls gets a burst of answers, then silence;
/// every refusal is still reported, and each caller has its own budget.
#[tokio::test]
async fn refusal_answers_are_rate_limited_per_caller() {
    let (s, _) = guarded(DEFAULT_MAX_V2_PAYLOAD_BYTES);
    s.shared.roster().remote.push(remote("carol", 0));
    let mut reported = 0;
    for i in 0..1000 {
        reported +=
            usize::from(on_request(&s, "mallory", request(&format!("r{i}"), "x", "")).is_some());
    }
    assert_eq!(reported, 1000);
    let answered = sent(&s);
    assert_eq!(
        answered.len(),
        2 * REFUSAL_BURST as usize,
        "ack + error each"
    );
    assert!(on_request(&s, "carol", request("c", "x", "")).is_some());
    assert_eq!(sent(&s).len(), 2, "carol's budget is her own");
    // The budget refills with time.
    let later = Instant::now() + Duration::from_secs(1);
    assert!(s.answer_refusal("mallory", later));
}

/// Issue 30, finding 1: a version 2 payload is capped, at the header when it announces
/// its length and while it is read when it does not.
#[tokio::test]
async fn v2_payloads_are_capped_at_the_header_and_while_reading() {
    let (s, runs) = guarded(1_000);
    let mut rx = receivers();
    let mut h = stream_header(
        "A",
        REQUEST_TOPIC,
        &v2_request("big", "outpost.list_tools"),
        true,
    );
    h.total_length = Some(1_001);
    on_stream_header(&s, &mut rx, "bot", true, h, Instant::now());
    assert_eq!(rx.open_count(), 0);
    let out = sent(&s);
    assert_eq!(error_code(&out[1].1), Some(1402), "{out:?}");
    // Unannounced: read up to the cap, then refused with the same code.
    list_tools_stream(&s, &mut rx, "bot", "B", "sneaky", &[b'x'; 1_001]);
    let out = sent_n(&s, 2).await;
    assert_eq!(error_code(&out[1].1), Some(1402), "{out:?}");
    assert_eq!(rx.open_count(), 0);
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);
    // Exactly the cap is fine.
    list_tools_stream(&s, &mut rx, "bot", "C", "fits", &[b'x'; 1_000]);
    let _ = sent_n(&s, 4).await;
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);

    // The response to our own call is capped the same way.
    let s2 = s.clone();
    let call = tokio::spawn(async move { perform(&s2, PerformRpc::new("bot", "m", "p")).await });
    let out = sent_n(&s, 3).await;
    let id = sent_stream(&out).2[ATTR_REQUEST_ID].clone();
    feed(
        &s,
        &mut rx,
        "bot",
        stream_header("R", RESPONSE_TOPIC, &[(ATTR_REQUEST_ID, &id)], true),
        &[b'y'; 5_000],
        "",
    );
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(
        err.built_in_code(),
        Some(RpcErrorCode::ResponsePayloadTooLarge)
    );
}

/// Issue 30, finding 2: four callers holding sixteen requests each do not lock the
/// assistant out; a caller over its own limit, or a fifth one once the others hold the
/// room-wide limit, is refused.
#[tokio::test]
async fn other_callers_cannot_lock_the_assistant_out() {
    let s = shared_v2();
    s.shared.roster().assistant = Some(remote("bot", 2));
    s.register(
        "hold".into(),
        handler(|_inv: RpcInvocation| async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(String::new())
        }),
    );
    s.register(
        "tools".into(),
        handler(|_inv: RpcInvocation| async move { Ok("the tools".into()) }),
    );
    for caller in ["c1", "c2", "c3", "c4"] {
        for i in 0..MAX_RUNNING_PER_CALLER + 1 {
            on_request(&s, caller, request(&format!("{caller}-{i}"), "hold", ""));
        }
    }
    on_request(&s, "c5", request("c5-0", "hold", ""));
    let out = sent(&s);
    let refused: Vec<&data_packet::Value> = out
        .iter()
        .map(|(_, v)| v)
        .filter(|v| error_code(v).is_some())
        .collect();
    assert_eq!(
        refused.len(),
        5,
        "one over each caller's limit, and c5: {out:?}"
    );
    on_request(&s, "bot", request("b", "tools", ""));
    let out = sent_n(&s, 2).await;
    assert!(
        matches!(&out[1].1, data_packet::Value::RpcResponse(RpcResponse {
            value: Some(rpc_response::Value::Payload(p)), .. }) if p == "the tools"),
        "{out:?}"
    );
    s.close();
}
