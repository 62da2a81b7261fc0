//! Outpost messages over a LiveKit room: one reliable packet on topic `outpost` up to
//! `MAX_PACKET_BYTES`, one byte stream on the same topic above it (docs/PROTOCOL.md §1).

use outpost_livekit::{DataOptions, Room, StreamOptions, StreamReader};
use outpost_protocol::{DecodeError, MAX_MESSAGE_BYTES, MAX_PACKET_BYTES, Message, TOPIC, encode};

use crate::error::Result;

/// Sends Outpost messages to one participant.
#[derive(Debug, Clone)]
pub struct Link {
    room: Room,
}

impl Link {
    /// A link over `room`.
    pub fn new(room: Room) -> Self {
        Self { room }
    }

    /// Encodes and sends `msg` to `identity`. Awaiting it before the next send keeps the
    /// protocol's ordering (a stream's chunks are queued before this returns).
    pub async fn send(&self, identity: &str, msg: &Message) -> Result<()> {
        let bytes = encode(msg)?;
        if bytes.len() <= MAX_PACKET_BYTES {
            self.room
                .send_data(bytes, DataOptions::topic(TOPIC).to(identity))
                .await?;
        } else {
            let opts = StreamOptions {
                topic: TOPIC.to_owned(),
                destination_identities: vec![identity.to_owned()],
                mime_type: Some("application/msgpack".to_owned()),
                ..StreamOptions::default()
            };
            self.room.send_bytes(&bytes, opts).await?;
        }
        Ok(())
    }
}

/// Why an incoming stream did not yield a message's bytes.
#[derive(Debug)]
pub enum StreamFailure {
    /// Larger than `MAX_MESSAGE_BYTES` (announced or actual): answer `message_too_large`.
    TooLarge(u64),
    /// The stream broke (sender cancelled or left).
    Broken(String),
}

impl StreamFailure {
    /// The protocol error to send back, if any.
    pub fn to_decode_error(&self) -> Option<DecodeError> {
        match self {
            Self::TooLarge(size) => Some(DecodeError::TooLarge {
                size: usize::try_from(*size).unwrap_or(usize::MAX),
                max: MAX_MESSAGE_BYTES,
            }),
            Self::Broken(_) => None,
        }
    }
}

/// Reads a whole incoming stream, refusing more than `MAX_MESSAGE_BYTES`.
pub async fn read_stream(mut reader: StreamReader) -> std::result::Result<Vec<u8>, StreamFailure> {
    let limit = MAX_MESSAGE_BYTES as u64;
    if let Some(n) = reader.info.total_length.filter(|n| *n > limit) {
        return Err(StreamFailure::TooLarge(n));
    }
    let mut out = Vec::new();
    while let Some(chunk) = reader.next_chunk().await {
        let chunk = chunk.map_err(|e| StreamFailure::Broken(e.to_string()))?;
        if (out.len() + chunk.len()) as u64 > limit {
            return Err(StreamFailure::TooLarge((out.len() + chunk.len()) as u64));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}
