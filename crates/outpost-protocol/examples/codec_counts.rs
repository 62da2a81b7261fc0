//! Runs one codec contender in a loop, for instruction counting under callgrind:
//! `valgrind --tool=callgrind target/release/examples/codec_counts <contender> <vector> <n>`.
//! Used by scripts/bench-protocol-counts.sh; instruction counts do not depend on machine load.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

use std::hint::black_box;
use std::path::Path;

use outpost_protocol::{Message, ToolUseRequest, ToolUseResult, decode, encode};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (contender, vector, n) = (&args[1], &args[2], args[3].parse::<usize>().unwrap());
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/{vector}.msgpack")),
    )
    .unwrap();
    let msg = decode(&bytes).unwrap();
    match &msg {
        Message::ToolUseRequest(r) => run::<ToolUseRequest>(contender, &bytes, &msg, r, n),
        Message::ToolUseResult(r) => run::<ToolUseResult>(contender, &bytes, &msg, r, n),
        _ => panic!("only requests and results"),
    }
}

fn run<T: serde::Serialize + serde::de::DeserializeOwned>(
    contender: &str,
    bytes: &[u8],
    msg: &Message,
    body: &T,
    n: usize,
) {
    let json = serde_json::to_vec(body).unwrap();
    for _ in 0..n {
        match contender {
            "decode-outpost" => drop(black_box(decode(black_box(bytes)).unwrap())),
            "decode-rmp" => drop(black_box(
                rmp_serde::from_slice::<T>(black_box(bytes)).unwrap(),
            )),
            "decode-json" => drop(black_box(
                serde_json::from_slice::<T>(black_box(&json)).unwrap(),
            )),
            "encode-outpost" => drop(black_box(encode(black_box(msg)).unwrap())),
            "encode-rmp" => drop(black_box(rmp_serde::to_vec_named(black_box(body)).unwrap())),
            "encode-json" => drop(black_box(serde_json::to_vec(black_box(body)).unwrap())),
            other => panic!("unknown contender {other}"),
        }
    }
}
