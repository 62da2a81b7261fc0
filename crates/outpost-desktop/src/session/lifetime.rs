//! The one place a session starts and ends: [`Desktop::start_session`] and
//! [`Desktop::end_session`] start and end a session's pieces ([`super::Sessions`])
//! together, and a session that ends by itself ends them too; its core events go to the
//! live view and to notifications on the way.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use outpost_core::{ConnectOptions, Credentials, Session};
use outpost_store::now_ms;

use super::Pieces;
use crate::demo::Demo;
use crate::desktop::Desktop;
use crate::error::{DesktopError, Result};
use outpost_sync::lock;

impl Desktop {
    /// The joined session (waits for a start in progress).
    pub(crate) async fn session(&self) -> Result<Arc<Session>> {
        let _turn = self.inner.sessions.turn.lock().await;
        lock(&self.inner.sessions.state)
            .now
            .session
            .clone()
            .ok_or(DesktopError::NotConnected)
    }

    /// Starts a session: ends the one before with all its pieces, starts the MCP servers,
    /// joins, and follows the session's events until it ends. `demo` is the local demo
    /// the session talks to; it ends with the session.
    pub(crate) async fn start_session(
        &self,
        creds: Credentials,
        room: Option<String>,
        disabled_tools: Vec<String>,
        demo: Option<Demo>,
    ) -> Result<()> {
        let sessions = &self.inner.sessions;
        // An end asked for after this point gives this start up (one asked for before
        // it does not).
        let mut ends = sessions.ends.subscribe();
        ends.borrow_and_update();
        let turn = sessions.turn.lock().await;
        self.end_pieces(sessions.take()).await;
        {
            let mut live = lock(&self.inner.live);
            let ev = live.state.connecting(None);
            live.emit(ev);
        }
        let servers = self.start_mcp().await;
        let mcp = servers.as_ref().map(|s| s.host.clone());
        sessions.begin(servers, demo);
        let conversation_id = lock(&self.inner.live)
            .state
            .conversation_id()
            .map(str::to_owned);
        let mut opts = ConnectOptions::new(creds);
        opts.consent_ui = true;
        opts.room_name = room;
        opts.conversation_id = conversation_id;
        opts.disabled_tools = disabled_tools;
        opts.client_version = env!("CARGO_PKG_VERSION").into();
        opts.mcp = mcp;
        // The assistant's audio is subscribed; it plays only while voice is on.
        opts.voice = true;
        let joined = tokio::select! {
            r = self.inner.core.connect(opts) => r,
            _ = ends.changed() => {
                // A disconnect while joining: the join is dropped (its room leaves), and
                // the disconnect, waiting for the turn, says so to the UI.
                self.end_pieces(sessions.take()).await;
                return Err(DesktopError::Cancelled(
                    "Disconnected before the connection was made.".into(),
                ));
            }
        };
        let (session, mut events) = match joined {
            Ok(x) => x,
            Err(e) => {
                self.end_pieces(sessions.take()).await;
                let msg = format!("Could not connect: {e}");
                let mut live = lock(&self.inner.live);
                let ev = live.state.failed(msg.clone());
                live.emit(ev);
                return Err(DesktopError::Internal(msg));
            }
        };
        let session = Arc::new(session);
        lock(&sessions.state).now.session = Some(Arc::clone(&session));
        // Voice joins the session before the turn is given up: a disconnect waiting for
        // the turn then finds voice attached and detaches it with the rest.
        self.inner.voice.attach(Arc::clone(&session));
        drop(turn);
        let me = self.clone();
        tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                me.on_core_event(ev);
            }
            // The session ended (left, refused, or the link gave up): its pieces end with
            // it, unless a disconnect or a newer start has taken them already.
            let sessions = &me.inner.sessions;
            let _turn = sessions.turn.lock().await;
            let ours = lock(&sessions.state)
                .now
                .session
                .as_ref()
                .is_some_and(|s| Arc::ptr_eq(s, &session));
            if ours {
                let mut pieces = sessions.take();
                // Over already: nothing to leave.
                pieces.session = None;
                me.inner.voice.detach().await;
                me.end_pieces(pieces).await;
            }
        });
        Ok(())
    }

    /// Ends the running session, if any, with all its pieces (`session_disconnect`).
    pub(crate) async fn end_session(&self) {
        // A start still joining gives up at once instead of holding the turn until its
        // connect times out.
        self.inner.sessions.ends.send_modify(|n| *n += 1);
        // The microphone goes off at once, even while a start still holds the turn.
        self.inner.voice.stop().await;
        let pieces = {
            let _turn = self.inner.sessions.turn.lock().await;
            let pieces = self.inner.sessions.take();
            // Voice lets go of the session it was attached to (voice then says "Not
            // connected" rather than publishing to a session that has left).
            self.inner.voice.detach().await;
            pieces
        };
        self.end_pieces(pieces).await;
        let mut live = lock(&self.inner.live);
        let ev = live.state.disconnected(None);
        live.emit(ev);
    }

    /// Leaves the room, stops the MCP servers and the demo's children.
    async fn end_pieces(&self, pieces: Pieces) {
        if let Some(s) = pieces.session {
            let _ = s.leave().await;
        }
        self.stop_mcp(pieces.servers);
        if let Some(d) = pieces.demo {
            d.stop().await;
        }
    }

    /// One core event: into the live view and out to the UI; a notification when the
    /// window is away and the user wants one.
    fn on_core_event(&self, ev: outpost_core::UiEvent) {
        let now = now_ms();
        // The question's deadline goes with it: a user away from the window (or with it
        // closed to the tray) learns how long it waits before it is denied.
        let consent_summary = match &ev {
            outpost_core::UiEvent::ConsentRequested(p) => Some(format!(
                "{} — denied in {} s unless you answer.",
                p.summary,
                p.expires_in_ms.div_ceil(1000)
            )),
            _ => None,
        };
        let finished = {
            let mut live = lock(&self.inner.live);
            let (out, finished) = live.state.apply(ev, now);
            for e in out {
                live.emit(e);
            }
            finished
        };
        if self.inner.focused.load(Ordering::Relaxed) {
            return;
        }
        let n = self.config().notifications;
        if !n.enabled {
            return;
        }
        if let Some(summary) = consent_summary.filter(|_| n.on_consent) {
            self.inner
                .notifier
                .notify("Outpost needs your permission", &summary);
        }
        if let Some(f) =
            finished.filter(|f| n.on_long_task && f.took_ms >= i64::from(n.long_task_secs) * 1000)
        {
            let how = if f.success { "finished" } else { "failed" };
            self.inner.notifier.notify(
                &format!("{} {how}", f.tool),
                &format!("It took {} s.", f.took_ms / 1000),
            );
        }
    }
}
