//! Malformed and hostile input: every case gives a clear error and nothing panics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use outpost_protocol::{
    DecodeError, MAX_DEPTH, Message, MessageType, ProtocolErrorCode, decode, from_json,
};
use serde_json::{Value, json};

/// A valid client-execution request as JSON, to be broken in one way per test.
fn request() -> Value {
    json!({
        "type": 6,
        "id": "toolreq_xyz789",
        "messageId": "msg_a9X8Y",
        "toolName": "read_local_file",
        "execution": "client",
        "parameters": {"filePath": "/Users/alice/documents/notes.txt"},
        "timeoutMs": 5000
    })
}

/// Encodes arbitrary JSON as MessagePack without any validation, like a buggy peer would.
fn raw(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_raw(&mut out, v);
    out
}

fn write_raw(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => rmp::encode::write_nil(out).unwrap(),
        Value::Bool(b) => rmp::encode::write_bool(out, *b).unwrap(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                rmp::encode::write_uint(out, u).unwrap();
            } else if let Some(i) = n.as_i64() {
                rmp::encode::write_sint(out, i).unwrap();
            } else {
                rmp::encode::write_f64(out, n.as_f64().unwrap()).unwrap();
            }
        }
        Value::String(s) => rmp::encode::write_str(out, s).unwrap(),
        Value::Array(a) => {
            rmp::encode::write_array_len(out, a.len() as u32).unwrap();
            a.iter().for_each(|x| write_raw(out, x));
        }
        Value::Object(m) => {
            rmp::encode::write_map_len(out, m.len() as u32).unwrap();
            for (k, x) in m {
                rmp::encode::write_str(out, k).unwrap();
                write_raw(out, x);
            }
        }
    }
}

fn with(field: &str, value: Value) -> Vec<u8> {
    let mut v = request();
    v[field] = value;
    raw(&v)
}

fn without(field: &str) -> Vec<u8> {
    let mut v = request();
    v.as_object_mut().unwrap().remove(field);
    raw(&v)
}

fn invalid_field(bytes: &[u8]) -> (String, String) {
    match decode(bytes) {
        Err(DecodeError::InvalidField { error, .. }) => (error.field, error.reason),
        other => panic!("expected InvalidField, got {other:?}"),
    }
}

#[test]
fn the_valid_base_decodes() {
    assert!(matches!(
        decode(&raw(&request())),
        Ok(Message::ToolUseRequest(_))
    ));
}

#[test]
fn missing_execution_is_rejected_naming_the_field() {
    let err = decode(&without("execution")).unwrap_err();
    assert_eq!(
        err,
        DecodeError::MissingField {
            ty: MessageType::ToolUseRequest,
            field: "execution".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "ToolUseRequest is missing required field `execution`"
    );
    assert_eq!(err.code(), ProtocolErrorCode::MissingField);
}

#[test]
fn unrecognised_execution_is_rejected_naming_the_field() {
    for bad in [
        json!("maybe"),
        json!("SERVER"),
        json!(""),
        json!(5),
        json!(null),
        json!({}),
    ] {
        let (field, reason) = invalid_field(&with("execution", bad.clone()));
        assert_eq!(field, "execution", "{bad}");
        assert!(!reason.is_empty());
    }
    let (_, reason) = invalid_field(&with("execution", json!("maybe")));
    assert!(
        reason.contains("maybe") && reason.contains("either"),
        "{reason}"
    );
}

#[test]
fn every_required_request_field_is_named_when_missing() {
    for field in ["id", "messageId", "toolName", "execution", "parameters"] {
        match decode(&without(field)) {
            Err(DecodeError::MissingField { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn timeout_defaults_and_bounds() {
    let Ok(Message::ToolUseRequest(req)) = decode(&without("timeoutMs")) else {
        panic!("a request without timeoutMs is valid");
    };
    assert_eq!(req.timeout_ms, None);
    assert_eq!(req.effective_timeout_ms(), 30_000);
    for bad in [
        json!(0),
        json!(-1),
        json!(-5000),
        json!(3_600_001),
        json!(u64::MAX),
    ] {
        let (field, reason) = invalid_field(&with("timeoutMs", bad.clone()));
        assert_eq!(field, "timeoutMs", "{bad}");
        assert!(reason.contains("must be"), "{bad}: {reason}");
    }
    let (field, _) = invalid_field(&with("timeoutMs", json!("5000")));
    assert_eq!(field, "timeoutMs");
    let (field, _) = invalid_field(&with("timeoutMs", json!(1.5)));
    assert_eq!(field, "timeoutMs");
}

#[test]
fn wrong_types_name_the_field() {
    let cases = [
        ("id", json!(42)),
        ("messageId", json!(["x"])),
        ("toolName", json!(null)),
        ("parameters", json!(["filePath"])),
        ("parameters", json!("filePath=/x")),
    ];
    for (field, bad) in cases {
        let (f, _) = invalid_field(&with(field, bad.clone()));
        assert_eq!(f, field, "{bad}");
    }
}

#[test]
fn ids_are_non_empty_and_capped() {
    let (f, r) = invalid_field(&with("id", json!("")));
    assert_eq!((f.as_str(), r.as_str()), ("id", "must not be empty"));
    let (f, r) = invalid_field(&with("messageId", json!("m".repeat(129))));
    assert_eq!(f, "messageId");
    assert!(r.contains("limit is 128"), "{r}");
    let (f, _) = invalid_field(&with("toolName", json!("read\u{0}file")));
    assert_eq!(f, "toolName");
}

#[test]
fn result_field_types_are_checked() {
    let base = json!({"type": 7, "id": "r1", "success": true, "result": {"a": 1}});
    assert!(decode(&raw(&base)).is_ok());
    let mut v = base.clone();
    v["success"] = json!("yes");
    let (f, _) = invalid_field(&raw(&v));
    assert_eq!(f, "success");
    let mut v = base.clone();
    v["result"] = json!("plain text");
    let (f, _) = invalid_field(&raw(&v));
    assert_eq!(f, "result");
    let mut v = base;
    v["result"] = Value::Null;
    let Ok(Message::ToolUseResult(r)) = decode(&raw(&v)) else {
        panic!("nil result is allowed");
    };
    assert_eq!(r.result, None);
}

#[test]
fn unknown_fields_are_ignored_and_unknown_types_reported() {
    let mut v = request();
    v["futureField"] = json!({"nested": [1, 2, 3]});
    assert!(decode(&raw(&v)).is_ok());

    let mut v = request();
    v["type"] = json!(42);
    let err = decode(&raw(&v)).unwrap_err();
    assert_eq!(err, DecodeError::UnknownType(42));
    let reply = err.to_error_message(Some("toolreq_xyz789".into()));
    assert_eq!(reply.code, ProtocolErrorCode::UnknownType);
    assert_eq!(reply.message, "unknown message type 42");
    assert_eq!(reply.message_type, Some(42));
    assert_eq!(
        outpost_protocol::peek_id(&raw(&v)).as_deref(),
        Some("toolreq_xyz789")
    );
}

#[test]
fn truncation_at_every_byte_is_incomplete() {
    let bytes = raw(&request());
    for cut in 0..bytes.len() {
        assert_eq!(
            decode(&bytes[..cut]),
            Err(DecodeError::Incomplete),
            "cut at {cut}"
        );
    }
}

#[test]
fn trailing_bytes_are_rejected() {
    let mut bytes = raw(&request());
    bytes.extend_from_slice(&[0xc0, 0xc0, 0xc0]);
    assert_eq!(decode(&bytes), Err(DecodeError::TrailingBytes(3)));
    // Two messages back to back are not one message.
    let mut two = raw(&request());
    two.extend(raw(&request()));
    assert!(matches!(decode(&two), Err(DecodeError::TrailingBytes(_))));
}

#[test]
fn huge_length_prefixes_fail_fast() {
    // array32, map32, str32 each claiming ~4 billion items right after the `parameters` key.
    for header in [
        [0xddu8, 0xff, 0xff, 0xff, 0xff],
        [0xdf, 0xff, 0xff, 0xff, 0xff],
        [0xdb, 0xff, 0xff, 0xff, 0xff],
    ] {
        let mut bytes = vec![0x82, 0xa4, b't', b'y', b'p', b'e', 0x06, 0xaa];
        bytes.extend_from_slice(b"parameters");
        bytes.extend_from_slice(&header);
        let err = decode(&bytes).unwrap_err();
        assert!(
            matches!(err, DecodeError::Malformed(_) | DecodeError::Incomplete),
            "{err:?}"
        );
    }
}

fn nested(levels: usize) -> Value {
    let mut v = json!("leaf");
    for _ in 0..levels {
        v = Value::Object([("n".to_owned(), v)].into_iter().collect());
    }
    v
}

#[test]
fn nesting_is_capped_at_the_documented_depth() {
    // The message map is level 1 and `parameters` level 2: `nested(n)` reaches level n + 1.
    let ok = with("parameters", nested(MAX_DEPTH - 1));
    assert!(decode(&ok).is_ok(), "{:?}", decode(&ok));
    let deep = with("parameters", nested(MAX_DEPTH));
    assert!(
        matches!(decode(&deep), Err(DecodeError::Malformed(ref m)) if m.contains("deeper than 32")),
        "{:?}",
        decode(&deep)
    );
    // The JSON path and the encoder apply the same limit to values built in memory.
    let mut v = request();
    v["parameters"] = nested(MAX_DEPTH);
    match from_json(&v) {
        Err(DecodeError::InvalidField { error, .. }) => assert_eq!(error.field, "parameters"),
        other => panic!("{other:?}"),
    }
    v["parameters"] = nested(MAX_DEPTH - 1);
    let msg = from_json(&v).unwrap();
    assert_eq!(
        decode(&outpost_protocol::encode(&msg).unwrap()).unwrap(),
        msg
    );
    // Far deeper than the stack could recurse: still a clean error.
    let mut hostile = vec![0x82, 0xa4, b't', b'y', b'p', b'e', 0x06, 0xa1, b'p'];
    hostile.extend(std::iter::repeat_n(0x91u8, 200_000));
    hostile.push(0xc0);
    assert!(matches!(decode(&hostile), Err(DecodeError::Malformed(_))));
}

#[test]
fn invalid_utf8_is_rejected() {
    let mut bytes = raw(&request());
    let pos = bytes.windows(5).position(|w| w == b"alice").unwrap();
    bytes[pos] = 0xff;
    assert!(matches!(decode(&bytes), Err(DecodeError::Malformed(m)) if m.contains("UTF-8")));
    let mut bytes = raw(&request());
    let pos = bytes.windows(8).position(|w| w == b"filePath").unwrap();
    bytes[pos] = 0xc3;
    assert!(matches!(decode(&bytes), Err(DecodeError::Malformed(m)) if m.contains("UTF-8")));
}

#[test]
fn non_maps_and_binary_values_are_rejected() {
    for bytes in [vec![0x90], vec![0xa1, b'x'], vec![0xc0], vec![]] {
        assert!(decode(&bytes).is_err(), "{bytes:?}");
    }
    let mut bytes = vec![
        0x82, 0xa4, b't', b'y', b'p', b'e', 0x06, 0xa1, b'b', 0xc4, 0x02, 1, 2,
    ];
    assert!(matches!(decode(&bytes), Err(DecodeError::Malformed(m)) if m.contains("binary")));
    bytes[9] = 0xd4; // fixext1
    assert!(decode(&bytes).is_err());
}

#[test]
fn oversized_input_is_rejected_before_parsing() {
    let big = vec![0u8; outpost_protocol::MAX_MESSAGE_BYTES + 1];
    assert!(matches!(decode(&big), Err(DecodeError::TooLarge { .. })));
}

#[test]
fn json_input_is_validated_the_same_way() {
    let mut v = request();
    v["execution"] = json!("maybe");
    let err = from_json(&v).unwrap_err();
    assert!(
        matches!(&err, DecodeError::InvalidField { error, .. } if error.field == "execution"),
        "{err}"
    );
    v.as_object_mut().unwrap().remove("execution");
    assert!(
        matches!(from_json(&v), Err(DecodeError::MissingField { field, .. }) if field == "execution")
    );
    assert_eq!(
        from_json(&json!([1])),
        Err(DecodeError::Malformed(
            "a message must be a JSON object".into()
        ))
    );
}

#[test]
fn nested_paths_are_reported() {
    let hello = json!({
        "type": 2, "protocolVersion": 1, "clientName": "Outpost", "clientVersion": "0.1.0",
        "tools": [{"name": "a", "description": "d", "parameters": {}}, {"name": "b", "parameters": {}}]
    });
    match decode(&raw(&hello)) {
        Err(DecodeError::MissingField { field, .. }) => assert_eq!(field, "tools[1].description"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn tools_changed_checks_its_catalogue_like_the_hello() {
    let tool = |name: &str| json!({"name": name, "description": "d", "parameters": {}});
    // Repeated names.
    let dup = json!({"type": 12, "tools": [tool("mcp__a__x"), tool("mcp__a__x")]});
    match decode(&raw(&dup)) {
        Err(DecodeError::InvalidField { error, .. }) => assert_eq!(error.field, "tools[1].name"),
        other => panic!("{other:?}"),
    }
    // A name with a control character.
    let bad = json!({"type": 12, "tools": [tool("mcp__a__\u{7}")]});
    assert!(
        matches!(decode(&raw(&bad)), Err(DecodeError::InvalidField { .. })),
        "a control character in a tool name is refused"
    );
    // `tools` is required; an empty catalogue is a catalogue.
    assert!(matches!(
        decode(&raw(&json!({"type": 12}))),
        Err(DecodeError::MissingField { .. })
    ));
    assert!(decode(&raw(&json!({"type": 12, "tools": []}))).is_ok());
    // It travels from the client only.
    assert_eq!(
        outpost_protocol::MessageType::ToolsChanged.direction(),
        outpost_protocol::Direction::ClientToServer
    );
}

#[test]
fn a_hello_history_needs_a_conversation_known_roles_and_a_bound() {
    let hello = |extra: Value| {
        let mut h = json!({"type": 2, "protocolVersion": 2, "clientName": "Outpost",
                           "clientVersion": "0.1.0"});
        for (k, v) in extra.as_object().unwrap() {
            h[k] = v.clone();
        }
        raw(&h)
    };
    let said = |role: &str| json!({"role": role, "text": "hi"});
    assert!(
        decode(&hello(
            json!({"conversationId": "c1", "history": [said("user"), said("assistant")]})
        ))
        .is_ok()
    );
    // History without the conversation it belongs to.
    let (field, reason) = invalid_field(&hello(json!({"history": [said("user")]})));
    assert_eq!(field, "history", "{reason}");
    // A role the protocol does not name.
    let (field, reason) = invalid_field(&hello(
        json!({"conversationId": "c1", "history": [said("system")]}),
    ));
    assert_eq!(field, "history[0].role", "{reason}");
    // More messages than the limit.
    let many: Vec<Value> = (0..=outpost_protocol::MAX_HISTORY_MESSAGES)
        .map(|_| said("user"))
        .collect();
    let (field, reason) = invalid_field(&hello(json!({"conversationId": "c1", "history": many})));
    assert_eq!(field, "history", "{reason}");
    assert!(reason.contains("1001"), "{reason}");
}

#[test]
fn an_attachment_whose_bytes_do_not_match_its_hash_or_size_is_refused() {
    let good = json!({"type": 13, "id": "a1", "messageId": "m1", "name": "n.txt",
                      "mimeType": "text/plain", "size": 2, "data": "aGk=",
                      "sha256": "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"});
    assert!(decode(&raw(&good)).is_ok());
    let mut bad = good.clone();
    bad["sha256"] = json!("0".repeat(64));
    assert_eq!(invalid_field(&raw(&bad)).0, "sha256");
    let mut bad = good.clone();
    bad["size"] = json!(3);
    assert_eq!(invalid_field(&raw(&bad)).0, "size");
    bad["size"] = json!(9);
    assert_eq!(invalid_field(&raw(&bad)).0, "data");
    let mut bad = good.clone();
    bad["name"] = json!("a/b.txt");
    assert_eq!(invalid_field(&raw(&bad)).0, "name");
    let mut bad = good;
    bad["size"] = json!(outpost_protocol::MAX_ATTACHMENT_BYTES + 1);
    assert_eq!(invalid_field(&raw(&bad)).0, "size");
    // Only the client sends it.
    assert_eq!(
        MessageType::Attachment.direction(),
        outpost_protocol::Direction::ClientToServer
    );
}
