//! Data packets from participants we have not heard of yet, held until we have.
//!
//! livekit-server tells a room about a participant that publishes no track in batches,
//! every 3 s; its packets are relayed at once. So a LiveKit Agents worker that joins and
//! calls Outpost's tools by RPC right away reaches us before its own `ParticipantInfo`
//! does, and we cannot tell whether the caller is the assistant. Such packets wait here
//! (bounded in count, bytes and time) and are handed back once the roster knows their
//! sender; what is left over when a bound is hit, or after [`EARLY_TTL`], is dropped.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

/// How long a packet from an unknown sender is held (longer than livekit-server's 3 s
/// batch interval for participant updates).
pub(crate) const EARLY_TTL: Duration = Duration::from_secs(6);
/// Most packets held at once, from all unknown senders together.
pub(crate) const EARLY_MAX_PACKETS: usize = 512;
/// Most bytes held at once.
pub(crate) const EARLY_MAX_BYTES: usize = 2 << 20;

struct Held {
    at: Instant,
    sid: String,
    reliable: bool,
    bytes: Bytes,
}

/// The held packets, oldest first.
#[derive(Default)]
pub(crate) struct EarlyPackets {
    held: VecDeque<Held>,
    bytes: usize,
}

impl std::fmt::Debug for EarlyPackets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyPackets")
            .field("packets", &self.held.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl EarlyPackets {
    /// Holds a packet from `sid`; false when it was dropped (a bound is reached).
    pub(crate) fn push(&mut self, sid: &str, reliable: bool, bytes: &[u8], now: Instant) -> bool {
        self.expire(now);
        if self.held.len() >= EARLY_MAX_PACKETS || self.bytes + bytes.len() > EARLY_MAX_BYTES {
            return false;
        }
        self.bytes += bytes.len();
        self.held.push_back(Held {
            at: now,
            sid: sid.to_owned(),
            reliable,
            bytes: Bytes::copy_from_slice(bytes),
        });
        true
    }

    /// Takes out, in arrival order, the packets whose sender `known` now recognises.
    pub(crate) fn take_known(
        &mut self,
        now: Instant,
        known: impl Fn(&str) -> bool,
    ) -> Vec<(bool, Bytes)> {
        self.expire(now);
        let mut out = Vec::new();
        let mut keep = VecDeque::with_capacity(self.held.len());
        for h in self.held.drain(..) {
            if known(&h.sid) {
                self.bytes -= h.bytes.len();
                out.push((h.reliable, h.bytes));
            } else {
                keep.push_back(h);
            }
        }
        self.held = keep;
        out
    }

    /// Drops what has waited longer than [`EARLY_TTL`].
    pub(crate) fn expire(&mut self, now: Instant) {
        while let Some(h) = self.held.front() {
            if now.duration_since(h.at) < EARLY_TTL {
                break;
            }
            tracing::debug!(sid = %h.sid, "dropping a data packet from a participant the room never announced");
            self.bytes -= h.bytes.len();
            self.held.pop_front();
        }
    }

    /// Packets held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn held_until_known_in_order_then_handed_back() {
        let t = Instant::now();
        let mut e = EarlyPackets::default();
        assert!(e.push("PA_a", true, b"1", t));
        assert!(e.push("PA_b", true, b"x", t));
        assert!(e.push("PA_a", false, b"2", t));
        assert!(e.take_known(t, |s| s == "PA_c").is_empty());
        let got = e.take_known(t, |s| s == "PA_a");
        assert_eq!(
            got,
            vec![
                (true, Bytes::from_static(b"1")),
                (false, Bytes::from_static(b"2"))
            ]
        );
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn bounded_in_count_bytes_and_time() {
        let t = Instant::now();
        let mut e = EarlyPackets::default();
        for _ in 0..EARLY_MAX_PACKETS {
            assert!(e.push("PA_m", true, b"p", t));
        }
        assert!(!e.push("PA_m", true, b"p", t), "count bound");
        let mut e = EarlyPackets::default();
        let big = vec![0u8; EARLY_MAX_BYTES / 2 + 1];
        assert!(e.push("PA_m", true, &big, t));
        assert!(!e.push("PA_m", true, &big, t), "byte bound");
        let later = t + EARLY_TTL;
        assert!(e.push("PA_m", true, &big, later), "the old one expired");
        assert_eq!(e.len(), 1);
        assert!(e.take_known(later + EARLY_TTL, |_| true).is_empty());
    }
}
