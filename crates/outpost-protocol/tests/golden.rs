//! Golden vectors: each `golden/NAME.json` is the source of truth for one message, and
//! `golden/NAME.msgpack` is its exact encoding. `UPDATE_GOLDEN=1 cargo test -p
//! outpost-protocol --test golden` rewrites the `.msgpack` files from the JSON.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use outpost_protocol::{MessageType, decode, encode, from_json, to_json};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn vectors() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_vector_round_trips_exactly() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let vectors = vectors();
    assert!(vectors.len() >= 16, "golden vectors are missing");
    for json_path in vectors {
        let name = json_path
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&json_path).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let msg = from_json(&value).unwrap_or_else(|e| panic!("{name}: {e}"));
        let bytes = encode(&msg).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mp_path = json_path.with_extension("msgpack");
        if update {
            std::fs::write(&mp_path, &bytes).unwrap();
        }
        let golden = std::fs::read(&mp_path)
            .unwrap_or_else(|e| panic!("{name}: {e}; run with UPDATE_GOLDEN=1 to create it"));
        assert_eq!(
            bytes, golden,
            "{name}: encoding differs from the golden bytes"
        );
        let decoded = decode(&golden).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded, msg, "{name}: decode(golden) differs from the JSON");
        let printed = serde_json::to_string_pretty(&to_json(&decoded)).unwrap();
        assert_eq!(
            printed,
            text.trim_end(),
            "{name}: JSON form differs (field order or values)"
        );
    }
}

#[test]
fn every_message_type_has_a_vector() {
    let mut covered = BTreeSet::new();
    for path in vectors() {
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        covered.insert(value["type"].as_u64().unwrap());
    }
    for ty in MessageType::all() {
        assert!(
            covered.contains(&u64::from(ty.code())),
            "no golden vector for {ty}"
        );
    }
}

#[test]
fn every_seed_example_is_a_vector() {
    for name in [
        "seed000_request_server",
        "seed000_request_client",
        "seed001_result_success",
        "seed001_result_error",
        "seed001_result_timeout",
    ] {
        assert!(
            golden_dir().join(format!("{name}.msgpack")).exists(),
            "{name}"
        );
    }
}
