//! What ICE works with: the STUN and TURN servers LiveKit hands out, and the kinds of
//! path a connection can take.

/// A STUN or TURN server from LiveKit's join response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IceServer {
    /// `stun:` / `turn:` / `turns:` URLs.
    pub urls: Vec<String>,
    /// TURN username (empty for STUN).
    pub username: String,
    /// TURN credential (empty for STUN).
    pub credential: String,
}

/// How a connected peer connection reaches the other side: the transport of its
/// selected ICE candidate pair, in libwebrtc's order of preference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathKind {
    /// Direct, over UDP (host or server-reflexive candidate).
    Udp,
    /// Direct, over TCP (ICE/TCP, RFC 6544).
    Tcp,
    /// Relayed by a TURN server reached over UDP.
    TurnUdp,
    /// Relayed by a TURN server reached over TCP.
    TurnTcp,
    /// Relayed by a TURN server reached over TLS.
    TurnTls,
}

impl PathKind {
    /// Whether a TURN server relays the traffic.
    pub fn is_relayed(self) -> bool {
        matches!(self, Self::TurnUdp | Self::TurnTcp | Self::TurnTls)
    }

    /// A short name for logs and the user: `UDP`, `TCP`, `TURN/UDP`, `TURN/TCP`, `TURN/TLS`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "UDP",
            Self::Tcp => "TCP",
            Self::TurnUdp => "TURN/UDP",
            Self::TurnTcp => "TURN/TCP",
            Self::TurnTls => "TURN/TLS",
        }
    }
}
