//! Child process for the store durability test (`tests/tests/store_durability.rs`).
//!
//! Opens the store in `$OUTPOST_DATA_DIR` (required, so it never writes to a real user's
//! data directory), starts conversation `<conversation-id>`, then logs messages and tool
//! calls forever, keeping up to 64 writes in flight. After each write's acknowledgement it
//! prints `ACK message <id>` or `ACK tool <id>` and flushes, so the parent knows exactly
//! which writes were acknowledged before it kills this process with SIGKILL.
//!
//! Usage: store_writer <full|normal> <conversation-id>

use std::collections::VecDeque;
use std::io::Write;

use anyhow::{Context, bail};
use outpost_store::{
    ConversationId, DATA_DIR_ENV, Durability, Execution, Executor, Location, NewConversation,
    NewMessage, Pending, Role, Store, StoreConfig, ToolCallEvent, now_ms,
};
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (durability, conversation) = match args.as_slice() {
        [_, d, c] => (d.as_str(), c.clone()),
        _ => bail!("usage: store_writer <full|normal> <conversation-id>"),
    };
    let durability = match durability {
        "full" => Durability::Full,
        "normal" => Durability::ProcessCrash,
        other => bail!("unknown durability {other:?}"),
    };
    if std::env::var_os(DATA_DIR_ENV).is_none() {
        bail!("{DATA_DIR_ENV} must be set (this test helper never uses the real data directory)");
    }
    let dir = outpost_store::data_dir(None)?;
    let mut cfg = StoreConfig::new(Location::Directory(dir));
    cfg.durability = durability;
    let store = Store::open(cfg).context("open store")?;
    let cid = ConversationId(conversation);
    store
        .begin_conversation(NewConversation {
            id: cid.clone(),
            title: Some("durability".into()),
            room: None,
            assistant_identity: None,
            started_at: now_ms(),
        })
        .wait()
        .context("begin conversation")?;

    let mut out = std::io::stdout().lock();
    writeln!(out, "READY")?;
    out.flush()?;

    let mut in_flight: VecDeque<(String, Pending<()>)> = VecDeque::new();
    let big = "x".repeat(100_000);
    for i in 0u64.. {
        let at = now_ms();
        let id = format!("m{i}");
        let ack = store.log_message(NewMessage {
            conversation_id: cid.clone(),
            id: id.clone(),
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            text: format!("message {i} about durable storage and sudden kills"),
            created_at: at,
            completed_at: Some(at),
        });
        in_flight.push_back((format!("message {id}"), ack));
        if i % 4 == 0 {
            let tid = format!("t{i}");
            // The initiation's ack is implied by the completion's (same queue, in order).
            drop(store.log_tool_event(ToolCallEvent::Initiated {
                conversation_id: cid.clone(),
                id: tid.clone(),
                message_id: Some(id.clone()),
                tool_name: "read_local_file".into(),
                server_name: String::new(),
                execution: Execution::Client,
                arguments: json!({ "filePath": format!("/tmp/file-{i}.txt") }),
                at,
            }));
            let content = if i % 200 == 0 {
                big.clone()
            } else {
                format!("content {i}")
            };
            let ack = store.log_tool_event(ToolCallEvent::Completed {
                conversation_id: cid.clone(),
                id: tid.clone(),
                result: Some(json!({ "content": content })),
                executed_by: Some(Executor::Client),
                at: at + 1,
            });
            in_flight.push_back((format!("tool {tid}"), ack));
        }
        while in_flight.len() > 64 {
            if let Some((label, ack)) = in_flight.pop_front() {
                ack.wait().with_context(|| format!("write {label}"))?;
                writeln!(out, "ACK {label}")?;
                out.flush()?;
            }
        }
    }
    Ok(())
}
