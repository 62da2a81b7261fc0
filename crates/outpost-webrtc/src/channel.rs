//! Data channels: LiveKit's two kinds (`_reliable`, `_lossy`) and a handle that reads
//! a channel's events and writes messages with `webrtc`'s send-buffer back-pressure.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use webrtc::data_channel::{DataChannelEvent, RTCDataChannelInit};

use crate::error::{Error, Result};

/// LiveKit's two data channels, told apart by their labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    /// `_reliable`: ordered, retransmitted.
    Reliable,
    /// `_lossy`: unordered, never retransmitted.
    Lossy,
}

impl ChannelKind {
    /// The channel's label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Reliable => "_reliable",
            Self::Lossy => "_lossy",
        }
    }

    /// The kind a label names; `None` for channels LiveKit does not use.
    pub fn from_label(label: &str) -> Option<Self> {
        match label {
            "_reliable" => Some(Self::Reliable),
            "_lossy" => Some(Self::Lossy),
            _ => None,
        }
    }

    pub(crate) fn init(self) -> RTCDataChannelInit {
        match self {
            Self::Reliable => RTCDataChannelInit {
                ordered: true,
                ..Default::default()
            },
            Self::Lossy => RTCDataChannelInit {
                ordered: false,
                max_retransmits: Some(0),
                ..Default::default()
            },
        }
    }
}

/// What a data channel reports to its reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelEvent {
    /// A channel we created has opened (channels the remote side opens arrive open and
    /// report no `Open`).
    Open,
    /// A binary or text message.
    Message(Bytes),
    /// The channel has closed; nothing follows.
    Closed,
}

/// One data channel. Cloning shares the channel. Events are read by one reader
/// ([`DataChannel::next_event`], or its shorthands [`DataChannel::recv`] and
/// [`DataChannel::opened`]); any clone may write.
#[derive(Clone)]
pub struct DataChannel {
    dc: Arc<dyn webrtc::data_channel::DataChannel>,
    kind: ChannelKind,
}

impl std::fmt::Debug for DataChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataChannel")
            .field("id", &self.dc.id())
            .field("kind", &self.kind)
            .finish()
    }
}

impl DataChannel {
    pub(crate) fn new(dc: Arc<dyn webrtc::data_channel::DataChannel>, kind: ChannelKind) -> Self {
        Self { dc, kind }
    }

    /// Which of LiveKit's channels this is.
    pub fn kind(&self) -> ChannelKind {
        self.kind
    }

    /// The next event; [`ChannelEvent::Closed`] once the channel is gone (and ever after).
    pub async fn next_event(&self) -> ChannelEvent {
        loop {
            match self.dc.poll().await {
                Some(DataChannelEvent::OnOpen) => return ChannelEvent::Open,
                Some(DataChannelEvent::OnMessage(msg)) => {
                    return ChannelEvent::Message(msg.data.freeze());
                }
                Some(DataChannelEvent::OnClose) | None => return ChannelEvent::Closed,
                // Closing, errors and buffered-amount notices: `send` already waits
                // for room, and a closing channel ends with OnClose.
                Some(_) => {}
            }
        }
    }

    /// The next message; `None` once the channel has closed.
    pub async fn recv(&self) -> Option<Bytes> {
        loop {
            match self.next_event().await {
                ChannelEvent::Message(data) => return Some(data),
                ChannelEvent::Closed => return None,
                ChannelEvent::Open => {}
            }
        }
    }

    /// Waits until a channel we created opens; false if it closed first.
    pub async fn opened(&self) -> bool {
        loop {
            match self.next_event().await {
                ChannelEvent::Open => return true,
                ChannelEvent::Closed => return false,
                // A message before Open does not happen on a channel we created;
                // nothing is lost that a caller waiting for Open could have read.
                ChannelEvent::Message(_) => {}
            }
        }
    }

    /// Waits until the send buffer is under its limit.
    pub async fn writable(&self) -> Result<()> {
        self.dc
            .writable()
            .await
            .map_err(|e| Error::Webrtc(format!("data channel {}: {e}", self.kind.label())))
    }

    /// Hands one message to SCTP; waits while the send buffer is over its limit, which
    /// turns a slow receiver into back-pressure on the sender.
    pub async fn send(&self, data: &[u8]) -> Result<()> {
        self.dc
            .send(BytesMut::from(data))
            .await
            .map_err(|e| Error::Webrtc(format!("data channel {} send: {e}", self.kind.label())))
    }

    /// Hands one message to SCTP unless the send buffer is full (then fails at once).
    pub async fn try_send(&self, data: &[u8]) -> Result<()> {
        self.dc
            .try_send(BytesMut::from(data))
            .await
            .map_err(|e| Error::Webrtc(format!("data channel {} send: {e}", self.kind.label())))
    }

    /// Bytes handed to SCTP that the other side has not acknowledged yet.
    pub async fn outstanding_bytes(&self) -> Result<usize> {
        self.dc
            .outstanding_bytes()
            .await
            .map_err(|e| Error::Webrtc(format!("data channel {}: {e}", self.kind.label())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_and_unknown_labels_are_not_livekit_channels() {
        for kind in [ChannelKind::Reliable, ChannelKind::Lossy] {
            assert_eq!(ChannelKind::from_label(kind.label()), Some(kind));
        }
        assert_eq!(ChannelKind::from_label("chat"), None);
        assert_eq!(ChannelKind::from_label(""), None);
        let lossy = ChannelKind::Lossy.init();
        assert!(!lossy.ordered && lossy.max_retransmits == Some(0));
        let reliable = ChannelKind::Reliable.init();
        assert!(reliable.ordered && reliable.max_retransmits.is_none());
    }
}
