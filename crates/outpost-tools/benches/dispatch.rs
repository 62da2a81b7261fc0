//! Request bytes to result bytes for an auto-allowed 4 KiB read_local_file, side by side
//! with a plain `std::fs::read` of the same file; then the same as percentiles (p50/p99)
//! and 1000 concurrent requests.
//!
//! Run: `cargo bench -p outpost-tools --bench dispatch`
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group};
use outpost_policy::{ConsentBroker, FolderAccess, FolderRule, Policy, PolicyContext, PolicyStore};
use outpost_protocol::{Execution, Message, ToolUseRequest, decode, encode};
use outpost_tools::{DesktopLauncher, DispatchEvent, Dispatcher, ToolEnv, builtin_registry};
use tokio::sync::mpsc::UnboundedReceiver;

struct Setup {
    _dir: tempfile::TempDir,
    file: PathBuf,
    rt: tokio::runtime::Runtime,
    dispatcher: Dispatcher,
    rx: UnboundedReceiver<DispatchEvent>,
    next: std::cell::Cell<u64>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(dir.path()).unwrap();
    let docs = home.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let file = docs.join("page.txt");
    std::fs::write(&file, "abcdefghijklmnop".repeat(256)).unwrap();
    let policy = Policy {
        folders: vec![FolderRule {
            path: docs.to_string_lossy().into_owned(),
            access: FolderAccess::Allow,
            tools: None,
        }],
        ..Policy::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (dispatcher, rx) = rt.block_on(async {
        Dispatcher::new(
            builtin_registry().unwrap(),
            ToolEnv {
                home: home.clone(),
                launcher: Arc::new(DesktopLauncher),
            },
            PolicyStore::in_memory(policy, PolicyContext::new(&home, vec![])),
            ConsentBroker::new(),
        )
    });
    Setup {
        _dir: dir,
        file,
        rt,
        dispatcher,
        rx,
        next: std::cell::Cell::new(0),
    }
}

fn request_bytes(s: &Setup) -> Vec<u8> {
    s.next.set(s.next.get() + 1);
    let mut params = outpost_protocol::Map::new();
    params.insert(
        "filePath".into(),
        s.file.to_string_lossy().into_owned().into(),
    );
    encode(&Message::ToolUseRequest(ToolUseRequest {
        id: format!("bench{}", s.next.get()),
        message_id: "msg_bench".into(),
        tool_name: "read_local_file".into(),
        execution: Execution::Client,
        parameters: params,
        timeout_ms: Some(5000),
    }))
    .unwrap()
}

/// One round trip: decode, dispatch, wait for the result, encode it.
fn round_trip(s: &mut Setup, bytes: &[u8]) -> Vec<u8> {
    let Message::ToolUseRequest(req) = decode(bytes).unwrap() else {
        panic!("not a request")
    };
    s.dispatcher.handle_request("bench", req);
    let rx = &mut s.rx;
    let result = s.rt.block_on(async {
        loop {
            match rx.recv().await.unwrap() {
                DispatchEvent::Result(r) => break r,
                _ => continue,
            }
        }
    });
    assert!(result.success, "{result:?}");
    encode(&Message::ToolUseResult(result)).unwrap()
}

fn plain_read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

fn bench(c: &mut Criterion) {
    let mut s = setup();
    let file = s.file.clone();
    let mut g = c.benchmark_group("read_4k");
    g.bench_function("std_fs_read", |b| b.iter(|| plain_read(&file)));
    let s = std::cell::RefCell::new(&mut s);
    g.bench_function("dispatch_bytes_to_bytes", |b| {
        b.iter_batched(
            || request_bytes(&s.borrow()),
            |bytes| round_trip(&mut s.borrow_mut(), &bytes),
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn percentiles() {
    let mut s = setup();
    let file = s.file.clone();
    const N: usize = 5000;
    for _ in 0..500 {
        let b = request_bytes(&s);
        round_trip(&mut s, &b);
        plain_read(&file);
    }
    let mut plain = Vec::with_capacity(N);
    let mut disp = Vec::with_capacity(N);
    // Interleaved so both see the same machine conditions.
    for _ in 0..N {
        let t = Instant::now();
        std::hint::black_box(plain_read(&file));
        plain.push(t.elapsed());
        let bytes = request_bytes(&s);
        let t = Instant::now();
        std::hint::black_box(round_trip(&mut s, &bytes));
        disp.push(t.elapsed());
    }
    // The same work without the dispatcher's task hand-offs: decode, prepare, policy,
    // job and encode on this thread. Shows what the executor's own file work costs.
    let mut direct = Vec::with_capacity(N);
    let policy = s.dispatcher.policy().current();
    let env = ToolEnv {
        home: s._dir.path().to_path_buf(),
        launcher: Arc::new(DesktopLauncher),
    };
    let cx = outpost_tools::RunContext {
        cancel: tokio_util::sync::CancellationToken::new(),
        policy: policy.clone(),
        tool: "read_local_file".into(),
        progress: Default::default(),
    };
    for _ in 0..N {
        let bytes = request_bytes(&s);
        let t = Instant::now();
        let Message::ToolUseRequest(req) = decode(&bytes).unwrap() else {
            panic!()
        };
        let prepared =
            outpost_tools::Tool::prepare(&outpost_tools::ReadLocalFile, req.parameters, &env)
                .unwrap();
        let v = policy.evaluate(
            &outpost_policy::AccessRequest {
                tool: "read_local_file",
                server: None,
                hints: outpost_policy::ToolHints {
                    read_only: true,
                    ..Default::default()
                },
                paths: &prepared.access.paths,
                folder: prepared.access.folder.as_deref(),
                force_ask: None,
            },
            &outpost_policy::ConversationGrants::default(),
        );
        assert!(matches!(v, outpost_policy::Verdict::Allow(_)));
        let map = (prepared.job)(&cx).unwrap();
        std::hint::black_box(
            encode(&Message::ToolUseResult(
                outpost_protocol::ToolUseResult::ok(req.id, map),
            ))
            .unwrap(),
        );
        direct.push(t.elapsed());
    }
    direct.sort();
    println!(
        "  same work, no task hand-offs p50 {:>10.2?}  p99 {:>10.2?}",
        percentile(&direct, 0.5),
        percentile(&direct, 0.99)
    );
    plain.sort();
    disp.sort();
    let (p50p, p99p) = (percentile(&plain, 0.5), percentile(&plain, 0.99));
    let (p50d, p99d) = (percentile(&disp, 0.5), percentile(&disp, 0.99));
    println!("read_4k percentiles over {N} interleaved runs:");
    println!("  std::fs::read            p50 {p50p:>10.2?}  p99 {p99p:>10.2?}");
    println!("  dispatch bytes->bytes    p50 {p50d:>10.2?}  p99 {p99d:>10.2?}");
    println!(
        "  ratio p50 {:.2}x  (target <= 5x), p99 under 1 ms: {}",
        p50d.as_secs_f64() / p50p.as_secs_f64(),
        p99d < Duration::from_millis(1)
    );

    // 1000 concurrent requests: all sent, then all answered.
    let reqs: Vec<Vec<u8>> = (0..1000).map(|_| request_bytes(&s)).collect();
    let t = Instant::now();
    for bytes in &reqs {
        let Message::ToolUseRequest(req) = decode(bytes).unwrap() else {
            panic!()
        };
        s.dispatcher.handle_request("bench", req);
    }
    let rx = &mut s.rx;
    let answered = s.rt.block_on(async {
        let mut n = 0;
        while n < 1000 {
            if let DispatchEvent::Result(r) = rx.recv().await.unwrap() {
                assert!(r.success);
                encode(&Message::ToolUseResult(r)).unwrap();
                n += 1;
            }
        }
        n
    });
    println!(
        "  1000 concurrent requests: {answered} answered in {:.2?}",
        t.elapsed()
    );
}

criterion_group!(benches, bench);

fn main() {
    percentiles();
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
