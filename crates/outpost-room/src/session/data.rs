//! The participant's data channels: a reader per channel that checks each `DataPacket`
//! (grant, reliable sequence), stamps the sender and relays it into the room, and, on
//! the primary connection, a writer that drains the participant's outbox into it.

use std::sync::Arc;

use super::Session;
use crate::proto::{self, Reliability};
use crate::wire::{DataChannelHandle, Role};

impl Session {
    /// Starts the reader (relay into the room) of a channel and, when it is on the
    /// primary connection, the writer (drain our queue into it).
    pub(super) fn start_channel(&mut self, role: Role, kind: Reliability, dc: DataChannelHandle) {
        tracing::debug!(identity = %self.participant.identity(), ?role, ?kind, "data channel open");
        if role == self.primary() {
            if let Some(mut rx) = self.participant.take_outbox(kind) {
                let writer = dc.clone();
                self.tasks.push(self.shared.tasks.spawn(async move {
                    while let Some(packet) = rx.recv().await {
                        if let Err(e) = writer.send(&packet).await {
                            tracing::debug!("writer stops: {e}");
                            break;
                        }
                    }
                }));
            }
        }
        let room = self.room.clone();
        let me = self.participant.clone();
        self.tasks.push(self.shared.tasks.spawn(async move {
            while let Some(bytes) = dc.recv().await {
                let mut packet = match proto::decode_data_packet(&bytes) {
                    Ok(p) => p,
                    Err(e) => {
                        tracing::warn!(from = %me.identity(), "dropping malformed DataPacket ({} bytes): {e}", bytes.len());
                        continue;
                    }
                };
                if !me.grant.can_publish_data {
                    continue;
                }
                if kind == Reliability::Reliable && !me.accept_reliable_seq(packet.sequence) {
                    tracing::debug!(from = %me.identity(), seq = packet.sequence, "dropping a replayed reliable packet");
                    continue;
                }
                let destinations = proto::stamp_sender(
                    &mut packet,
                    me.identity(),
                    &me.sid,
                    me.grant.kind == "agent",
                );
                tracing::trace!(from = %me.identity(), kind = proto::packet_kind(&packet), "relay");
                let encoded = Arc::new(proto::encode_data_packet(&packet));
                room.relay(&me.sid, kind, &destinations, encoded).await;
            }
        }));
    }
}
