//! Seed 000 client semantics of the dispatcher: one answer per request, duplicates,
//! cancels, timeouts (consent time not counted), the consent timeout, progress messages,
//! decisions and their scopes, and the typed lifecycle stream (who decided).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use outpost_policy::{
    ConsentEvent, Decision, PolicyContext, PolicyStore, Rule, WithdrawReason, read_policy,
};
use outpost_protocol::{Execution, ProgressState, ToolUseCancel};
use outpost_tools::{AuditOutcome, DispatchEvent, Handled};
use serde_json::json;

fn probe_harness() -> (Harness, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let (registry, ran) = probe_registry();
    (Harness::with_registry(probe_policy, registry), ran)
}

fn cancel(id: &str) -> ToolUseCancel {
    ToolUseCancel {
        id: id.into(),
        reason: Some("user stopped".into()),
    }
}

#[tokio::test]
async fn a_duplicate_in_flight_is_ignored_and_after_completion_the_result_is_resent() {
    let (mut h, ran) = probe_harness();
    let params = json!({"tag": "d1", "sleepMs": 100});
    assert_eq!(h.send("d1", "probe_free", params.clone()), Handled::Started);
    assert_eq!(
        h.send("d1", "probe_free", params.clone()),
        Handled::DuplicateIgnored
    );
    let first = h.result("d1").await;
    assert!(first.success);
    assert_eq!(
        h.send("d1", "probe_free", params.clone()),
        Handled::DuplicateResent
    );
    // Even a different tool under the same id is not run again.
    assert_eq!(
        h.send("d1", "calculator", json!({"expression": "1"})),
        Handled::DuplicateResent
    );
    h.drain(Duration::from_millis(150)).await;
    let results = h.results_for("d1");
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(|r| **r == first));
    assert_eq!(*ran.lock().unwrap(), ["d1"]);
}

#[tokio::test]
async fn cancel_while_running_answers_cancelled_once() {
    let (mut h, _ran) = probe_harness();
    h.send("c1", "probe_free", json!({"tag": "c1", "sleepMs": 5000}));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    assert!(h.dispatcher.handle_cancel(&cancel("c1")));
    let r = h.result("c1").await;
    assert_eq!(code(&r), "cancelled");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        !h.dispatcher.handle_cancel(&cancel("c1")),
        "a finished id is not cancelled again"
    );
    assert!(!h.dispatcher.handle_cancel(&cancel("never-seen")));
    h.drain(Duration::from_millis(100)).await;
    assert_eq!(h.results_for("c1").len(), 1);
    assert_eq!(h.dispatcher.in_flight(), 0);
}

#[tokio::test]
async fn cancel_while_awaiting_consent_withdraws_the_question_and_answers_once() {
    let (mut h, ran) = probe_harness();
    let mut ui = h.dispatcher.broker().attach();
    h.send("c2", "probe", json!({"tag": "c2"}));
    let q = asked(&mut ui).await;
    h.dispatcher.handle_cancel(&cancel("c2"));
    let r = h.result("c2").await;
    assert_eq!(code(&r), "cancelled");
    match tokio::time::timeout(Duration::from_secs(5), ui.next())
        .await
        .unwrap()
    {
        Some(ConsentEvent::Withdrawn { consent_id, reason }) => {
            assert_eq!(consent_id, q.consent_id);
            assert_eq!(reason, WithdrawReason::Cancelled);
        }
        other => panic!("{other:?}"),
    }
    assert!(ui.answer(&q.consent_id, Decision::AllowOnce).is_err());
    h.drain(Duration::from_millis(100)).await;
    assert_eq!(h.results_for("c2").len(), 1);
    assert!(ran.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_tool_past_its_deadline_is_cancelled_with_the_seed_text() {
    let (mut h, ran) = probe_harness();
    h.send_full(
        "c1",
        "t1",
        "probe_free",
        Execution::Client,
        json!({"tag": "t1", "sleepMs": 10_000}),
        Some(100),
    );
    let r = h.result("t1").await;
    assert_eq!(code(&r), "timeout");
    assert_eq!(msg(&r), "Tool execution exceeded timeout of 100ms");
    assert_eq!(*ran.lock().unwrap(), ["t1"]);
}

#[tokio::test]
async fn waiting_for_consent_does_not_count_against_the_timeout() {
    let (mut h, _ran) = probe_harness();
    let mut ui = h.dispatcher.broker().attach();
    h.send_full(
        "c1",
        "t2",
        "probe",
        Execution::Client,
        json!({"tag": "t2", "sleepMs": 50}),
        Some(200),
    );
    let q = asked(&mut ui).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
    let r = h.result("t2").await;
    assert!(r.success, "consent time was counted: {r:?}");
    // Progress: awaiting consent, then running, then the result.
    let order: Vec<&str> = h
        .events
        .iter()
        .filter_map(|e| match e {
            DispatchEvent::Progress(p) if p.id == "t2" => Some(match p.state {
                ProgressState::AwaitingConsent => "awaiting",
                ProgressState::Running => "running",
            }),
            DispatchEvent::Result(r) if r.id == "t2" => Some("result"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["awaiting", "running", "result"]);
    // The run itself still has its deadline after consent.
    h.send_full(
        "c1",
        "t3",
        "probe",
        Execution::Client,
        json!({"tag": "t3", "sleepMs": 5000}),
        Some(100),
    );
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::AllowOnce).unwrap();
    assert_eq!(code(&h.result("t3").await), "timeout");
}

#[tokio::test]
async fn an_unanswered_question_ends_in_denial_after_the_consent_timeout() {
    let (registry, ran) = probe_registry();
    let mut h = Harness::with_registry(
        |home| {
            let mut p = probe_policy(home);
            p.consent_timeout_secs = 1;
            p
        },
        registry,
    );
    let mut ui = h.dispatcher.broker().attach();
    let started = Instant::now();
    h.send_full(
        "c1",
        "ct",
        "probe",
        Execution::Client,
        json!({"tag": "ct"}),
        Some(100),
    );
    let _q = asked(&mut ui).await;
    let r = h.result("ct").await;
    assert!(started.elapsed() >= Duration::from_millis(950));
    assert_eq!(
        msg(&r),
        "Permission denied by the consent timeout: nobody answered within 1 s"
    );
    assert!(matches!(
        tokio::time::timeout(Duration::from_secs(2), ui.next())
            .await
            .unwrap(),
        Some(ConsentEvent::Withdrawn {
            reason: WithdrawReason::TimedOut,
            ..
        })
    ));
    assert!(ran.lock().unwrap().is_empty());
}

#[tokio::test]
async fn execution_errors_carry_partial_results() {
    let (mut h, _ran) = probe_harness();
    h.send("f1", "probe_free", json!({"tag": "f1", "fail": true}));
    let r = h.result("f1").await;
    assert_eq!(code(&r), "execution_error");
    assert_eq!(msg(&r), "probe f1 failed");
    assert_eq!(r.result.as_ref().unwrap()["done"], json!(1));
}

#[tokio::test]
async fn allow_for_this_conversation_covers_the_folder_in_that_conversation_only() {
    let mut h = Harness::new(docs_policy);
    let a = h.write("notes/a.txt", "A");
    let b = h.write("notes/b.txt", "B");
    let mut ui = h.dispatcher.broker().attach();
    h.send_full(
        "conv-1",
        "g1",
        "read_local_file",
        Execution::Client,
        json!({"filePath": a}),
        None,
    );
    let q = asked(&mut ui).await;
    assert_eq!(q.folder.as_deref(), Some(h.path("notes").as_path()));
    assert_eq!(
        q.parameters["filePath"],
        json!(a),
        "the prompt shows the arguments"
    );
    ui.answer(&q.consent_id, Decision::AllowForConversation)
        .unwrap();
    assert!(h.result("g1").await.success);
    // Same conversation, same folder: no question.
    h.send_full(
        "conv-1",
        "g2",
        "read_local_file",
        Execution::Client,
        json!({"filePath": b}),
        None,
    );
    assert!(h.result("g2").await.success);
    // Another conversation asks again.
    h.send_full(
        "conv-2",
        "g3",
        "read_local_file",
        Execution::Client,
        json!({"filePath": b}),
        None,
    );
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::DenyOnce).unwrap();
    assert_eq!(code(&h.result("g3").await), "permission_denied");
    // Ending the conversation forgets the grant.
    h.dispatcher.end_conversation("conv-1");
    h.send_full(
        "conv-1",
        "g4",
        "read_local_file",
        Execution::Client,
        json!({"filePath": b}),
        None,
    );
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::DenyOnce).unwrap();
    assert_eq!(code(&h.result("g4").await), "permission_denied");
}

#[tokio::test]
async fn always_allow_and_always_deny_are_written_to_the_policy_file_and_remembered() {
    let (dir, home) = home_dir();
    let cfg = home.join(".config/outpost");
    let file = cfg.join("policy.toml");
    let ctx = PolicyContext::new(&home, vec![cfg.clone()]);
    let store = PolicyStore::open(&file, ctx).unwrap();
    let mut h = Harness::with_store(dir, home, store, outpost_tools::builtin_registry().unwrap());
    let a = h.write("notes/a.txt", "A");
    let x = h.write("private/x.txt", "X");
    let mut ui = h.dispatcher.broker().attach();

    h.send("a1", "read_local_file", json!({"filePath": a}));
    let q = asked(&mut ui).await;
    assert!(q.options.contains(&Decision::AlwaysAllow));
    ui.answer(&q.consent_id, Decision::AlwaysAllow).unwrap();
    assert!(h.result("a1").await.success);
    h.send("a2", "read_local_file", json!({"filePath": a}));
    assert!(
        h.result("a2").await.success,
        "always allow must be remembered"
    );

    h.send("x1", "read_local_file", json!({"filePath": x}));
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::AlwaysDeny).unwrap();
    assert_eq!(code(&h.result("x1").await), "permission_denied");
    h.send("x2", "read_local_file", json!({"filePath": x}));
    let r = h.result("x2").await;
    assert!(
        msg(&r).starts_with("Permission denied by your policy"),
        "{r:?}"
    );

    let written = read_policy(&file).unwrap();
    assert_eq!(written.folders.len(), 2, "{written:?}");
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .starts_with("# Outpost tool permissions")
    );
    // Outpost's own config directory is protected.
    h.send("p1", "read_local_file", json!({"filePath": file}));
    let r = h.result("p1").await;
    assert!(msg(&r).contains("Outpost's own settings"), "{r:?}");
    // A per-tool rule edited by hand applies after reload.
    let mut p = written.clone();
    p.tools.insert("calculator".into(), Rule::Deny);
    std::fs::write(&file, toml::to_string(&p).unwrap()).unwrap();
    h.dispatcher.policy().reload().unwrap();
    h.send("k1", "calculator", json!({"expression": "1+1"}));
    assert_eq!(code(&h.result("k1").await), "permission_denied");
}

/// What the stream said about `id`, in order: decided (with who and the user's answer),
/// started, result.
fn lifecycle(h: &Harness, id: &str) -> Vec<String> {
    h.events
        .iter()
        .filter_map(|e| match e {
            DispatchEvent::Decided {
                request_id,
                outcome,
                by,
                decision,
                ..
            } if request_id == id => Some(format!(
                "{}:{}{}",
                match outcome {
                    AuditOutcome::Allowed => "allowed",
                    AuditOutcome::Denied => "denied",
                },
                by.as_str(),
                decision
                    .map(|d| format!(":{}", d.as_str()))
                    .unwrap_or_default()
            )),
            DispatchEvent::Started { request_id } if request_id == id => Some("started".into()),
            DispatchEvent::Progress(p) if p.id == id => Some(p.state.as_str().to_owned()),
            DispatchEvent::Result(r) if r.id == id => Some(format!(
                "result:{}",
                r.error_code.as_ref().map_or("ok", |c| c.as_str())
            )),
            DispatchEvent::PolicyWriteFailed { request_id, .. } if request_id == id => {
                Some("policy_write_failed".into())
            }
            _ => None,
        })
        .collect()
}

/// One ordered stream says who decided each call, truthfully: the policy, the secrets
/// list, the user (with the answer), an earlier grant, the consent timeout, or the
/// absence of any consent prompt — never "always deny by the policy" for a timeout.
#[tokio::test]
async fn the_stream_says_who_decided_each_call() {
    let (registry, _ran) = probe_registry();
    let mut h = Harness::with_registry(
        |home| {
            let mut p = probe_policy(home);
            p.consent_timeout_secs = 1;
            p
        },
        registry,
    );
    let doc = h.write("docs/a.txt", "A");
    let key = h.write(".ssh/id_ed25519", "secret");
    let note = h.write("notes/n.txt", "N");

    // No consent UI attached yet: "ask" is denied by the lack of one.
    h.send("n1", "probe", json!({"tag": "n1"}));
    h.result("n1").await;
    assert_eq!(
        lifecycle(&h, "n1"),
        [
            "awaiting_consent",
            "denied:no_consent_ui",
            "result:permission_denied"
        ]
    );

    h.send("p1", "read_local_file", json!({"filePath": doc}));
    h.result("p1").await;
    assert_eq!(
        lifecycle(&h, "p1"),
        ["allowed:policy", "started", "result:ok"]
    );

    h.send("s1", "read_local_file", json!({"filePath": key}));
    h.result("s1").await;
    assert_eq!(
        lifecycle(&h, "s1"),
        ["denied:secrets_list", "result:permission_denied"]
    );

    let mut ui = h.dispatcher.broker().attach();
    h.send("u1", "read_local_file", json!({"filePath": note}));
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::AllowForConversation)
        .unwrap();
    h.result("u1").await;
    assert_eq!(
        lifecycle(&h, "u1"),
        [
            "awaiting_consent",
            "allowed:user:allow_for_conversation",
            "running",
            "started",
            "result:ok"
        ]
    );
    h.send("g1", "read_local_file", json!({"filePath": note}));
    h.result("g1").await;
    assert_eq!(
        lifecycle(&h, "g1"),
        ["allowed:conversation_grant", "started", "result:ok"]
    );

    h.send("d1", "probe", json!({"tag": "d1"}));
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::DenyOnce).unwrap();
    h.result("d1").await;
    assert_eq!(
        lifecycle(&h, "d1"),
        [
            "awaiting_consent",
            "denied:user:deny_once",
            "result:permission_denied"
        ]
    );

    h.send("t1", "probe", json!({"tag": "t1"}));
    let _q = asked(&mut ui).await;
    h.result("t1").await;
    assert_eq!(
        lifecycle(&h, "t1"),
        [
            "awaiting_consent",
            "denied:consent_timeout",
            "result:permission_denied"
        ]
    );
}

/// An "always allow" that cannot be saved still applies to the call, and the stream says
/// so before the call's decision, so the user can be told.
#[tokio::test]
async fn a_failed_always_answer_is_reported() {
    let (dir, home) = home_dir();
    let cfg = home.join(".config/outpost");
    let file = cfg.join("policy.toml");
    let ctx = PolicyContext::new(&home, vec![cfg.clone()]);
    let store = PolicyStore::open(&file, ctx).unwrap();
    let mut h = Harness::with_store(dir, home, store, outpost_tools::builtin_registry().unwrap());
    let a = h.write("notes/a.txt", "A");
    // The policy file's folder becomes a file: the rewrite cannot succeed.
    std::fs::remove_dir_all(&cfg).unwrap();
    std::fs::write(&cfg, "not a folder").unwrap();
    let mut ui = h.dispatcher.broker().attach();
    h.send("a1", "read_local_file", json!({"filePath": a}));
    let q = asked(&mut ui).await;
    ui.answer(&q.consent_id, Decision::AlwaysAllow).unwrap();
    assert!(h.result("a1").await.success);
    assert_eq!(
        lifecycle(&h, "a1"),
        [
            "awaiting_consent",
            "policy_write_failed",
            "allowed:user:always_allow",
            "running",
            "started",
            "result:ok"
        ]
    );
}

/// Finished results are held for duplicates only within a byte budget: many large results
/// do not pile up, a recent duplicate still gets the same result, and an old one is told
/// it was answered (and is not run again).
#[tokio::test]
async fn held_results_stay_within_their_budget() {
    let (mut h, _ran) = probe_harness();
    let big = h.write("docs/big.txt", "z".repeat(1024 * 1024));
    for i in 0..40 {
        let id = format!("b{i}");
        h.send(
            &id,
            "read_local_file",
            json!({"filePath": big, "maxBytes": 2_000_000}),
        );
        assert!(h.result(&id).await.success);
    }
    assert!(
        h.dispatcher.held_result_bytes() <= outpost_tools::HELD_RESULT_BYTES,
        "{} bytes held",
        h.dispatcher.held_result_bytes()
    );
    let recent = h.results_for("b39")[0].clone();
    assert_eq!(
        h.send("b39", "read_local_file", json!({"filePath": big})),
        Handled::DuplicateResent
    );
    h.drain(Duration::from_millis(100)).await;
    assert_eq!(h.results_for("b39").last().unwrap(), &&recent);
    assert_eq!(
        h.send("b0", "read_local_file", json!({"filePath": big})),
        Handled::DuplicateResent
    );
    h.drain(Duration::from_millis(100)).await;
    let again = h.results_for("b0");
    assert_eq!(again.len(), 2);
    assert_eq!(code(again[1]), "execution_error");
    assert!(msg(again[1]).contains("answered already"), "{:?}", again[1]);
}

#[tokio::test]
async fn a_thousand_concurrent_requests_are_all_answered() {
    let (registry, _ran) = probe_registry();
    let mut h = Harness::with_registry(probe_policy, registry);
    let p = h.write("docs/a.txt", "A".repeat(4096));
    for i in 0..1000 {
        let id = format!("m{i}");
        if i % 2 == 0 {
            h.send(&id, "read_local_file", json!({"filePath": p}));
        } else {
            h.send(&id, "probe_free", json!({"tag": id, "sleepMs": 1}));
        }
    }
    let mut seen = std::collections::HashSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while seen.len() < 1000 {
        let ev = tokio::time::timeout_at(deadline, h.rx.recv())
            .await
            .expect("not all answered")
            .unwrap();
        if let DispatchEvent::Result(r) = ev {
            assert!(r.success, "{r:?}");
            assert!(seen.insert(r.id.clone()), "answered twice: {}", r.id);
        }
    }
    assert_eq!(h.dispatcher.in_flight(), 0);
}

#[tokio::test]
async fn extra_tools_join_the_catalogue_a_clash_with_a_fixed_tool_is_left_out_and_they_can_go() {
    let mut h = Harness::new(probe_policy);
    let ran = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut extra = outpost_tools::Registry::new();
    // An extra tool named like a built-in must not shadow it.
    extra
        .register(Probe {
            name: "calculator",
            ran: ran.clone(),
        })
        .unwrap();
    extra
        .register(Probe {
            name: "probe_free",
            ran: ran.clone(),
        })
        .unwrap();
    assert_eq!(h.dispatcher.set_extra_tools(extra), vec!["calculator"]);
    let names: Vec<String> = h
        .dispatcher
        .catalogue()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names.iter().filter(|n| *n == "calculator").count(), 1);
    assert_eq!(names.last().map(String::as_str), Some("probe_free"));
    // The built-in calculator still answers.
    h.send("c1", "calculator", json!({"expression": "6*7"}));
    let r = h.result("c1").await;
    assert!(r.success, "{r:?}");
    assert!(ran.lock().unwrap().is_empty());
    // The extra tool runs like any tool.
    h.send("x1", "probe_free", json!({"tag": "extra"}));
    assert!(h.result("x1").await.success);
    assert_eq!(*ran.lock().unwrap(), vec!["extra".to_owned()]);
    // Replaced by an empty set: no longer offered, and unknown.
    assert!(
        h.dispatcher
            .set_extra_tools(outpost_tools::Registry::new())
            .is_empty()
    );
    assert!(
        !h.dispatcher
            .catalogue()
            .iter()
            .any(|t| t.name == "probe_free")
    );
    h.send("x2", "probe_free", json!({"tag": "gone"}));
    assert_eq!(code(&h.result("x2").await), "unknown_tool");
}

#[tokio::test]
async fn a_job_reports_progress_as_running_with_a_detail() {
    struct Stepper;
    impl outpost_tools::Tool for Stepper {
        fn spec(&self) -> outpost_tools::ToolSpec {
            outpost_tools::ToolSpec::new::<ProbeOut, ProbeOut>(
                "stepper",
                "reports progress",
                outpost_policy::ToolHints::default(),
                1000,
            )
        }
        fn prepare(
            &self,
            _params: outpost_protocol::Map,
            _env: &outpost_tools::ToolEnv,
        ) -> outpost_tools::Result<outpost_tools::Prepared> {
            Ok(outpost_tools::Prepared {
                access: outpost_tools::Access::default(),
                job: Box::new(|cx| {
                    cx.progress.report("1/2: half".into());
                    cx.progress.report("2/2: done".into());
                    Ok(outpost_protocol::Map::new())
                }),
            })
        }
    }
    let mut h = Harness::new(probe_policy);
    let mut extra = outpost_tools::Registry::new();
    extra.register(Stepper).unwrap();
    h.dispatcher.set_extra_tools(extra);
    h.send("s1", "stepper", json!({"tag": "x"}));
    assert!(h.result("s1").await.success);
    let details: Vec<String> = h
        .events
        .iter()
        .filter_map(|e| match e {
            DispatchEvent::Progress(p) if p.id == "s1" && p.state == ProgressState::Running => {
                p.detail.clone()
            }
            _ => None,
        })
        .collect();
    assert_eq!(details, ["1/2: half", "2/2: done"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_allowed_outright_that_stops_at_the_deadline_is_answered_timeout_never_cancelled() {
    // The job notices the token at once; the deadline's answer must still win.
    let (mut h, _) = probe_harness();
    for i in 0..20 {
        let id = format!("dl{i}");
        h.send_full(
            "c",
            &id,
            "probe_free",
            Execution::Client,
            json!({"tag": id.clone(), "sleepMs": 5000}),
            Some(30),
        );
        let r = h.result(&id).await;
        assert_eq!(code(&r), "timeout", "{r:?}");
    }
}

/// A tool allowed outright whose preparation takes `prepare_ms` and whose job, ignoring
/// the token, sleeps `job_ms` and then reports progress.
struct Sluggish {
    prepare_ms: u64,
    job_ms: u64,
}

impl outpost_tools::Tool for Sluggish {
    fn spec(&self) -> outpost_tools::ToolSpec {
        outpost_tools::ToolSpec::new::<ProbeOut, ProbeOut>(
            "sluggish",
            "slow to start, slow to stop",
            outpost_policy::ToolHints::default(),
            1000,
        )
    }
    fn prepare(
        &self,
        _params: outpost_protocol::Map,
        _env: &outpost_tools::ToolEnv,
    ) -> outpost_tools::Result<outpost_tools::Prepared> {
        std::thread::sleep(Duration::from_millis(self.prepare_ms));
        let job_ms = self.job_ms;
        Ok(outpost_tools::Prepared {
            access: outpost_tools::Access::default(),
            job: Box::new(move |cx| {
                std::thread::sleep(Duration::from_millis(job_ms));
                cx.progress.report("late".into());
                Ok(outpost_protocol::Map::new())
            }),
        })
    }
}

/// A harness with [`Sluggish`] among its tools.
fn sluggish_harness(prepare_ms: u64, job_ms: u64) -> Harness {
    let h = Harness::new(probe_policy);
    let mut extra = outpost_tools::Registry::new();
    extra.register(Sluggish { prepare_ms, job_ms }).unwrap();
    h.dispatcher.set_extra_tools(extra);
    h
}

/// Calls `sluggish` as `id` with a deadline of `deadline_ms`.
fn send_sluggish(h: &mut Harness, id: &str, deadline_ms: u32) {
    h.send_full(
        "c",
        id,
        "sluggish",
        Execution::Client,
        json!({"tag": "x"}),
        Some(deadline_ms),
    );
}

/// Asserts that `id`'s lifecycle is one of the orders the stream promises: Decided before
/// Started before Progress, all before the one Result, and nothing after it.
fn assert_ordered(h: &Harness, id: &str) {
    let seen = lifecycle(h, id);
    let rank = |e: &str| match e {
        e if e.starts_with("allowed:") || e.starts_with("denied:") => 0,
        "started" => 1,
        "running" | "awaiting_consent" => 2,
        e if e.starts_with("result:") => 3,
        _ => 4,
    };
    let results = seen.iter().filter(|e| e.starts_with("result:")).count();
    assert_eq!(results, 1, "{id}: {seen:?}");
    assert!(
        seen.last().is_some_and(|e| e.starts_with("result:")),
        "{id}: something followed the result: {seen:?}"
    );
    assert!(
        seen.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])),
        "{id}: out of order: {seen:?}"
    );
    assert!(
        !seen.contains(&"started".to_owned()) || seen.iter().any(|e| e.starts_with("allowed:")),
        "{id}: started without being allowed: {seen:?}"
    );
}

/// A call whose deadline passes while the blocking phase still prepares it is answered
/// `timeout`, and its Decided and Started never follow that answer (the job does not run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_answered_by_its_deadline_before_it_started_never_reports_starting() {
    let mut h = sluggish_harness(30, 0);
    for i in 0..10 {
        let id = format!("early{i}");
        send_sluggish(&mut h, &id, 1);
        assert_eq!(code(&h.result(&id).await), "timeout");
    }
    // Long enough for every blocking phase to end and report whatever it would.
    h.drain(Duration::from_millis(200)).await;
    for i in 0..10 {
        let id = format!("early{i}");
        assert_eq!(lifecycle(&h, &id), ["result:timeout"]);
    }
}

/// A job that runs on past its deadline (it ignores the token) reports no progress after
/// the call's `timeout` answer: before, its `running` progress went to the assistant after
/// the result, and reopened the finished call in the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_deadline_reports_nothing_after_the_answer() {
    let mut h = sluggish_harness(0, 60);
    for i in 0..5 {
        let id = format!("late{i}");
        send_sluggish(&mut h, &id, 20);
        assert_eq!(code(&h.result(&id).await), "timeout");
    }
    h.drain(Duration::from_millis(300)).await;
    for i in 0..5 {
        let id = format!("late{i}");
        assert_ordered(&h, &id);
        assert_eq!(
            lifecycle(&h, &id),
            ["allowed:policy", "started", "result:timeout"]
        );
    }
}

/// Many calls with a 1 ms deadline against a tool about that slow: whatever wins each
/// race (the deadline against the blocking phase's Decided and Started, the job's progress
/// against the answer), every call's lifecycle on the one stream is in order and ends with
/// its result. (The Started that came after a `timeout` answer, which session_e2e's 1 ms
/// call hit, had a window of a few instructions: between the deadline's answer and its
/// setting the token; the blocking phase now checks and reports under the lock that the
/// answer takes.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_calls_lifecycle_is_in_order_whatever_wins_the_race() {
    let mut h = sluggish_harness(1, 2);
    let ids: Vec<String> = (0..200).map(|i| format!("race{i}")).collect();
    for id in &ids {
        send_sluggish(&mut h, id, 1);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while ids.iter().any(|id| h.results_for(id).is_empty()) {
        assert!(Instant::now() < deadline, "not every call was answered");
        h.drain(Duration::from_millis(50)).await;
    }
    h.drain(Duration::from_millis(300)).await;
    for id in &ids {
        assert_ordered(&h, id);
    }
}
