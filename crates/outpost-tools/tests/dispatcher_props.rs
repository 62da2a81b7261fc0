//! Property test over random streams of requests (client, either, server; allowed, asking
//! and unknown tools), duplicate ids, cancels, short timeouts and consent answers:
//! - every request whose first occurrence was `client` or `either` is answered, once per
//!   time it was received after completion (a duplicate in flight gets nothing, a later
//!   duplicate gets the same result again), and all answers for an id are identical;
//! - `server` requests are never answered and never run;
//! - nothing runs without a permitting decision, and nothing runs twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::*;
use outpost_policy::{ConsentEvent, Decider, Decision};
use outpost_protocol::{Execution, ToolUseCancel, ToolUseResult};
use outpost_tools::{AuditOutcome, DispatchEvent, Handled};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Op {
    Request {
        id: u8,
        tool: u8,
        execution: u8,
        sleep_ms: u64,
        timeout_ms: Option<u32>,
    },
    Cancel {
        id: u8,
    },
    Pause {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..8, 0u8..4, 0u8..6, 0u64..30, prop::option::of(5u32..80)).prop_map(
            |(id, tool, execution, sleep_ms, timeout_ms)| Op::Request { id, tool, execution, sleep_ms, timeout_ms }
        ),
        2 => (0u8..8).prop_map(|id| Op::Cancel { id }),
        2 => (0u64..20).prop_map(|ms| Op::Pause { ms }),
    ]
}

/// How the simulated user answers the n-th question: a decision after a delay, or never
/// (the request is then cancelled or stays until the UI goes away).
fn answer() -> impl Strategy<Value = (Option<Decision>, u64)> {
    (
        prop_oneof![
            3 => Just(Some(Decision::AllowOnce)),
            1 => Just(Some(Decision::AllowForConversation)),
            2 => Just(Some(Decision::DenyOnce)),
            1 => Just(None),
        ],
        0u64..25,
    )
}

const TOOLS: [&str; 4] = ["probe", "probe_free", "web_search", "probe"];

async fn scenario(
    ops: Vec<Op>,
    answers: Vec<(Option<Decision>, u64)>,
) -> Result<(), TestCaseError> {
    let (registry, ran) = probe_registry();
    let mut h = Harness::with_registry(probe_policy, registry);
    let mut ui = h.dispatcher.broker().attach();
    let broker = h.dispatcher.broker().clone();
    let ui_task = tokio::spawn(async move {
        let mut n = 0usize;
        let mut given = Vec::new();
        while let Some(ev) = ui.next().await {
            if let ConsentEvent::Asked(q) = ev {
                let (decision, delay) = answers
                    .get(n % answers.len().max(1))
                    .copied()
                    .unwrap_or((None, 0));
                n += 1;
                if let Some(d) = decision {
                    let broker = broker.clone();
                    let id = q.request_id.clone();
                    given.push((id, d));
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                        let _ = broker.answer(&q.consent_id, d);
                    });
                }
            }
        }
        given
    });

    let mut first_exec: HashMap<String, Execution> = HashMap::new();
    let mut resent: HashMap<String, usize> = HashMap::new();
    let mut cancelled: HashSet<String> = HashSet::new();
    for op in ops {
        match op {
            Op::Request {
                id,
                tool,
                execution,
                sleep_ms,
                timeout_ms,
            } => {
                let id = format!("p{id}");
                let execution = match execution {
                    0 => Execution::Server,
                    1 | 2 => Execution::Either,
                    _ => Execution::Client,
                };
                let handled = h.send_full(
                    "conv",
                    &id,
                    TOOLS[tool as usize],
                    execution,
                    json!({"tag": id, "sleepMs": sleep_ms}),
                    timeout_ms,
                );
                first_exec.entry(id.clone()).or_insert(execution);
                if handled == Handled::DuplicateResent {
                    *resent.entry(id).or_default() += 1;
                }
            }
            Op::Cancel { id } => {
                let id = format!("p{id}");
                if h.dispatcher.handle_cancel(&ToolUseCancel {
                    id: id.clone(),
                    reason: None,
                }) {
                    cancelled.insert(id);
                }
            }
            Op::Pause { ms } => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
    }
    // Questions never answered stay open until their requests are cancelled: cancel what is
    // still in flight after a grace period, as a server giving up would.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while h.dispatcher.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        for i in 0..8u8 {
            let id = format!("p{i}");
            if h.dispatcher.handle_cancel(&ToolUseCancel {
                id: id.clone(),
                reason: None,
            }) {
                cancelled.insert(id);
            }
        }
    }
    prop_assert_eq!(h.dispatcher.in_flight(), 0, "requests left in flight");
    h.drain(Duration::from_millis(30)).await;
    drop(h.dispatcher.broker().attach());
    let given = ui_task.await.unwrap();

    let mut results: HashMap<String, Vec<ToolUseResult>> = HashMap::new();
    let mut allowed: HashSet<String> = HashSet::new();
    for e in &h.events {
        match e {
            DispatchEvent::Result(r) => results.entry(r.id.clone()).or_default().push(r.clone()),
            DispatchEvent::Decided {
                request_id,
                outcome: AuditOutcome::Allowed,
                ..
            } => {
                allowed.insert(request_id.clone());
            }
            _ => {}
        }
    }
    for (id, exec) in &first_exec {
        let got = results.get(id).map_or(0, Vec::len);
        if *exec == Execution::Server {
            prop_assert_eq!(got, 0, "server request {} was answered", id);
            continue;
        }
        let expected = 1 + resent.get(id).copied().unwrap_or(0);
        prop_assert_eq!(
            got,
            expected,
            "request {} answered {} times, expected {}",
            id,
            got,
            expected
        );
        let rs = &results[id];
        prop_assert!(
            rs.iter().all(|r| r == &rs[0]),
            "different answers for {}",
            id
        );
        if rs[0]
            .error_code
            .as_ref()
            .is_some_and(|c| c.as_str() == "cancelled")
        {
            prop_assert!(cancelled.contains(id), "{} cancelled without a cancel", id);
        }
    }
    let ran = ran.lock().unwrap().clone();
    let unique: HashSet<&String> = ran.iter().collect();
    prop_assert_eq!(unique.len(), ran.len(), "a request ran twice: {:?}", ran);
    for id in &ran {
        prop_assert!(
            allowed.contains(id),
            "{} ran without a permitting decision",
            id
        );
        prop_assert!(
            first_exec.get(id) != Some(&Execution::Server),
            "server request {} ran",
            id
        );
        // The asking tool runs only after the user allowed it (or a conversation grant).
        let asked_tool_allowed_by_user = given.iter().any(|(rid, d)| rid == id && d.allows());
        let by_policy = h.events.iter().any(|e| matches!(e,
            DispatchEvent::Decided { request_id, outcome: AuditOutcome::Allowed, by: Decider::Policy, .. }
                if request_id == id));
        let by_grant = h.events.iter().any(|e| matches!(e,
            DispatchEvent::Decided { request_id, outcome: AuditOutcome::Allowed, by: Decider::ConversationGrant, .. }
                if request_id == id));
        prop_assert!(
            asked_tool_allowed_by_user || by_policy || by_grant,
            "{} ran without permission",
            id
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_client_request_is_answered_once_and_nothing_runs_unpermitted(
        ops in prop::collection::vec(op(), 1..40),
        answers in prop::collection::vec(answer(), 1..8),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(scenario(ops, answers))?;
    }
}
