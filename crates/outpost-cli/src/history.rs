//! `outpost history list|show|search|export`: the conversation store.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use outpost_store::{
    ConversationId, ExportFormat, ExportScope, SearchQuery, Store, TimelineItem, export,
};

use crate::Failure;

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Where the history lives (default: $OUTPOST_DATA_DIR, else the platform's data dir).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: HistoryCommand,
}

#[derive(Debug, Subcommand)]
enum HistoryCommand {
    /// Conversations, newest first.
    List {
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// One conversation: messages, tool calls, consents, errors, in order.
    Show {
        /// The conversation id (ids may begin with `-`: they are NanoIDs).
        #[arg(allow_hyphen_values = true)]
        id: String,
        /// The timeline as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Full-text search over messages and tool calls (plain words, "phrases", prefix*).
    Search {
        /// What to look for.
        #[arg(allow_hyphen_values = true)]
        query: String,
        /// Most hits.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// One JSON object per hit and line.
        #[arg(long)]
        json: bool,
    },
    /// Export one conversation, or all of them.
    Export {
        /// The conversation (default: everything; ids may begin with `-`).
        #[arg(allow_hyphen_values = true)]
        id: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Markdown)]
        format: Format,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Markdown,
}

/// Prints `text` (JSON when `json`), made safe for a terminal: the history holds what
/// the assistant and servers wrote.
fn out(text: &str, json: bool) -> Result<(), Failure> {
    let text = if json {
        crate::terminal::json(text)
    } else {
        crate::terminal::text(text)
    };
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        o.write_all(b"\n")?;
    }
    o.flush()?;
    Ok(())
}

fn json_line<T: serde::Serialize>(v: &T) -> Result<String, Failure> {
    serde_json::to_string(v).map_err(|e| Failure::Other(e.into()))
}

/// The store, opened without creating a data directory that does not exist.
fn open(dir: Option<PathBuf>) -> Result<Store, Failure> {
    let dir = outpost_store::data_dir(dir.as_deref())
        .map_err(|e| Failure::Invalid(format!("data directory: {e}")))?;
    if !outpost_store::paths::database_path(&dir).exists() {
        return Err(Failure::Invalid(format!(
            "no Outpost history in {} (nothing was recorded there yet)",
            dir.display()
        )));
    }
    Store::open_default(Some(&dir))
        .with_context(|| format!("opening the history in {}", dir.display()))
        .map_err(Failure::Other)
}

async fn known(store: &Store, id: &str) -> Result<ConversationId, Failure> {
    let cid = ConversationId::from(id);
    match store.conversation(cid.clone()).await {
        Ok(Some(_)) => Ok(cid),
        Ok(None) => Err(Failure::Invalid(format!("no conversation with id '{id}'"))),
        Err(e) => Err(Failure::Other(e.into())),
    }
}

pub(crate) fn run(args: HistoryArgs) -> Result<(), Failure> {
    let store = open(args.data_dir)?;
    let rt = crate::runtime()?;
    rt.block_on(async move {
        match args.command {
            HistoryCommand::List { limit, json } => {
                let page = store
                    .list_conversations(limit.max(1), None)
                    .await
                    .map_err(|e| Failure::Other(e.into()))?;
                let mut text = String::new();
                for s in &page.items {
                    if json {
                        text.push_str(&json_line(s)?);
                    } else {
                        let c = &s.conversation;
                        text.push_str(&format!(
                            "{}  {}  {} messages, {} tool calls  {}",
                            c.id,
                            export::format_time(c.started_at),
                            s.message_count,
                            s.tool_call_count,
                            c.title.as_deref().or(c.room.as_deref()).unwrap_or("")
                        ));
                    }
                    text.push('\n');
                }
                if text.is_empty() && !json {
                    text.push_str("(no conversations)\n");
                }
                out(&text, json)
            }
            HistoryCommand::Show { id, json } => {
                let cid = known(&store, &id).await?;
                let t = store
                    .timeline(cid)
                    .await
                    .map_err(|e| Failure::Other(e.into()))?;
                if json {
                    let text =
                        serde_json::to_string_pretty(&t).map_err(|e| Failure::Other(e.into()))?;
                    return out(&text, true);
                }
                let mut text = format!(
                    "conversation {} (started {})\n",
                    t.conversation.id,
                    export::format_time(t.conversation.started_at)
                );
                for item in &t.items {
                    text.push_str(&format!("{}  ", export::format_time(item.at())));
                    let line = match item {
                        TimelineItem::Message(m) => format!("{}: {}", m.role, m.text),
                        TimelineItem::Status(s) => format!(
                            "* {}{}",
                            s.change.status,
                            s.change
                                .detail
                                .as_ref()
                                .map(|d| format!(": {d}"))
                                .unwrap_or_default()
                        ),
                        TimelineItem::ToolCall(c) => format!(
                            "[tool {}] {} ({}) {}{}",
                            c.id,
                            c.tool_name,
                            c.execution,
                            c.state,
                            match (&c.error_code, &c.error_message) {
                                (Some(code), Some(m)) => format!(": {code}: {m}"),
                                _ => String::new(),
                            }
                        ),
                        TimelineItem::Consent(c) => format!(
                            "? {} {} by {}{} ({})",
                            c.decided.tool_name,
                            c.decided.outcome,
                            c.decided.decided_by,
                            c.decided
                                .decision
                                .map(|d| format!(" [{d}]"))
                                .unwrap_or_default(),
                            c.decided.asked
                        ),
                        TimelineItem::ProtocolError(e) => {
                            format!("! protocol error {}: {}", e.logged.code, e.logged.message)
                        }
                        TimelineItem::Attachment(a) => format!(
                            "+ attachment {} ({}, {} bytes, sha256 {})",
                            a.sent.name, a.sent.mime_type, a.sent.size, a.sent.sha256
                        ),
                    };
                    // A message that spans lines cannot pass for other items.
                    text.push_str(&crate::terminal::lines(&line));
                    text.push('\n');
                }
                out(&text, false)
            }
            HistoryCommand::Search { query, limit, json } => {
                if query.trim().is_empty() {
                    return Err(Failure::Invalid("the search query is empty".into()));
                }
                let mut q = SearchQuery::new(query);
                q.limit = limit.max(1);
                let hits = store.search(q).await.map_err(|e| match e {
                    outpost_store::Error::InvalidSearchQuery { .. } => {
                        Failure::Invalid(e.to_string())
                    }
                    other => Failure::Other(other.into()),
                })?;
                let mut text = String::new();
                for h in &hits {
                    if json {
                        text.push_str(&json_line(h)?);
                    } else {
                        text.push_str(&format!(
                            "{}  {}  {}{}  {}",
                            h.conversation_id,
                            export::format_time(h.at),
                            match h.kind {
                                outpost_store::HitKind::Message => "message",
                                outpost_store::HitKind::ToolCall => "tool call",
                            },
                            h.tool_name
                                .as_ref()
                                .map(|t| format!(" {t}"))
                                .unwrap_or_default(),
                            h.snippet.replace('\n', " ")
                        ));
                    }
                    text.push('\n');
                }
                if text.is_empty() && !json {
                    text.push_str("(no matches)\n");
                }
                out(&text, json)
            }
            HistoryCommand::Export { id, format } => {
                let scope = match id {
                    Some(id) => ExportScope::Conversation(known(&store, &id).await?),
                    None => ExportScope::All,
                };
                let fmt = match format {
                    Format::Json => ExportFormat::Json,
                    Format::Markdown => ExportFormat::Markdown,
                };
                let text = store
                    .export(scope, fmt)
                    .await
                    .map_err(|e| Failure::Other(e.into()))?;
                out(&text, matches!(fmt, ExportFormat::Json))
            }
        }
    })
}
