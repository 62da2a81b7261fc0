//! The calculator through the dispatcher, as an assistant reaches it: it runs without
//! asking, so whatever an expression can make it do must be bounded (issue 17, finding 1).
//! One test per file keeps the peak-memory reading about this test alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use outpost_policy::Policy;
use serde_json::json;

/// The process's peak resident memory in KiB (Linux), or `None` elsewhere.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[tokio::test]
async fn the_doubling_attack_gets_a_quick_error_and_ordinary_sums_still_work() {
    let mut h = Harness::new(|_| Policy::default());

    // Warm up (the dispatcher's threads, the first evaluation) before the memory reading.
    h.send("w", "calculator", json!({"expression": "1 + 1"}));
    assert_eq!(field(&h.result("w").await, "answer"), &json!(2));
    let before = peak_rss_kib();

    // Issue 17's expression: 30 doublings of an 8-byte string would be 8 GiB.
    let mut attack = String::from("a=\"aaaaaaaa\";");
    for _ in 0..30 {
        attack.push_str(" a=a+a;");
    }
    attack.push_str(" len(a)");
    let started = Instant::now();
    h.send("r1", "calculator", json!({"expression": attack}));
    let r = h.result("r1").await;
    let took = started.elapsed();
    assert_eq!(code(&r), "invalid_parameters", "{r:?}");
    assert!(msg(&r).contains("not supported"), "{}", msg(&r));
    assert!(took < Duration::from_secs(2), "took {took:?}");

    // The same growth without variables or statements, and the other growers.
    let big = format!("\"{}\"", "a".repeat(900));
    for (i, e) in [
        "a = 1".to_owned(),
        "x * 2".to_owned(),
        "1; 2".to_owned(),
        format!(
            "str::to_uppercase(str::to_uppercase(str::to_uppercase(str::to_uppercase({big}))))"
        ),
        format!("str::from(str::from(str::from({big})))"),
        "str::regex_replace(\"a\", \"\", \"aaaa\")".to_owned(),
    ]
    .iter()
    .enumerate()
    {
        let id = format!("g{i}");
        h.send(&id, "calculator", json!({"expression": e}));
        let r = h.result(&id).await;
        assert_eq!(code(&r), "invalid_parameters", "{e}: {r:?}");
        assert!(msg(&r).contains("expression"), "{e}: {}", msg(&r));
    }

    if let (Some(before), Some(after)) = (before, peak_rss_kib()) {
        // The unfixed calculator passed 2 GiB on the first expression alone.
        assert!(
            after.saturating_sub(before) < 64 * 1024,
            "peak memory grew from {before} KiB to {after} KiB"
        );
    }

    for (i, (e, want)) in [
        ("2+2", json!(4)),
        ("math::sqrt(16) * 3", json!(12.0)),
        ("3 > 2 && 2 >= 2", json!(true)),
        ("min(4, 2, 8) + max(1, 5)", json!(7)),
        ("\"out\" + \"post\"", json!("outpost")),
        ("len(\"hello\")", json!(5)),
        ("(1, 2.5, \"x\")", json!([1, 2.5, "x"])),
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("ok{i}");
        h.send(&id, "calculator", json!({"expression": e}));
        let r = h.result(&id).await;
        assert!(r.success, "{e}: {r:?}");
        assert_eq!(field(&r, "answer"), &want, "{e}");
    }
}
