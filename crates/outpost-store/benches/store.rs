//! Store benchmarks, each side by side with a baseline in the same run:
//!
//! 1. Sustained logging rate: messages with tool calls mixed in (every 5th message has a
//!    tool call: initiated + completed), pushed through `Store`'s writer thread and awaited,
//!    against a bare batched INSERT loop on the same schema, pragmas and batch size.
//! 2. Search latency over 100k messages: `Store::search` (plain-text query parsing, snippets,
//!    both indexes, reader-thread hop) against a bare FTS5 `MATCH ... ORDER BY rank LIMIT 20`
//!    returning rowids only.
//!
//! Run: `cargo bench -p outpost-store --bench store` (add `-- --quick` for a smoke run,
//! `-- --search-only` or `-- --logging-only` for one half).
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use outpost_store::search::{SearchOrder, SearchSyntax};
use outpost_store::{
    ConversationId, Durability, Execution, Executor, Location, NewConversation, NewMessage,
    Pending, Role, SearchQuery, Store, StoreConfig, ToolCallEvent,
};
use rusqlite::{Connection, TransactionBehavior, params};
use serde_json::json;

const BATCH: usize = outpost_store::store::DEFAULT_MAX_BATCH;
const TOOL_EVERY: usize = 5;

/// Deterministic pseudo-random numbers (no extra dependency, same data every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "the",
    "a",
    "to",
    "of",
    "and",
    "in",
    "is",
    "it",
    "you",
    "that",
    "for",
    "on",
    "with",
    "file",
    "read",
    "search",
    "notes",
    "project",
    "meeting",
    "weather",
    "restaurant",
    "italian",
    "york",
    "calendar",
    "email",
    "draft",
    "report",
    "budget",
    "invoice",
    "travel",
    "flight",
    "hotel",
    "train",
    "schedule",
    "summary",
    "document",
    "folder",
    "image",
    "photo",
    "music",
    "playlist",
    "recipe",
    "pasta",
    "pizza",
    "garden",
    "tomato",
    "bicycle",
    "repair",
    "kernel",
    "compile",
    "rust",
    "python",
    "database",
    "query",
    "index",
    "backup",
    "restore",
    "password",
    "network",
    "router",
    "printer",
    "battery",
    "laptop",
    "monitor",
    "keyboard",
    "mouse",
    "camera",
    "video",
    "podcast",
    "episode",
    "chapter",
    "novel",
    "author",
    "history",
    "science",
    "physics",
    "chemistry",
    "biology",
    "galaxy",
    "planet",
    "orbit",
    "telescope",
    "ocean",
    "mountain",
    "river",
    "forest",
    "desert",
    "island",
    "volcano",
    "glacier",
    "thunder",
    "rainbow",
    "quarterly",
    "forecast",
    "deadline",
    "milestone",
    "sprint",
    "retrospective",
    "zebra",
];

fn sentence(rng: &mut Lcg) -> String {
    let n = 8 + rng.below(22);
    let mut words = Vec::with_capacity(n);
    for _ in 0..n {
        // Skewed towards the front of the list: common words are common.
        let i = rng.below(WORDS.len()).min(rng.below(WORDS.len()));
        words.push(WORDS[i]);
    }
    words.join(" ")
}

struct Workload {
    messages: Vec<String>,
}

fn workload(n: usize) -> Workload {
    let mut rng = Lcg(42);
    Workload {
        messages: (0..n).map(|_| sentence(&mut rng)).collect(),
    }
}

fn open_store(dir: &std::path::Path, durability: Durability) -> Store {
    let mut cfg = StoreConfig::new(Location::Directory(dir.to_path_buf()));
    cfg.durability = durability;
    Store::open(cfg).unwrap()
}

/// Logs the workload through the store; returns elapsed time until the last ack.
fn run_store(w: &Workload, durability: Durability) -> Duration {
    let tmp = tempfile::tempdir().unwrap();
    let store = open_store(tmp.path(), durability);
    let cid = ConversationId::from("bench");
    store
        .begin_conversation(NewConversation::new(cid.clone(), 0))
        .wait()
        .unwrap();
    let start = Instant::now();
    let mut acks: Vec<Pending<()>> = Vec::with_capacity(w.messages.len() * 2);
    for (i, text) in w.messages.iter().enumerate() {
        let at = i as i64;
        acks.push(store.log_message(NewMessage {
            conversation_id: cid.clone(),
            id: format!("m{i}"),
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            text: text.clone(),
            created_at: at,
            completed_at: Some(at),
        }));
        if i % TOOL_EVERY == 0 {
            let id = format!("t{i}");
            acks.push(store.log_tool_event(ToolCallEvent::Initiated {
                conversation_id: cid.clone(),
                id: id.clone(),
                message_id: Some(format!("m{i}")),
                tool_name: "read_local_file".into(),
                server_name: String::new(),
                execution: Execution::Client,
                arguments: json!({ "filePath": format!("/home/alice/file-{i}.txt") }),
                at,
            }));
            acks.push(store.log_tool_event(ToolCallEvent::Completed {
                conversation_id: cid.clone(),
                id,
                result: Some(json!({ "content": text, "size": text.len() })),
                executed_by: Some(Executor::Client),
                at: at + 1,
            }));
        }
    }
    for a in acks {
        a.wait().unwrap();
    }
    start.elapsed()
}

/// The same rows with a bare batched INSERT loop: same schema, same pragmas, same batch
/// size, no queue, no savepoints, no lifecycle checks.
fn run_bare(w: &Workload, durability: Durability, fts: bool) -> Duration {
    let tmp = tempfile::tempdir().unwrap();
    let mut conn = Connection::open(tmp.path().join("bare.sqlite3")).unwrap();
    let _: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .unwrap();
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::ProcessCrash => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync).unwrap();
    conn.pragma_update(None, "foreign_keys", "ON").unwrap();
    outpost_store::migrations::migrate(&mut conn).unwrap();
    if !fts {
        conn.execute_batch(
            "DROP TRIGGER messages_fts_insert; DROP TRIGGER tool_calls_fts_insert;
             DROP TRIGGER tool_calls_fts_update;",
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO conversations (id, seq, started_at) VALUES ('bench', 0, 0)",
        [],
    )
    .unwrap();
    let start = Instant::now();
    let mut seq = 0i64;
    let mut i = 0usize;
    while i < w.messages.len() {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let mut rows = 0;
        {
            let mut ins_msg = tx
                .prepare_cached(
                    "INSERT INTO messages (conversation_id, id, seq, role, text, created_at,
                        completed_at) VALUES ('bench', ?1, ?2, ?3, ?4, ?5, ?5)",
                )
                .unwrap();
            let mut ins_tool = tx
                .prepare_cached(
                    "INSERT INTO tool_calls (conversation_id, id, message_id, seq, tool_name,
                        server_name, execution, arguments, state, initiated_at)
                     VALUES ('bench', ?1, ?2, ?3, 'read_local_file', '', 'client', ?4,
                        'initiated', ?5)",
                )
                .unwrap();
            let mut fin_tool = tx
                .prepare_cached(
                    "UPDATE tool_calls SET state = 'completed', finished_at = ?2, duration_ms = 1,
                        executed_by = 'client', result = ?3
                     WHERE conversation_id = 'bench' AND id = ?1",
                )
                .unwrap();
            while i < w.messages.len() && rows < BATCH {
                let text = &w.messages[i];
                let at = i as i64;
                seq += 1;
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                ins_msg
                    .execute(params![format!("m{i}"), seq, role, text, at])
                    .unwrap();
                rows += 1;
                if i % TOOL_EVERY == 0 {
                    seq += 1;
                    let id = format!("t{i}");
                    let args = json!({ "filePath": format!("/home/alice/file-{i}.txt") });
                    ins_tool
                        .execute(params![id, format!("m{i}"), seq, args.to_string(), at])
                        .unwrap();
                    let result = json!({ "content": text, "size": text.len() });
                    fin_tool
                        .execute(params![id, at + 1, result.to_string()])
                        .unwrap();
                    rows += 2;
                }
                i += 1;
            }
        }
        tx.commit().unwrap();
    }
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn logging(quick: bool) {
    let n = if quick { 5_000 } else { 50_000 };
    let rounds = if quick { 1 } else { 3 };
    let w = workload(n);
    let tool_calls = n.div_ceil(TOOL_EVERY);
    let writes = n + 2 * tool_calls;
    println!(
        "## Logging: {n} messages + {tool_calls} tool calls ({writes} writes), median of {rounds}\n"
    );
    println!("| durability | path | messages/s | writes/s | store ÷ bare |");
    println!("|---|---|---|---|---|");
    for (name, durability) in [
        ("Full (fsync per batch)", Durability::Full),
        ("ProcessCrash (NORMAL)", Durability::ProcessCrash),
    ] {
        let mut store_t = Vec::new();
        let mut bare_t = Vec::new();
        let mut nofts_t = Vec::new();
        for _ in 0..rounds {
            // Interleaved so all see the same machine conditions.
            store_t.push(run_store(&w, durability));
            bare_t.push(run_bare(&w, durability, true));
            nofts_t.push(run_bare(&w, durability, false));
        }
        let (s, b, nf) = (median(store_t), median(bare_t), median(nofts_t));
        let rate = |d: Duration, k: usize| k as f64 / d.as_secs_f64();
        println!(
            "| {name} | Store writer | {:.0} | {:.0} | {:.2} |",
            rate(s, n),
            rate(s, writes),
            rate(s, n) / rate(b, n)
        );
        println!(
            "| {name} | bare INSERT loop | {:.0} | {:.0} | 1.00 |",
            rate(b, n),
            rate(b, writes)
        );
        println!(
            "| {name} | bare INSERT loop, no search index (reference) | {:.0} | {:.0} | {:.2} |",
            rate(nf, n),
            rate(nf, writes),
            rate(s, n) / rate(nf, n)
        );
    }
    println!();
}

fn searching(quick: bool) {
    let n = if quick { 10_000 } else { 100_000 };
    let w = workload(n);
    let tmp = tempfile::tempdir().unwrap();
    let store = open_store(tmp.path(), Durability::ProcessCrash);
    let mut acks = Vec::new();
    for c in 0..(n / 1000).max(1) {
        acks.push(store.begin_conversation(NewConversation::new(
            ConversationId(format!("c{c}")),
            c as i64,
        )));
    }
    for (i, text) in w.messages.iter().enumerate() {
        let cid = ConversationId(format!("c{}", i / 1000));
        acks.push(store.log_message(NewMessage {
            conversation_id: cid.clone(),
            id: format!("m{i}"),
            role: Role::User,
            text: text.clone(),
            created_at: i as i64,
            completed_at: None,
        }));
        if i % 10 == 0 {
            acks.push(store.log_tool_event(ToolCallEvent::Initiated {
                conversation_id: cid,
                id: format!("t{i}"),
                message_id: None,
                tool_name: "web_search".into(),
                server_name: String::new(),
                execution: Execution::Server,
                arguments: json!({ "query": text, "limit": 5 }),
                at: i as i64,
            }));
        }
    }
    for a in acks {
        a.wait().unwrap();
    }
    drop(store);
    let store = open_store(tmp.path(), Durability::ProcessCrash);
    let bare = Connection::open(tmp.path().join("outpost.sqlite3")).unwrap();

    let queries: Vec<&str> = vec![
        "the",
        "notes",
        "zebra",
        "italian restaurant",
        "\"the file\"",
        "calend*",
        "quarterly forecast deadline",
        "telescope",
        "pasta",
        "a",
    ];
    let reps = if quick { 5 } else { 20 };
    println!(
        "## Search over {n} messages + {} tool calls: {} queries × {reps}, 20 hits each\n",
        n / 10,
        queries.len()
    );
    println!("| order | path | p50 ms | p95 ms | p99 ms | max ms | p95 store ÷ bare |");
    println!("|---|---|---|---|---|---|---|");
    for (name, order, bare_order) in [
        ("newest first (default)", SearchOrder::Newest, "rowid DESC"),
        ("relevance (BM25)", SearchOrder::Relevance, "rank"),
    ] {
        let mut store_lat = Vec::new();
        let mut bare_lat = Vec::new();
        let sql = format!(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?1 ORDER BY {bare_order} LIMIT 20"
        );
        for _ in 0..reps {
            for q in &queries {
                let mut sq = SearchQuery::new(*q);
                sq.order = order;
                let t = Instant::now();
                let hits = store.search(sq).wait().unwrap();
                store_lat.push(t.elapsed());
                assert!(!hits.is_empty(), "{q} found nothing");

                let expr = outpost_store::search::plain_to_fts5(q).unwrap();
                let t = Instant::now();
                let mut stmt = bare.prepare_cached(&sql).unwrap();
                let rows: Vec<i64> = stmt
                    .query_map([&expr], |r| r.get(0))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap();
                bare_lat.push(t.elapsed());
                assert!(!rows.is_empty());
            }
        }
        store_lat.sort();
        bare_lat.sort();
        let p95s = percentile(&store_lat, 0.95).as_secs_f64();
        let p95b = percentile(&bare_lat, 0.95).as_secs_f64();
        println!(
            "| {name} | Store::search (messages + tool calls, snippets) | {} | {} | {} | {} | {:.2} |",
            ms(percentile(&store_lat, 0.5)),
            ms(percentile(&store_lat, 0.95)),
            ms(percentile(&store_lat, 0.99)),
            ms(*store_lat.last().unwrap()),
            p95s / p95b
        );
        println!(
            "| {name} | bare FTS5 MATCH, message rowids only | {} | {} | {} | {} | 1.00 |",
            ms(percentile(&bare_lat, 0.5)),
            ms(percentile(&bare_lat, 0.95)),
            ms(percentile(&bare_lat, 0.99)),
            ms(*bare_lat.last().unwrap()),
        );
    }
    // The raw-syntax path works on the same data.
    let mut raw = SearchQuery::new("notes OR zebra");
    raw.syntax = SearchSyntax::Fts5;
    assert!(!store.search(raw).wait().unwrap().is_empty());
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let quick = has("--quick");
    if !has("--search-only") {
        logging(quick);
    }
    if !has("--logging-only") {
        searching(quick);
    }
}
