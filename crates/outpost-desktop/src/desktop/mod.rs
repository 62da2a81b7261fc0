//! [`Desktop`]: the handle that ties the domains together, one method per command of
//! ui/CONTRACT.md. Each domain keeps its commands in its own folder (`session`, `consent`,
//! `settings`, `history`, `mcp`, `voice`); the two small ones that need no folder are
//! here (`tools`, `system`).

mod system;
mod tools;

pub use system::BACKGROUND_FLAG;

use outpost_sync::lock;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use outpost_core::{Core, PolicySource, ToolsConfig};
use outpost_protocol::ToolDescriptor;
use outpost_store::now_ms;

use crate::contract::AppEvent;
use crate::error::Result;
use crate::paths::Paths;
use crate::secrets::SecretStore;
use crate::session::{Sessions, live::LiveState};
use crate::settings::AppConfig;

/// Receives the UI events (the Tauri channel of `session_subscribe`).
pub type EventSink = Box<dyn Fn(AppEvent) + Send + Sync>;

/// Sees every UI event too, after the UI (the tray).
pub type EventWatcher = Box<dyn Fn(&AppEvent) + Send + Sync>;

/// Shows desktop notifications (notify-rust in the shell). Errors are the notifier's to
/// log: a missing notification daemon must not disturb the session.
pub trait Notifier: Send + Sync + std::fmt::Debug {
    /// Shows one notification; clicking it should bring the app forward.
    fn notify(&self, title: &str, body: &str);
}

/// The environment variable that supplies a token when the keyring has none (headless
/// runs, CI). Never written anywhere.
pub const TOKEN_ENV: &str = "OUTPOST_LIVEKIT_TOKEN";

pub(crate) struct Live {
    pub(crate) state: LiveState,
    pub(crate) sink: Option<EventSink>,
    pub(crate) watchers: Vec<EventWatcher>,
}

impl Live {
    pub(crate) fn emit(&self, ev: AppEvent) {
        for w in &self.watchers {
            w(&ev);
        }
        if let Some(sink) = &self.sink {
            sink(ev);
        }
    }
}

pub(crate) struct Inner {
    pub(crate) core: Core,
    pub(crate) paths: Paths,
    pub(crate) config: Mutex<AppConfig>,
    pub(crate) secrets: Arc<dyn SecretStore>,
    pub(crate) notifier: Arc<dyn Notifier>,
    /// The live view and where its events go: it outlives a session (the transcript stays
    /// on screen, and the next session continues its conversation).
    pub(crate) live: Mutex<Live>,
    /// The running session and everything that ends with it (crate::session).
    pub(crate) sessions: Sessions,
    /// MCP elicitation forms waiting for the user.
    pub(crate) elicitations: Arc<crate::mcp::Elicitations>,
    /// The tools each MCP server listed last (Settings → Tool servers' per-tool rules).
    pub(crate) mcp_tools: crate::mcp::ToolLists,
    /// Whether each HTTP server has a stored OAuth sign-in, as last read from the keyring
    /// or set by a sign-in or sign-out here: the pane's list, polled while it is open, must
    /// not ask the keyring (which may prompt to unlock) every time.
    pub(crate) mcp_sign_ins: crate::mcp::SignIns,
    pub(crate) focused: AtomicBool,
    pub(crate) tools: Vec<ToolDescriptor>,
    /// A problem found at start (a damaged settings file), told to the first subscriber.
    pub(crate) startup_error: Mutex<Option<String>>,
    _watcher: Option<outpost_policy::PolicyWatcher>,
    /// Voice: the devices and the microphone track (crate::voice).
    pub(crate) voice: Arc<crate::voice::VoiceHub>,
    /// Files that go with the next message (crate::attachments).
    pub(crate) staged: crate::attachments::StagedFiles,
    /// Whether the system-wide shortcut works, and in what words (the shell sets it).
    pub(crate) shortcut_status: Mutex<(bool, String)>,
}

/// The desktop app's backend. Cheap to clone; all clones share one state.
#[derive(Clone)]
pub struct Desktop {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Desktop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Desktop")
            .field("paths", &self.inner.paths)
            .finish_non_exhaustive()
    }
}

impl Desktop {
    /// Opens the store, the policy (`policy.toml`, created with commented defaults) and
    /// the settings. A damaged settings file leaves the defaults in force (the file is not
    /// overwritten until the user saves) and is reported to the UI.
    pub fn open(
        paths: Paths,
        secrets: Arc<dyn SecretStore>,
        notifier: Arc<dyn Notifier>,
    ) -> Result<Self> {
        // The config folder holds the settings, the policy and mcp.toml: the user's alone,
        // also when an older version made it readable by everyone.
        paths.create_private_dirs()?;
        let (config, startup_error) = match AppConfig::load(&paths.settings_file()) {
            Ok(c) => (c, None),
            Err(e) => (AppConfig::default(), Some(e.to_string())),
        };
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        let tools = ToolsConfig {
            policy: PolicySource::File(paths.policy_file()),
            home,
            protected: vec![paths.config_dir.clone()],
        };
        let core = Core::open(Some(paths.data_dir.clone()), tools)?;
        let watcher = match core.permissions().policy().watch() {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "policy file changes will not be picked up");
                None
            }
        };
        let catalogue = core.builtin_tools()?;
        let mut state = LiveState::default();
        state.set_tools(&catalogue);
        if config.retention_days > 0 {
            // Apply the retention once at start (the writer also keeps the setting).
            let store = core.store().clone();
            // Queued writes: dropping the handle does not cancel them.
            drop(store.set_retention_days(Some(config.retention_days)));
            drop(store.apply_retention(now_ms()));
        }
        Ok(Self {
            inner: Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| Inner {
                voice: {
                    let weak = weak.clone();
                    crate::voice::VoiceHub::new(
                        Arc::new(move |ev| {
                            if let Some(inner) = weak.upgrade() {
                                lock(&inner.live).emit(ev);
                            }
                        }),
                        config.voice_echo_cancellation != Some(false),
                    )
                },
                core,
                paths,
                config: Mutex::new(config),
                secrets,
                notifier,
                live: Mutex::new(Live {
                    state,
                    sink: None,
                    watchers: Vec::new(),
                }),
                sessions: Sessions::default(),
                elicitations: Arc::default(),
                mcp_tools: crate::mcp::ToolLists::default(),
                mcp_sign_ins: crate::mcp::SignIns::default(),
                focused: AtomicBool::new(true),
                tools: catalogue,
                startup_error: Mutex::new(startup_error),
                _watcher: watcher,
                staged: crate::attachments::StagedFiles::default(),
                shortcut_status: Mutex::new((false, "Not registered yet.".into())),
            }),
        })
    }

    /// The core (store and policy), for the shell's own needs.
    pub fn core(&self) -> &Core {
        &self.inner.core
    }

    /// Whether the window has the focus (notifications are shown only when not).
    pub fn set_focused(&self, focused: bool) {
        self.inner.focused.store(focused, Ordering::Relaxed);
    }

    /// Calls `watcher` with every UI event from now on (the tray), in order.
    pub fn watch(&self, watcher: EventWatcher) {
        lock(&self.inner.live).watchers.push(watcher);
    }

    pub(crate) fn config(&self) -> AppConfig {
        lock(&self.inner.config).clone()
    }
}
