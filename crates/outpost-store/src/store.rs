//! [`Store`]: the handle the session engine, CLI and app hold.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use crate::error::{Error, Result, SqlContext};
use crate::export::{self, ExportFormat, ExportScope};
use crate::model::{
    AuditPage, Conversation, ConversationId, ConversationPage, Cursor, MessageDelta, Millis,
    NewAttachment, NewConsent, NewConversation, NewMessage, NewProtocolError, NewStatusChange,
    RetentionReport, SearchHit, Timeline, ToolCallEvent,
};
use crate::query::{self, AuditQuery};
use crate::search::{self, SearchQuery};
use crate::writer::{self, Job, Op, Outcome, WriterConfig};
use crate::{migrations, paths};

/// What "acknowledged" promises.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: each batch's commit fsyncs the WAL before acknowledgements go
    /// out, so an acknowledged write survives a process kill *and* an OS crash or power
    /// loss. Batching spreads one fsync over many writes.
    #[default]
    Full,
    /// `synchronous=NORMAL`: an acknowledged write survives the process being killed
    /// (it is in the WAL, in the OS page cache) but may be lost on power loss; the file is
    /// never corrupted either way. Faster on slow disks.
    ProcessCrash,
}

/// Where the database lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `outpost.sqlite3` inside this directory (created if needed).
    Directory(PathBuf),
    /// This database file (its directory must exist).
    File(PathBuf),
    /// A private in-memory database (tests).
    Memory,
}

/// How to open a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Where.
    pub location: Location,
    /// What an acknowledgement promises.
    pub durability: Durability,
    /// Per-row cap, in bytes, for message text, tool-call arguments, results and error
    /// messages. Larger values keep their first bytes and a visible truncation note.
    pub max_field_bytes: usize,
    /// Most writes committed in one transaction.
    pub max_batch: usize,
}

/// Default per-row cap: 1 MiB.
pub const DEFAULT_MAX_FIELD_BYTES: usize = 1 << 20;
/// Default batch size.
pub const DEFAULT_MAX_BATCH: usize = 4096;

impl StoreConfig {
    /// Defaults for `location`.
    pub fn new(location: Location) -> Self {
        Self {
            location,
            durability: Durability::default(),
            max_field_bytes: DEFAULT_MAX_FIELD_BYTES,
            max_batch: DEFAULT_MAX_BATCH,
        }
    }
}

/// The result of a queued write or a query, delivered later.
///
/// Await it (any executor) or call [`Pending::wait`] from synchronous code. For writes,
/// `Ok` means the write is committed with the store's [`Durability`]; dropping a `Pending`
/// does not cancel the write.
#[derive(Debug)]
pub struct Pending<T> {
    rx: oneshot::Receiver<Result<T>>,
    worker: &'static str,
}

impl<T> Pending<T> {
    /// Blocks the current thread until the result is in. Do not call from async code; await
    /// instead.
    pub fn wait(self) -> Result<T> {
        futures::executor::block_on(self)
    }
}

impl<T> Future for Pending<T> {
    type Output = Result<T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let worker = self.worker;
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(Error::Stopped(worker))))
    }
}

/// The conversation log and audit store. Cheap to clone; all clones share one writer
/// thread and one reader thread. When the last clone is dropped, queued writes are
/// committed and the threads are joined.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    writer: Option<Sender<Job>>,
    /// None for in-memory stores: their reads run on the writer's connection.
    reader: Option<Sender<ReadJob>>,
    threads: Vec<JoinHandle<()>>,
    path: Option<PathBuf>,
    durability: Durability,
}

type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

impl Drop for Inner {
    fn drop(&mut self) {
        self.writer.take();
        self.reader.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Creates the database file at `path` for the user only when it is missing, and
/// takes group and other access away from it and its -wal and -shm files otherwise.
fn private_db_files(path: &std::path::Path) -> Result<()> {
    let io = |error| Error::Io {
        action: "make private",
        path: path.to_path_buf(),
        error,
    };
    if !path.exists() {
        crate::private::write_file(path, b"").map_err(io)?;
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        crate::private::restrict_file(std::path::Path::new(&p)).map_err(io)?;
    }
    Ok(())
}

fn configure(conn: &Connection, durability: Durability, what: &str) -> Result<()> {
    conn.busy_timeout(Duration::from_secs(5))
        .ctx(|| format!("set busy timeout on {what}"))?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .ctx(|| format!("enable foreign keys on {what}"))?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::ProcessCrash => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)
        .ctx(|| format!("set synchronous={sync} on {what}"))?;
    Ok(())
}

impl Store {
    /// Opens (creating and migrating if needed) the store in the resolved data directory:
    /// `explicit` if given, else `$OUTPOST_DATA_DIR`, else the user's data directory.
    pub fn open_default(explicit_dir: Option<&Path>) -> Result<Store> {
        let dir = paths::data_dir(explicit_dir)?;
        Store::open(StoreConfig::new(Location::Directory(dir)))
    }

    /// A private in-memory store with default settings (tests).
    pub fn open_in_memory() -> Result<Store> {
        Store::open(StoreConfig::new(Location::Memory))
    }

    /// Opens a store. Blocking (opening, migrating, maybe a retention pass); quick.
    pub fn open(config: StoreConfig) -> Result<Store> {
        if config.max_field_bytes < 64 {
            return Err(Error::InvalidArgument {
                name: "max_field_bytes",
                reason: format!("{} is too small (minimum 64)", config.max_field_bytes),
            });
        }
        let path = match &config.location {
            Location::Directory(dir) => {
                paths::ensure_dir(dir)?;
                Some(paths::database_path(dir))
            }
            Location::File(file) => Some(file.clone()),
            Location::Memory => None,
        };
        let what = path
            .as_ref()
            .map_or_else(|| ":memory:".to_owned(), |p| p.display().to_string());
        if let Some(p) = &path {
            // SQLite gives its -wal and -shm files the database file's permissions: the
            // database is created 0600 before SQLite opens it, and files of older runs
            // are tightened.
            private_db_files(p)?;
        }
        let mut conn = match &path {
            Some(p) => Connection::open(p),
            None => Connection::open_in_memory(),
        }
        .ctx(|| format!("open database {what}"))?;
        conn.busy_timeout(Duration::from_secs(5))
            .ctx(|| format!("set busy timeout on {what}"))?;
        if path.is_some() {
            // Fails with "file is not a database" on a file that is not SQLite.
            let mode: String = conn
                .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
                .ctx(|| format!("enable WAL on {what}"))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(Error::InvalidArgument {
                    name: "database",
                    reason: format!("{what} cannot use WAL mode (got {mode})"),
                });
            }
        }
        configure(&conn, config.durability, &what)?;
        migrations::migrate(&mut conn)?;
        let start_seq = writer::max_seq(&conn)?;
        let retention_set = query::retention_days(&conn)?.is_some();

        let mut threads = Vec::new();
        let reader = match &path {
            Some(p) => {
                let rconn = Connection::open_with_flags(
                    p,
                    OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )
                .ctx(|| format!("open reader connection to {what}"))?;
                configure(&rconn, config.durability, &what)?;
                rconn
                    .pragma_update(None, "query_only", "ON")
                    .ctx(|| "make reader connection read-only".to_owned())?;
                let (tx, rx) = mpsc::channel::<ReadJob>();
                let handle = std::thread::Builder::new()
                    .name("outpost-store-reader".to_owned())
                    .spawn(move || {
                        while let Ok(job) = rx.recv() {
                            job(&rconn);
                        }
                    })
                    .map_err(|error| Error::Io {
                        action: "spawn reader thread for",
                        path: p.clone(),
                        error,
                    })?;
                threads.push(handle);
                Some(tx)
            }
            None => None,
        };

        let (wtx, wrx) = mpsc::channel::<Job>();
        let cfg = WriterConfig {
            max_batch: config.max_batch,
            max_field_bytes: config.max_field_bytes,
        };
        let handle = std::thread::Builder::new()
            .name("outpost-store-writer".to_owned())
            .spawn(move || writer::run(conn, wrx, cfg, start_seq))
            .map_err(|error| Error::Io {
                action: "spawn writer thread for",
                path: path.clone().unwrap_or_default(),
                error,
            })?;
        threads.push(handle);

        let store = Store {
            inner: Arc::new(Inner {
                writer: Some(wtx),
                reader,
                threads,
                path,
                durability: config.durability,
            }),
        };
        if retention_set {
            // Runs in the background; its outcome is not needed here.
            drop(store.apply_retention(crate::model::now_ms()));
        }
        Ok(store)
    }

    /// The database file, or None for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// What acknowledgements promise for this store.
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }

    fn write<T: Send + 'static>(&self, op: Op, map: fn(Outcome) -> T) -> Pending<T> {
        let (tx, rx) = oneshot::channel();
        let done = Box::new(move |r: Result<Outcome>| {
            let _ = tx.send(r.map(map));
        });
        if let Some(w) = &self.inner.writer {
            // On failure the job (and its sender) is dropped: the Pending reports Stopped.
            let _ = w.send(Job::Write { op, done });
        }
        Pending {
            rx,
            worker: "writer",
        }
    }

    /// Runs `f` on a read connection, off the caller's thread. Reads see every write whose
    /// acknowledgement has arrived (for in-memory stores: every write queued before).
    pub fn read<T, F>(&self, f: F) -> Pending<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job = move |conn: &Connection| {
            let _ = tx.send(f(conn));
        };
        match (&self.inner.reader, &self.inner.writer) {
            (Some(r), _) => {
                let _ = r.send(Box::new(job));
                Pending {
                    rx,
                    worker: "reader",
                }
            }
            (None, Some(w)) => {
                let _ = w.send(Job::Read(Box::new(job)));
                Pending {
                    rx,
                    worker: "writer",
                }
            }
            (None, None) => Pending {
                rx,
                worker: "writer",
            },
        }
    }

    // ---- writes -----------------------------------------------------------------------

    /// Records a new conversation.
    pub fn begin_conversation(&self, c: NewConversation) -> Pending<()> {
        self.write(Op::BeginConversation(c), |_| ())
    }

    /// Records when a conversation ended.
    pub fn end_conversation(&self, id: ConversationId, at: Millis) -> Pending<()> {
        self.write(Op::EndConversation { id, at }, |_| ())
    }

    /// Sets (or clears) a conversation's title.
    pub fn set_conversation_title(&self, id: ConversationId, title: Option<String>) -> Pending<()> {
        self.write(Op::SetTitle { id, title }, |_| ())
    }

    /// Records a whole message, or replaces the text of one already recorded with this id.
    pub fn log_message(&self, m: NewMessage) -> Pending<()> {
        self.write(Op::Message(m), |_| ())
    }

    /// Appends a streamed delta to an assistant message (creating it on the first delta).
    /// Each delta rewrites the message's search-index entry; for long streams prefer one
    /// [`Store::log_message`] with the final text.
    pub fn append_message_delta(&self, d: MessageDelta) -> Pending<()> {
        self.write(Op::Delta(d), |_| ())
    }

    /// Records a status change.
    pub fn log_status(&self, s: NewStatusChange) -> Pending<()> {
        self.write(Op::Status(s), |_| ())
    }

    /// Records a step of a tool call's lifecycle. Out-of-order steps (a result for an
    /// unknown call, `Running` after `Completed`) are refused with a clear error.
    pub fn log_tool_event(&self, e: ToolCallEvent) -> Pending<()> {
        self.write(Op::Tool(e), |_| ())
    }

    /// Records a consent decision.
    pub fn log_consent(&self, c: NewConsent) -> Pending<()> {
        self.write(Op::Consent(c), |_| ())
    }

    /// Records a protocol error.
    pub fn log_protocol_error(&self, e: NewProtocolError) -> Pending<()> {
        self.write(Op::ProtocolError(e), |_| ())
    }

    /// Records a file the user gave the assistant (its bytes only when given and at most
    /// [`MAX_ATTACHMENT_DATA`]). A repeated id is ignored.
    pub fn log_attachment(&self, a: NewAttachment) -> Pending<()> {
        self.write(Op::Attachment(a), |_| ())
    }

    /// Deletes a conversation and everything in it (search index included). Resolves to
    /// whether it existed.
    pub fn delete_conversation(&self, id: ConversationId) -> Pending<bool> {
        self.write(Op::DeleteConversation(id), |o| {
            matches!(o, Outcome::Deleted(true))
        })
    }

    /// Sets the retention period (None keeps everything; 0 is refused). The store applies
    /// it when opened and hourly while open; call [`Store::apply_retention`] to apply now.
    pub fn set_retention_days(&self, days: Option<u32>) -> Pending<()> {
        self.write(Op::SetRetention(days), |_| ())
    }

    /// Deletes conversations in which nothing happened during the retention period
    /// before `now`, and protocol errors outside conversations older than that.
    pub fn apply_retention(&self, now: Millis) -> Pending<RetentionReport> {
        self.write(Op::ApplyRetention { now }, |o| match o {
            Outcome::Retention(r) => r,
            _ => RetentionReport::default(),
        })
    }

    /// Resolves once every write queued before it is committed.
    pub fn flush(&self) -> Pending<()> {
        self.write(Op::Flush, |_| ())
    }

    // ---- queries ----------------------------------------------------------------------

    /// One conversation's header.
    pub fn conversation(&self, id: ConversationId) -> Pending<Option<Conversation>> {
        self.read(move |c| query::conversation(c, &id))
    }

    /// Conversations, newest first. `limit` 0 means 50; pass a page's `next` as `before`.
    pub fn list_conversations(
        &self,
        limit: u32,
        before: Option<Cursor>,
    ) -> Pending<ConversationPage> {
        self.read(move |c| query::list_conversations(c, limit, before))
    }

    /// One conversation's full timeline.
    pub fn timeline(&self, id: ConversationId) -> Pending<Timeline> {
        self.read(move |c| query::timeline(c, &id))
    }

    /// Full-text search across messages and tool calls.
    pub fn search(&self, q: SearchQuery) -> Pending<Vec<SearchHit>> {
        self.read(move |c| search::search(c, &q))
    }

    /// The tool-call audit log.
    pub fn audit(&self, q: AuditQuery) -> Pending<AuditPage> {
        self.read(move |c| query::audit(c, &q))
    }

    /// The retention setting.
    pub fn retention_days(&self) -> Pending<Option<u32>> {
        self.read(query::retention_days)
    }

    /// The export document for `scope` (for callers that want the data, not text).
    pub fn export_document(&self, scope: ExportScope) -> Pending<export::ExportDocument> {
        self.read(move |c| export::document(c, &scope, crate::model::now_ms()))
    }

    /// Exports `scope` as JSON or Markdown text.
    pub fn export(&self, scope: ExportScope, format: ExportFormat) -> Pending<String> {
        self.read(move |c| {
            let doc = export::document(c, &scope, crate::model::now_ms())?;
            export::render(&doc, format)
        })
    }

    /// Checks the file: `PRAGMA integrity_check` plus FTS5's own check that both search
    /// indexes match their tables. Resolves to the problems found (empty when sound). Runs
    /// on the writer's connection, after every write queued before it.
    pub fn integrity_check(&self) -> Pending<Vec<String>> {
        self.on_writer(|c| {
            let mut problems: Vec<String> = c
                .prepare("PRAGMA integrity_check")
                .and_then(|mut s| {
                    s.query_map([], |r| r.get::<_, String>(0))?
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .ctx(|| "run integrity check".to_owned())?
                .into_iter()
                .filter(|r| r != "ok")
                .collect();
            for fts in ["messages_fts", "tool_calls_fts"] {
                // rank = 1 also compares the index with the external content table.
                let sql = format!("INSERT INTO {fts} ({fts}, rank) VALUES ('integrity-check', 1)");
                if let Err(e) = c.execute(&sql, []) {
                    problems.push(format!("{fts}: {e}"));
                }
            }
            Ok(problems)
        })
    }

    /// Runs `f` on the writer's connection between batches.
    fn on_writer<T, F>(&self, f: F) -> Pending<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        if let Some(w) = &self.inner.writer {
            let _ = w.send(Job::Read(Box::new(move |conn: &Connection| {
                let _ = tx.send(f(conn));
            })));
        }
        Pending {
            rx,
            worker: "writer",
        }
    }
}

/// The fixture the integration tests use too (a conversation with one of everything).
#[cfg(test)]
#[path = "../tests/fixture/mod.rs"]
mod fixture;

#[cfg(test)]
mod tests {
    //! What needs the writer's own connection (`on_writer`): a search index out of step, a
    //! full disk. The store's other tests use only the public API and live in
    //! `tests/store.rs`.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::fixture::*;
    use super::*;
    use crate::model::*;

    #[test]
    fn integrity_check_notices_a_search_index_out_of_step() {
        let store = Store::open_in_memory().unwrap();
        populate(&store);
        fts_integrity(&store);
        store
            .on_writer(|c| {
                c.execute_batch("DROP TRIGGER messages_fts_delete; DELETE FROM messages;")
                    .ctx(|| "sabotage".to_owned())
            })
            .wait()
            .unwrap();
        let problems = store.integrity_check().wait().unwrap();
        assert!(
            problems.iter().any(|p| p.starts_with("messages_fts")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_full_disk_fails_the_writes_it_hits_and_nothing_else() {
        let store = Store::open_in_memory().unwrap();
        let cid = conv(&store, "c", T0);
        store
            .log_message(msg(&cid, "before", Role::User, "kept", T0))
            .wait()
            .unwrap();
        // Cap the database at its current size: the next page allocation fails (SQLITE_FULL).
        store
            .on_writer(|c| {
                c.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))
                    .and_then(|n| {
                        c.query_row(&format!("PRAGMA max_page_count = {n}"), [], |_| Ok(()))
                    })
                    .ctx(|| "limit size".to_owned())
            })
            .wait()
            .unwrap();
        let big = "many words here ".repeat(20_000);
        let acks: Vec<_> = (0..5)
            .map(|i| store.log_message(msg(&cid, &format!("big{i}"), Role::User, &big, T0 + 1)))
            .collect();
        let results: Vec<_> = acks.into_iter().map(|a| a.wait()).collect();
        assert!(results.iter().all(|r| r.is_err()), "{results:?}");
        store
            .on_writer(|c| {
                c.query_row("PRAGMA max_page_count = 1000000", [], |_| Ok(()))
                    .ctx(|| "lift limit".to_owned())
            })
            .wait()
            .unwrap();
        store
            .log_message(msg(&cid, "after", Role::User, "also kept", T0 + 2))
            .wait()
            .unwrap();
        assert_eq!(message_ids(&store, &cid), ["before", "after"]);
        fts_integrity(&store);
    }
}
