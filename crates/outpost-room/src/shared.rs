//! What every session of the server shares: its settings ([`Config`]) and its state
//! ([`Shared`]), apart from the server that serves them so a session needs no import of it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::auth::Keys;
use crate::room::Registry;
use crate::tasks::Tasks;
use crate::tls::TlsIdentity;
use crate::wire::WireConfig;

/// Server settings. `Default` matches `outpost-room serve` without options.
#[derive(Debug, Clone)]
pub struct Config {
    /// API key pair tokens must be signed with.
    pub keys: Keys,
    /// How often clients ping (sent in the join response).
    pub ping_interval: Duration,
    /// Silence after which a participant is removed.
    pub ping_timeout: Duration,
    /// How long a room lives after its last participant left.
    pub empty_timeout: Duration,
    /// How long a participant may take to get its peer connection up.
    pub connect_timeout: Duration,
    /// Largest signaling frame accepted, bytes.
    pub max_signal_message: usize,
    /// WebRTC settings. `udp_ip` is replaced by the bind address's IP when unspecified
    /// here and specified there.
    pub wire: WireConfig,
    /// How long a participant whose signaling WebSocket dropped stays in its room
    /// (peer connections and data relay intact) for the client to resume it with
    /// `reconnect=1`. Zero (the default) turns resume off: the session ends with its
    /// socket and `reconnect=1` answers 404, so clients rejoin in full.
    pub resume_window: Duration,
    /// Send `subscriber_primary = true` (what livekit-server does for clients that can
    /// subscribe): we offer each client a subscriber peer connection right after the
    /// join, with our `_reliable` / `_lossy` channels on it, and deliver data on those;
    /// clients still send on their publisher connection. Off by default.
    pub subscriber_primary: bool,
    /// Serve `wss://` with this certificate and key instead of plain `ws://`.
    pub tls: Option<TlsIdentity>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            keys: Keys::dev(),
            ping_interval: Duration::from_secs(5),
            ping_timeout: Duration::from_secs(15),
            empty_timeout: Duration::from_secs(20),
            connect_timeout: Duration::from_secs(20),
            max_signal_message: 256 * 1024,
            wire: WireConfig {
                udp_ip: std::net::Ipv4Addr::UNSPECIFIED.into(),
                ..WireConfig::default()
            },
            resume_window: Duration::ZERO,
            subscriber_primary: false,
            tls: None,
        }
    }
}

/// State shared by all sessions.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) registry: Arc<Registry>,
    pub(crate) tasks: Tasks,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) node_id: String,
}
