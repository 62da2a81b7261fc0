//! `outpost protocol decode|encode` as a user runs them: real process, stdin, exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../outpost-protocol/tests/golden")
        .join(name)
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_outpost"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn encode_json(v: &Value) -> Output {
    run(&["protocol", "encode"], v.to_string().as_bytes())
}

#[test]
fn decode_turns_each_seed_example_into_json() {
    for name in [
        "seed000_request_server",
        "seed000_request_client",
        "seed001_result_success",
        "seed001_result_error",
        "seed001_result_timeout",
    ] {
        let bytes = std::fs::read(golden(&format!("{name}.msgpack"))).unwrap();
        let out = run(&["protocol", "decode"], &bytes);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(golden(&format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(printed, expected, "{name}");
    }
}

#[test]
fn decode_makes_the_default_timeout_explicit() {
    let bytes = std::fs::read(golden("type06_tool_use_request_either_no_timeout.msgpack")).unwrap();
    let out = run(&["protocol", "decode"], &bytes);
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["timeoutMs"], json!(30000));
    let raw = run(&["protocol", "decode", "--raw"], &bytes);
    let printed: Value = serde_json::from_slice(&raw.stdout).unwrap();
    assert!(printed.get("timeoutMs").is_none());
}

fn request_without_execution() -> Value {
    json!({"type": 6, "id": "toolreq_xyz789", "messageId": "msg_a9X8Y",
           "toolName": "read_local_file", "parameters": {"filePath": "/tmp/x"}})
}

#[test]
fn missing_or_bad_execution_exits_2_naming_the_field() {
    // Build the bad MessagePack with the encoder's own output plus a hand edit, so the
    // decoder (not the encoder) is what rejects it.
    let mut good = request_without_execution();
    good["execution"] = json!("client");
    let bytes = encode_json(&good).stdout;
    assert!(!bytes.is_empty());

    // Replace "client" with "maybe!" (same length keeps the MessagePack framing valid).
    let pos = bytes.windows(6).position(|w| w == b"client").unwrap();
    let mut maybe = bytes.clone();
    maybe[pos - 1] = 0xa5; // fixstr of length 5
    maybe.splice(pos..pos + 6, b"maybe".iter().copied());
    let out = run(&["protocol", "decode"], &maybe);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`execution`") && err.contains("maybe"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    // Drop the execution entry: map length -1, remove key and value.
    let key = bytes.windows(9).position(|w| w == b"execution").unwrap() - 1;
    let mut missing = bytes.clone();
    missing.drain(key..pos + 6);
    missing[0] -= 1;
    let out = run(&["protocol", "decode"], &missing);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("missing required field `execution`"), "{err}");
}

#[test]
fn encode_validates_like_decode() {
    let out = encode_json(&request_without_execution());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`execution`"));

    let mut bad = request_without_execution();
    bad["execution"] = json!("maybe");
    let out = encode_json(&bad);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`execution`"));

    let out = run(&["protocol", "encode"], b"{not json");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not JSON"));
}

#[test]
fn encode_then_decode_is_identity_on_a_seed_example() {
    let json_text = std::fs::read_to_string(golden("seed000_request_client.json")).unwrap();
    let out = run(&["protocol", "encode"], json_text.as_bytes());
    assert!(out.status.success());
    assert_eq!(
        out.stdout,
        std::fs::read(golden("seed000_request_client.msgpack")).unwrap()
    );
    let hex = run(&["protocol", "encode", "--hex"], json_text.as_bytes());
    assert!(String::from_utf8_lossy(&hex.stdout).starts_with("87a474797065"));
}

#[test]
fn garbage_and_empty_input_exit_2() {
    for input in [&b""[..], b"\xc1", b"\x81\xa4type\x2a", b"hello world"] {
        let out = run(&["protocol", "decode"], input);
        assert_eq!(out.status.code(), Some(2), "{input:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    }
}
