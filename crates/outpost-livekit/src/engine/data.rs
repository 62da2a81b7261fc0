//! Data packets: decoding, replay dedup, dispatch to streams, RPC and the
//! application, and holding packets of senders not announced yet.

use std::time::Duration;

use tokio::time::Instant;

use crate::events::RoomEvent;
use crate::proto::{self, data_packet};
use crate::types::StreamSenders;

use super::Engine;

/// How long packets of a session no participant update has named are held.
/// livekit-server sends the news of participants without tracks on a 3 s ticker, so a
/// newcomer's update can come almost 3 s after its first data, later on a busy server.
pub(super) const HOLD_FOR: Duration = Duration::from_secs(5);
/// Sessions whose packets are held at once; a packet of another is not held.
const MAX_HELD_SESSIONS: usize = 8;
/// Bytes held per session; what comes beyond it is dropped.
const MAX_HELD_BYTES: usize = 256 * 1024;

/// Data packets of one session not yet in the roster, in arrival order.
pub(super) struct Held {
    pub(super) sid: String,
    pub(super) since: Instant,
    pub(super) packets: Vec<(bool, Vec<u8>)>,
    pub(super) bytes: usize,
}

impl Engine {
    pub(super) fn on_data(&mut self, reliable: bool, bytes: &[u8]) {
        self.on_data_now(reliable, bytes, true);
    }

    /// Handles one data packet; with `may_hold`, one that must wait for its sender to be
    /// named is held instead (see [`Engine::hold`]).
    pub(super) fn on_data_now(&mut self, reliable: bool, bytes: &[u8], may_hold: bool) {
        let mut packet = match proto::decode_data_packet(bytes) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(
                    "dropping malformed data packet ({} bytes): {e}",
                    bytes.len()
                );
                return;
            }
        };
        if may_hold && self.hold(&packet, reliable, bytes) {
            return;
        }
        if reliable && packet.sequence > 0 && !packet.participant_sid.is_empty() {
            let last = self
                .recv_seq
                .entry(packet.participant_sid.clone())
                .or_insert(0);
            if packet.sequence <= *last {
                tracing::debug!(seq = packet.sequence, "dropping replayed packet");
                return;
            }
            *last = packet.sequence;
        }
        if !packet.participant_sid.is_empty()
            && self
                .shared
                .roster()
                .assistant
                .as_ref()
                .is_some_and(|a| a.sid == packet.participant_sid)
        {
            // The assistant knows us (it found us to send this, say an RPC call that
            // waits for our ack): nothing it gets from us now arrives from no one.
            self.announced();
        }
        let Some(value) = packet.value.take() else {
            return;
        };
        match value {
            data_packet::Value::User(u) => {
                let msg = proto::data_message(&packet, u, reliable);
                self.emit(RoomEvent::Data(msg));
            }
            data_packet::Value::StreamHeader(h) => {
                let Some((sender, on_behalf_of)) =
                    self.stream_sender(&packet.participant_identity, &packet.participant_sid)
                else {
                    tracing::debug!(stream = %h.stream_id, sid = %packet.participant_sid, "ignoring a data stream on our behalf from a participant we do not know");
                    return;
                };
                let sender = sender.as_str();
                let assistant = self
                    .shared
                    .roster()
                    .assistant
                    .as_ref()
                    .is_some_and(|a| a.identity == sender);
                if h.topic == crate::rpc::REQUEST_TOPIC || h.topic == crate::rpc::RESPONSE_TOPIC {
                    // RPC version 2: the RPC layer decides at the header who may call and
                    // how much it reads, before the stream takes a slot or a byte.
                    let refused = crate::rpc::on_stream_header(
                        &self.rpc,
                        &mut self.receivers,
                        sender,
                        assistant,
                        h,
                        Instant::now(),
                    );
                    self.refused(refused);
                    return;
                }
                if !assistant && self.opts.stream_senders == StreamSenders::Assistant {
                    // Dropped at the header: no slot, no event; its chunks and trailer
                    // find no stream and are ignored. (A stream the assistant sends on
                    // our behalf, a transcript of our speech, is the assistant's.)
                    tracing::debug!(stream = %h.stream_id, from = %sender, "ignoring a data stream from a participant other than the assistant");
                    return;
                }
                let mut reader = self
                    .receivers
                    .on_header(sender, assistant, h, Instant::now());
                reader.info.on_behalf_of = on_behalf_of;
                self.emit(RoomEvent::StreamOpened(reader));
            }
            data_packet::Value::StreamChunk(c) => {
                self.receivers
                    .on_chunk(&packet.participant_identity, c, Instant::now());
            }
            data_packet::Value::StreamTrailer(t) => {
                self.receivers.on_trailer(&packet.participant_identity, t);
            }
            data_packet::Value::RpcRequest(r) => {
                let refused = crate::rpc::on_request(&self.rpc, &packet.participant_identity, r);
                self.refused(refused);
            }
            data_packet::Value::RpcAck(a) => self.rpc.on_ack(&packet.participant_identity, a),
            data_packet::Value::RpcResponse(r) => {
                self.rpc.on_response(&packet.participant_identity, r);
            }
            _ => tracing::debug!("ignoring a data packet kind this client does not handle"),
        }
    }

    /// Holds `packet` when whether its sender is the assistant matters and cannot be told
    /// yet: a stream or an RPC request from a session no participant update has named.
    /// livekit-server announces a newcomer in a batched update that can come a second or
    /// more after its first data (seen against v1.13.5: 1.4 s), so an agent that calls or
    /// speaks at once would be taken for a stranger. Held packets are handled in order once
    /// an update names their session, or as they are when [`HOLD_FOR`] passes (a hidden
    /// participant is never named). Once a session has packets held, every later packet
    /// of it waits behind them, whatever its kind: let through first, it would raise the
    /// session's last reliable sequence and the held ones would be dropped as replays.
    /// Unreliable packets never move that sequence, so only reliable ones wait behind.
    /// Bounded: [`MAX_HELD_SESSIONS`] sessions, [`MAX_HELD_BYTES`] each; a packet of
    /// another session is handled at once, and one beyond a session's bytes first lets
    /// that session's held packets go, in order, as the [`HOLD_FOR`] timeout would, then
    /// is handled itself (nothing is dropped here). True when held.
    pub(super) fn hold(
        &mut self,
        packet: &proto::DataPacket,
        reliable: bool,
        bytes: &[u8],
    ) -> bool {
        let strict = self.opts.stream_senders == StreamSenders::Assistant
            || self.opts.rpc_callers == crate::types::RpcCallers::Assistant;
        let sid = packet.participant_sid.as_str();
        let kind = matches!(
            packet.value,
            Some(
                data_packet::Value::StreamHeader(_)
                    | data_packet::Value::StreamChunk(_)
                    | data_packet::Value::StreamTrailer(_)
                    | data_packet::Value::RpcRequest(_)
            )
        );
        let waiting = self.held.iter().position(|h| h.sid == sid);
        if !strict || !(kind || (reliable && waiting.is_some())) || sid.is_empty() {
            return false;
        }
        {
            let roster = self.shared.roster();
            let known = roster.remote.iter().any(|p| p.sid == sid)
                || roster.local.as_ref().is_some_and(|l| l.sid == sid);
            if known {
                return false;
            }
        }
        let at = match waiting {
            Some(i) => i,
            None if self.held.len() < MAX_HELD_SESSIONS => {
                tracing::debug!(%sid, "data from a session not announced yet; held");
                self.held.push(Held {
                    sid: sid.to_owned(),
                    since: Instant::now(),
                    packets: Vec::new(),
                    bytes: 0,
                });
                self.held.len() - 1
            }
            None => return false,
        };
        if self.held[at].bytes + bytes.len() > MAX_HELD_BYTES {
            tracing::debug!(%sid, "too much data from a session not announced yet; let go");
            let h = self.held.remove(at);
            self.release(h);
            return false;
        }
        let h = &mut self.held[at];
        h.bytes += bytes.len();
        h.packets.push((reliable, bytes.to_vec()));
        true
    }

    /// Handles the held packets of sessions the roster now names, and those held for
    /// [`HOLD_FOR`] by `now`.
    pub(super) fn release_held(&mut self, now: Instant) {
        let ready: Vec<Held> = {
            let roster = self.shared.roster();
            let (ready, wait) = std::mem::take(&mut self.held).into_iter().partition(|h| {
                now.saturating_duration_since(h.since) >= HOLD_FOR
                    || roster.remote.iter().any(|p| p.sid == h.sid)
            });
            self.held = wait;
            ready
        };
        for h in ready {
            self.release(h);
        }
    }

    /// Handles a session's held packets, in the order they came.
    fn release(&mut self, h: Held) {
        for (reliable, bytes) in h.packets {
            self.on_data_now(reliable, &bytes, false);
        }
    }

    /// Who really sent a stream header that names `claimed` and came from session `sid`.
    /// Every server stamps the sender's session id on each packet, but livekit-server
    /// leaves the identity an agent puts on a text stream it sends on someone else's
    /// behalf (LiveKit Agents' transcript of the user's speech), while its chunks and
    /// trailer carry the agent's own identity. So the session id decides: the sender is
    /// the participant with that sid, and `claimed` is whom it speaks for when it differs.
    /// `None` for a stream on our behalf from a session we do not know (it cannot be
    /// told apart from anyone's).
    pub(super) fn stream_sender(
        &self,
        claimed: &str,
        sid: &str,
    ) -> Option<(String, Option<String>)> {
        let roster = self.shared.roster();
        match roster
            .remote
            .iter()
            .find(|p| !sid.is_empty() && p.sid == sid)
        {
            Some(p) if p.identity == claimed => Some((claimed.to_owned(), None)),
            Some(p) => Some((p.identity.clone(), Some(claimed.to_owned()))),
            None if roster.local.as_ref().is_some_and(|l| l.identity == claimed) => None,
            None => Some((claimed.to_owned(), None)),
        }
    }

    pub(super) fn refused(&self, refused: Option<crate::rpc::Refused>) {
        if let Some(crate::rpc::Refused { caller, method }) = refused {
            self.emit(RoomEvent::RpcRefused { caller, method });
        }
    }
}
