//! Framing: whether a message goes as one data packet or as a byte stream, and keeping
//! incoming messages in the order their sender sent them when a stream is in between.

use std::collections::VecDeque;

use outpost_protocol::{EncodeError, MAX_PACKET_BYTES, Message, encode};

/// An encoded message, ready for the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// At most [`MAX_PACKET_BYTES`]: one reliable data packet on topic `outpost`.
    Packet(Vec<u8>),
    /// Larger: one LiveKit byte stream on topic `outpost`.
    Stream(Vec<u8>),
}

impl Frame {
    /// The encoded bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Frame::Packet(b) | Frame::Stream(b) => b,
        }
    }
}

/// Encodes (and validates) a message and picks its transport by size (PROTOCOL §1).
pub fn frame(msg: &Message) -> Result<Frame, EncodeError> {
    let bytes = encode(msg)?;
    Ok(if bytes.len() <= MAX_PACKET_BYTES {
        Frame::Packet(bytes)
    } else {
        Frame::Stream(bytes)
    })
}

/// A ticket for a stream being read, handed back with its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

/// What a slot finally holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A whole message's bytes.
    Bytes {
        /// Sender identity.
        sender: String,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// A stream larger than the message limit.
    TooLarge {
        /// Sender identity.
        sender: String,
        /// Size seen.
        size: usize,
    },
    /// A stream that broke off.
    Failed {
        /// Sender identity.
        sender: String,
        /// Why.
        reason: String,
    },
}

#[derive(Debug)]
enum Slot {
    Waiting,
    Ready(Inbound),
}

/// Incoming messages in arrival order: packets behind a stream still being read wait
/// for it, so a big message never overtakes a small one sent before it, or the reverse.
#[derive(Debug, Default)]
pub struct InboundOrder {
    slots: VecDeque<(u64, Slot)>,
    next: u64,
}

impl InboundOrder {
    /// A packet arrived.
    pub fn packet(&mut self, sender: String, bytes: Vec<u8>) {
        self.ready(Inbound::Bytes { sender, bytes });
    }

    /// Something already complete arrived.
    pub fn ready(&mut self, item: Inbound) {
        let n = self.bump();
        self.slots.push_back((n, Slot::Ready(item)));
    }

    /// A stream opened; its content comes later with [`InboundOrder::complete`].
    pub fn stream(&mut self) -> Ticket {
        let n = self.bump();
        self.slots.push_back((n, Slot::Waiting));
        Ticket(n)
    }

    /// A stream finished (or failed).
    pub fn complete(&mut self, ticket: Ticket, item: Inbound) {
        if let Some((_, slot)) = self.slots.iter_mut().find(|(n, _)| *n == ticket.0) {
            *slot = Slot::Ready(item);
        }
    }

    /// The next message whose turn it is.
    pub fn pop(&mut self) -> Option<Inbound> {
        if matches!(self.slots.front(), Some((_, Slot::Ready(_)))) {
            if let Some((_, Slot::Ready(item))) = self.slots.pop_front() {
                return Some(item);
            }
        }
        None
    }

    /// Streams still being read.
    pub fn waiting(&self) -> usize {
        self.slots
            .iter()
            .filter(|(_, s)| matches!(s, Slot::Waiting))
            .count()
    }

    fn bump(&mut self) -> u64 {
        let n = self.next;
        self.next += 1;
        n
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use outpost_protocol::{Map, ToolUseResult, Value};

    fn result_of(size: usize) -> Message {
        let mut m = Map::new();
        m.insert("content".into(), Value::String("x".repeat(size)));
        Message::ToolUseResult(ToolUseResult::ok("r1", m))
    }

    #[test]
    fn size_picks_the_transport() {
        assert!(matches!(frame(&result_of(10)).unwrap(), Frame::Packet(_)));
        assert!(matches!(
            frame(&result_of(MAX_PACKET_BYTES)).unwrap(),
            Frame::Stream(_)
        ));
        // The boundary itself: exactly MAX_PACKET_BYTES encoded bytes is still a packet.
        let overhead = frame(&result_of(0)).unwrap().bytes().len();
        let edge = MAX_PACKET_BYTES - overhead;
        // str8/str16 headers differ; find the largest payload that fits.
        let mut n = edge;
        while frame(&result_of(n)).unwrap().bytes().len() > MAX_PACKET_BYTES {
            n -= 1;
        }
        let f = frame(&result_of(n)).unwrap();
        assert!(matches!(f, Frame::Packet(_)), "{} bytes", f.bytes().len());
        assert!(matches!(
            frame(&result_of(n + 1)).unwrap(),
            Frame::Stream(_)
        ));
    }

    #[test]
    fn invalid_messages_are_not_framed() {
        let bad = Message::ToolUseResult(ToolUseResult::ok("", Map::new()));
        assert!(frame(&bad).is_err());
    }

    #[test]
    fn packets_wait_behind_an_unfinished_stream() {
        let mut o = InboundOrder::default();
        o.packet("a".into(), vec![1]);
        let t = o.stream();
        o.packet("a".into(), vec![3]);
        assert_eq!(
            o.pop(),
            Some(Inbound::Bytes {
                sender: "a".into(),
                bytes: vec![1]
            })
        );
        assert_eq!(o.pop(), None, "the packet after the stream must wait");
        assert_eq!(o.waiting(), 1);
        o.complete(
            t,
            Inbound::Bytes {
                sender: "a".into(),
                bytes: vec![2],
            },
        );
        let order: Vec<Vec<u8>> = std::iter::from_fn(|| o.pop())
            .map(|i| match i {
                Inbound::Bytes { bytes, .. } => bytes,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(order, vec![vec![2], vec![3]]);
        assert_eq!(o.waiting(), 0);
    }
}
