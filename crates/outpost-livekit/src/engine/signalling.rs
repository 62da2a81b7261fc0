//! Signalling: joining, resuming, and what the signal connection tells the engine.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::attributes::ProfileUpdate;
use crate::error::{Error, Result};
use crate::proto::{
    self, LeaveRequest, ReconnectReason, leave_request, signal_request, signal_response,
};
use crate::signal::{self, Signal};
use crate::types::DisconnectReason;
use crate::wire::{Role, Transport};

use super::transports::ice_servers;
use super::{Engine, ICE_RETRY, Link, Phase};

impl Engine {
    /// Opens a signal connection and a publisher peer connection and sends the offer.
    pub(super) async fn join(&mut self) -> Result<()> {
        self.epoch += 1;
        let (signal, join, events) = Signal::connect(
            &self.url,
            &self.token,
            self.opts.connect_timeout,
            self.opts.auto_subscribe,
            if self.opts.rpc_v2 {
                crate::rpc::CLIENT_PROTOCOL_RPC_V2
            } else {
                0
            },
        )
        .await?;
        let config = self.wire_config(&join);
        let built = async {
            let publisher =
                Transport::new(Role::Publisher, self.epoch, &config, self.wire_tx.clone()).await?;
            let reliable = publisher.create_channel(true).await?;
            let lossy = publisher.create_channel(false).await?;
            let sdp = publisher.offer(false).await?;
            Ok::<_, Error>((publisher, reliable, lossy, sdp))
        }
        .await;
        let (publisher, reliable, lossy, sdp) = match built {
            Ok(b) => b,
            Err(e) => {
                signal.close().await;
                return Err(e);
            }
        };
        signal.send(proto::offer(sdp, 1)).await;
        tracing::info!(
            url = %self.url,
            sid = %join.participant.as_ref().map(|p| p.sid.as_str()).unwrap_or(""),
            subscriber_primary = join.subscriber_primary,
            "joined; negotiating"
        );
        let local = join.participant.as_ref().map(proto::participant);
        self.shared.roster().local = local;
        self.permission = join.participant.as_ref().and_then(proto::permission);
        self.rpc
            .set_server_version(join.server_info.as_ref().map(|i| i.version.clone()));
        if proto::force_relay(&join) {
            tracing::info!("the server asks for relayed (TURN) connections only");
        }
        let others = join.other_participants.clone();
        self.link = Some(Link {
            signal,
            events,
            join,
            publisher,
            subscriber: None,
            reliable,
            lossy,
            remote_channels: Vec::new(),
            pub_candidates: Vec::new(),
            sub_candidates: Vec::new(),
            pub_connected: false,
            sub_connected: false,
            answered: false,
            writer: None,
            offer_id: 1,
            awaiting_answer: Some(1),
            offer_again: false,
            subscribed: std::collections::HashSet::new(),
            to_subscribe: Vec::new(),
            held_signal: std::collections::VecDeque::new(),
            announced: false,
            announce_deadline: None,
        });
        self.replace_roster(&others);
        // Before any track of ours can be published on this connection, the server
        // learns who may subscribe to them.
        self.permitted = None;
        self.sync_subscription_permission().await;
        self.phase = Phase::Connecting {
            deadline: Instant::now() + self.opts.peer_connection_timeout,
            ice_retry: None,
        };
        Ok(())
    }

    pub(super) async fn on_signal(&mut self, ev: Option<signal::Event>) {
        use signal_response::Message as M;
        let msg = match ev {
            Some(signal::Event::Message(m)) => *m,
            Some(signal::Event::Close(why)) => {
                self.lost(format!("signal connection lost: {why}"), true)
                    .await;
                return;
            }
            None => {
                self.lost("signal connection lost".into(), true).await;
                return;
            }
        };
        match msg {
            M::Answer(sd) => self.on_publisher_answer(sd).await,
            M::Offer(sd) => self.on_subscriber_offer(sd).await,
            M::Trickle(t) => self.on_trickle(t).await,
            M::Update(u) => {
                self.update_roster(&u.participants);
                self.send_mutes_again().await;
                self.sync_subscription_permission().await;
            }
            M::Leave(l) => self.on_leave(l).await,
            M::RefreshToken(t) => self.token = t,
            M::RequestResponse(r) => {
                if let Some(sid) = proto::mute_not_found(&r) {
                    let sid = sid.to_owned();
                    self.mute_not_found(&sid);
                    return;
                }
                if let Some(cid) = proto::refused_add_track(&r) {
                    // livekit-server refuses a track (no permission to publish, a source
                    // not allowed, an unsupported type) with request id 0.
                    let cid = cid.to_owned();
                    self.refuse_track(
                        &cid,
                        Error::Refused {
                            reason: proto::request_reason_name(r.reason),
                            message: r.message,
                        },
                    )
                    .await;
                    return;
                }
                if let Some(done) = self.requests.remove(&r.request_id) {
                    let verdict = if r.reason == proto::request_response::Reason::Ok as i32 {
                        Ok(())
                    } else {
                        Err(Error::Refused {
                            reason: proto::request_reason_name(r.reason),
                            message: r.message,
                        })
                    };
                    let _ = done.send(verdict);
                }
            }
            M::TrackPublished(r) => self.on_track_published(r.cid, r.track.map(|t| t.sid)).await,
            M::TrackUnpublished(r) => self.on_server_unpublished(&r.track_sid).await,
            M::Mute(m) => self.on_server_mute(&m.sid, m.muted).await,
            M::Join(_) | M::Reconnect(_) => {}
            _ => {}
        }
    }

    /// Sends an `UpdateParticipantMetadata`; `done` gets the server's `RequestResponse`.
    pub(super) async fn update_profile(
        &mut self,
        update: ProfileUpdate,
        done: oneshot::Sender<Result<()>>,
    ) {
        let Some(link) = self.link.as_ref() else {
            let _ = done.send(Err(Error::Closed("not connected to the room".into())));
            return;
        };
        self.next_request_id = self.next_request_id.wrapping_add(1).max(1);
        let id = self.next_request_id;
        // Requests nobody waits for any more (timed out) are dropped here.
        self.requests.retain(|_, tx| !tx.is_closed());
        self.requests.insert(id, done);
        link.signal
            .send(signal_request::Message::UpdateMetadata(update.request(id)))
            .await;
    }

    pub(super) async fn on_leave(&mut self, l: LeaveRequest) {
        let reason = proto::disconnect_reason_name(l.reason);
        match leave_request::Action::try_from(l.action) {
            Ok(leave_request::Action::Resume) => {
                self.resume_reason = ReconnectReason::RrUnknown;
                self.lost(format!("server asked to resume ({reason})"), true)
                    .await;
            }
            Ok(leave_request::Action::Reconnect) => {
                self.lost(format!("server asked to reconnect ({reason})"), false)
                    .await;
            }
            _ if l.can_reconnect => {
                self.lost(format!("server asked to reconnect ({reason})"), false)
                    .await;
            }
            _ => {
                self.disconnect(DisconnectReason::ServerRequest(reason))
                    .await;
            }
        }
    }

    /// Resume: new WebSocket with `reconnect=1`, then an ICE restart of the publisher.
    pub(super) async fn try_resume(&mut self) -> bool {
        let Some(link) = self.link.as_mut() else {
            return false;
        };
        let limit = self.opts.connect_timeout + Duration::from_secs(2);
        let reason = std::mem::replace(
            &mut self.resume_reason,
            ReconnectReason::RrSignalDisconnected,
        );
        let resp = tokio::time::timeout(limit, link.signal.resume(&self.url, reason)).await;
        let resp = match resp {
            Ok(Ok(resp)) => {
                tracing::info!(
                    last_message_seq = resp.last_message_seq,
                    reason = reason.as_str_name(),
                    "session resumed"
                );
                // The server has the session back: what livekit-signaling holds during a
                // resume (its pings among them) goes out now. Held until the peer
                // connection is up, the pings let a slow ICE restart trip the server's
                // ping timeout and end the resumed session.
                link.signal.resumed().await;
                // Closing the old WebSocket (still open when it was the peer connection
                // that failed) made its reader report "stream closed" into the same
                // event queue: that is not the new connection's end. Its other messages
                // are kept, in order.
                while let Ok(ev) = link.events.try_recv() {
                    match ev {
                        signal::Event::Close(why) => {
                            tracing::debug!(%why, "the replaced signal connection closed");
                        }
                        other => link.held_signal.push_back(other),
                    }
                }
                resp
            }
            Ok(Err(e)) => {
                tracing::info!("resume refused, rejoining: {e}");
                return false;
            }
            Err(_) => {
                tracing::info!("resume timed out, rejoining");
                return false;
            }
        };
        if !Self::follow_reconnect_directives(link, resp).await {
            return false;
        }
        // The ICE restart offer carries the tracks as they are now: any offer still due
        // is part of it, and the answer to an older one is stale.
        if let Err(e) = Self::send_offer(link, true).await {
            tracing::info!("ICE restart offer failed, rejoining: {e}");
            return false;
        }
        self.resuming = true;
        self.phase = Phase::Connecting {
            deadline: Instant::now() + self.opts.peer_connection_timeout,
            ice_retry: Some(Instant::now() + ICE_RETRY),
        };
        self.check_ready().await;
        true
    }

    /// What a `ReconnectResponse` asks of the resumed session: its ICE servers (LiveKit
    /// hands out fresh TURN credentials) are used from the ICE restart on; a change of
    /// `client_configuration.force_relay` needs peer connections built for it, so the
    /// session is rejoined instead (false). The link's join response keeps the latest
    /// of both, for a subscriber connection made later.
    pub(super) async fn follow_reconnect_directives(
        link: &mut Link,
        resp: proto::ReconnectResponse,
    ) -> bool {
        let relay_before = proto::force_relay(&link.join);
        if let Some(conf) = resp.client_configuration {
            link.join.client_configuration = Some(conf);
        }
        let relay_now = proto::force_relay(&link.join);
        if relay_now != relay_before {
            tracing::info!(
                relay_only = relay_now,
                "the server changed whether to connect through a TURN relay only; rejoining with new peer connections"
            );
            return false;
        }
        if resp.ice_servers.is_empty() || resp.ice_servers == link.join.ice_servers {
            return true;
        }
        link.join.ice_servers = resp.ice_servers;
        let servers = ice_servers(&link.join);
        for t in std::iter::once(&link.publisher).chain(link.subscriber.as_ref()) {
            if let Err(e) = t.set_ice_servers(&servers).await {
                tracing::info!("new ICE servers not taken ({e}); rejoining");
                return false;
            }
        }
        tracing::debug!(
            servers = servers.len(),
            "ICE servers from the reconnect response"
        );
        true
    }
}
