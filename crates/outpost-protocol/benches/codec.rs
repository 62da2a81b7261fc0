//! Decode+validate and encode of the seeds' ToolUseRequest and ToolUseResult examples, side
//! by side with serde_json on the same structs and with raw rmp-serde (no scan, no
//! validation). `scripts/bench-ratios.py protocol` turns the results into the ratios in
//! docs/BENCHMARKS.md.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use outpost_protocol::{Message, ToolUseRequest, ToolUseResult, decode, encode};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/{name}.msgpack")),
    )
    .unwrap()
}

fn bench_one<T>(c: &mut Criterion, name: &str, unwrap: impl Fn(Message) -> T)
where
    T: Serialize + DeserializeOwned,
{
    let bytes = golden(name);
    let msg = decode(&bytes).unwrap();
    let body = unwrap(msg.clone());
    let json = serde_json::to_vec(&body).unwrap();
    // Sanity: every contender reads back the same value.
    let raw: T = rmp_serde::from_slice(&bytes).unwrap();
    assert_eq!(
        serde_json::to_value(&raw).unwrap(),
        serde_json::to_value(&body).unwrap()
    );

    let mut g = c.benchmark_group(format!("decode/{name}"));
    g.bench_function("outpost", |b| b.iter(|| decode(black_box(&bytes)).unwrap()));
    g.bench_function("rmp_serde_raw", |b| {
        b.iter(|| rmp_serde::from_slice::<T>(black_box(&bytes)).unwrap())
    });
    g.bench_function("serde_json", |b| {
        b.iter(|| serde_json::from_slice::<T>(black_box(&json)).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group(format!("encode/{name}"));
    g.bench_function("outpost", |b| b.iter(|| encode(black_box(&msg)).unwrap()));
    g.bench_function("rmp_serde_raw", |b| {
        b.iter(|| rmp_serde::to_vec_named(black_box(&body)).unwrap())
    });
    g.bench_function("serde_json", |b| {
        b.iter(|| serde_json::to_vec(black_box(&body)).unwrap())
    });
    g.finish();
}

fn request(m: Message) -> ToolUseRequest {
    match m {
        Message::ToolUseRequest(r) => r,
        other => panic!("not a request: {other:?}"),
    }
}

fn result(m: Message) -> ToolUseResult {
    match m {
        Message::ToolUseResult(r) => r,
        other => panic!("not a result: {other:?}"),
    }
}

fn benches(c: &mut Criterion) {
    bench_one(c, "seed000_request_client", request);
    bench_one(c, "seed000_request_server", request);
    bench_one(c, "seed001_result_success", result);
    bench_one(c, "seed001_result_error", result);
}

criterion_group! {
    name = codec;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(codec);
