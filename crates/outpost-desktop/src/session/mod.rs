//! A session in the app. One owner, [`Sessions`], holds everything that lives and dies with
//! a session (the core's session, its MCP servers and their roots task, the local demo's
//! children when it is the demo's), and one place starts and ends them together
//! (`lifetime`: `Desktop::start_session`, `Desktop::end_session`). `live` folds the
//! session's core events into the view the UI shows; `commands` and `chat` are `Desktop`'s
//! `session_*` and `chat_*` commands.
//!
//! What outlives a session on purpose stays on `Desktop`: the live view and its event
//! sink (the transcript stays on screen after a disconnect, and the next session continues
//! its conversation), the voice hub (the chosen devices; a session is attached to it and
//! detached again), and the elicitation queue (emptied whenever servers stop).

mod chat;
mod commands;
mod lifetime;
pub mod live;

pub use chat::check_link;

use std::sync::{Arc, Mutex};

use outpost_core::Session;

use crate::demo::{Demo, DemoPrograms};
use crate::mcp::SessionServers;
use outpost_sync::lock;

/// What one session started and ends with it.
#[derive(Default)]
pub(crate) struct Pieces {
    /// The core's session, once joined.
    pub(super) session: Option<Arc<Session>>,
    /// Its MCP servers: started before the join (their tools go into the hello).
    pub(super) servers: Option<SessionServers>,
    /// The local demo's children, when the session is the demo's.
    pub(super) demo: Option<Demo>,
}

#[derive(Default)]
struct State {
    now: Pieces,
    /// The demo's programs when set by `Desktop::set_demo_programs`; else looked up at
    /// each start.
    demo_programs: Option<DemoPrograms>,
}

/// The owner of a session's lifetime.
#[derive(Default)]
pub(crate) struct Sessions {
    /// Taken for a whole start (across the join) and to hand over a session's pieces, so
    /// a start, an end and a look at the session never interleave: asked for during a
    /// start, the session is the one that start joins. It guards no data of its own.
    pub(super) turn: tokio::sync::Mutex<()>,
    /// Counts the ends asked for: a start whose join is still under way when it moves
    /// gives the join up, so a disconnect never waits for a connect that hangs.
    pub(super) ends: tokio::sync::watch::Sender<u64>,
    /// The pieces (read without waiting by the commands that show the MCP servers).
    state: Mutex<State>,
}

impl Sessions {
    pub(super) fn take(&self) -> Pieces {
        std::mem::take(&mut lock(&self.state).now)
    }

    /// A start's first pieces, before the join: its servers and demo.
    pub(crate) fn begin(&self, servers: Option<SessionServers>, demo: Option<Demo>) {
        lock(&self.state).now = Pieces {
            session: None,
            servers,
            demo,
        };
    }

    /// The running session's MCP host.
    pub(crate) fn mcp_host(&self) -> Option<outpost_mcp::McpHost> {
        lock(&self.state)
            .now
            .servers
            .as_ref()
            .map(|s| s.host.clone())
    }

    /// The running session's MCP servers, taken to stop them.
    pub(crate) fn take_servers(&self) -> Option<SessionServers> {
        lock(&self.state).now.servers.take()
    }

    pub(crate) fn set_demo_programs(&self, programs: DemoPrograms) {
        lock(&self.state).demo_programs = Some(programs);
    }

    pub(crate) fn demo_programs(&self) -> Option<DemoPrograms> {
        lock(&self.state).demo_programs.clone()
    }
}
