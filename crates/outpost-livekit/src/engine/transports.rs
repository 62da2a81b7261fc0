//! The peer connections: offers and answers, ICE candidates, the publisher's data
//! channels and its reliable writer, and what path ICE found.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::events::RoomEvent;
use crate::outbox;
use crate::proto::{
    self, JoinResponse, ReconnectReason, SessionDescription, SignalTarget, TrickleRequest,
    signal_request,
};
use crate::types::ConnectionState;
use crate::wire::{Role, Transport, WireConfig, WireEvent};

use super::{ANNOUNCE_WAIT, Engine, Link, Phase};

impl Engine {
    pub(super) async fn on_subscriber_offer(&mut self, sd: SessionDescription) {
        let epoch = self.epoch;
        let Some(config) = self.link.as_ref().map(|l| self.wire_config(&l.join)) else {
            return;
        };
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if link.subscriber.is_none() {
            match Transport::new(Role::Subscriber, epoch, &config, self.wire_tx.clone()).await {
                Ok(t) => link.subscriber = Some(t),
                Err(e) => {
                    tracing::warn!("subscriber peer connection: {e}");
                    return;
                }
            }
        }
        let Some(sub) = link.subscriber.as_ref() else {
            return;
        };
        match sub.answer(sd.sdp).await {
            Ok(sdp) => {
                link.signal.send(proto::answer(sdp, sd.id)).await;
                for c in std::mem::take(&mut link.sub_candidates) {
                    if let Err(e) = sub.add_candidate(&c).await {
                        tracing::debug!("early subscriber candidate: {e}");
                    }
                }
            }
            Err(e) => tracing::warn!("subscriber offer: {e}"),
        }
    }

    pub(super) async fn on_trickle(&mut self, t: TrickleRequest) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let subscriber = t.target == SignalTarget::Subscriber as i32;
        let transport = if subscriber {
            link.subscriber.as_ref()
        } else {
            Some(&link.publisher)
        };
        match transport {
            Some(tr) if tr.has_remote_description().await => {
                if let Err(e) = tr.add_candidate(&t.candidate_init).await {
                    tracing::debug!("remote candidate: {e}");
                }
            }
            _ => {
                let buf = if subscriber {
                    &mut link.sub_candidates
                } else {
                    &mut link.pub_candidates
                };
                if buf.len() < 128 {
                    buf.push(t.candidate_init);
                }
            }
        }
    }

    pub(super) async fn on_wire(&mut self, ev: WireEvent) {
        match ev {
            WireEvent::Message { reliable, data, .. } => self.on_data(reliable, &data),
            WireEvent::Candidate { epoch, role, json } if epoch == self.epoch => {
                if let Some(link) = &self.link {
                    let target = match role {
                        Role::Publisher => SignalTarget::Publisher,
                        Role::Subscriber => SignalTarget::Subscriber,
                    };
                    link.signal
                        .send(signal_request::Message::Trickle(TrickleRequest {
                            candidate_init: json,
                            target: target as i32,
                            r#final: false,
                        }))
                        .await;
                }
            }
            WireEvent::Connected { epoch, role } if epoch == self.epoch => {
                if let Some(link) = self.link.as_mut() {
                    match role {
                        Role::Publisher => link.pub_connected = true,
                        Role::Subscriber => link.sub_connected = true,
                    }
                }
                self.check_ready().await;
            }
            WireEvent::Opened { epoch } if epoch == self.epoch => self.check_ready().await,
            WireEvent::Down { epoch, role, why } if epoch == self.epoch => {
                if let Some(link) = self.link.as_mut() {
                    match role {
                        Role::Publisher => link.pub_connected = false,
                        Role::Subscriber => link.sub_connected = false,
                    }
                }
                if matches!(self.phase, Phase::Connected) {
                    self.resume_reason = match role {
                        Role::Publisher => ReconnectReason::RrPublisherFailed,
                        Role::Subscriber => ReconnectReason::RrSubscriberFailed,
                    };
                    self.lost(format!("{role:?} {why}"), true).await;
                }
            }
            WireEvent::RemoteTrack { epoch, track } if epoch == self.epoch => {
                self.on_remote_track(track);
            }
            WireEvent::RemoteChannel { epoch, channel } if epoch == self.epoch => {
                if let Some(link) = self.link.as_mut() {
                    link.remote_channels.push(channel);
                }
            }
            _ => {}
        }
    }

    /// Moves from `Connecting` to `Connected` once the publisher (and, when the
    /// server says it is primary, the subscriber) is up and `_reliable` is open.
    pub(super) async fn check_ready(&mut self) {
        if !matches!(self.phase, Phase::Connecting { .. }) {
            return;
        }
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let sub_ok = !link.join.subscriber_primary || link.sub_connected;
        if !(link.pub_connected && sub_ok && link.reliable.is_open()) {
            return;
        }
        if self.resuming {
            link.signal.resumed().await;
        }
        self.shared.set_lossy(Some(link.lossy.clone()));
        let path = crate::types::ConnectionPath {
            publisher: link.publisher.selected_path().await,
            subscriber: match &link.subscriber {
                Some(sub) => sub.selected_path().await,
                None => None,
            },
        };
        tracing::info!(path = %path.describe(), publisher = ?path.publisher, subscriber = ?path.subscriber, "network path");
        *outpost_sync::lock(&self.shared.path) = path;
        if link.announced {
            self.start_writer();
        } else {
            link.announce_deadline = Some(Instant::now() + ANNOUNCE_WAIT);
        }
        self.phase = Phase::Connected;
        self.attempts = 0;
        self.shared.state.send_replace(ConnectionState::Connected);
        tracing::info!(resumed = self.resuming, "connected");
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Ok(()));
        } else if self.outage {
            self.outage = false;
            self.emit(RoomEvent::Reconnected {
                resumed: self.resuming,
            });
        }
        self.resuming = false;
    }

    /// Starts the reliable writer on the link's `_reliable` channel (once per link).
    pub(super) fn start_writer(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        link.announce_deadline = None;
        if link.writer.is_some() {
            return;
        }
        let (stop_tx, stop_rx) = watch::channel(false);
        let handle = tokio::spawn(outbox::writer(
            self.shared.outbox.clone(),
            link.reliable.clone(),
            stop_rx,
        ));
        link.writer = Some((handle, stop_tx));
    }

    /// The server has told the room about us: our own `ParticipantInfo` came back in a
    /// participant update (livekit-server sends a batch to everyone, us included), or the
    /// assistant sent us something. Until then the others may not know our identity, and
    /// the official SDKs hand our user packets to their apps with no sender
    /// (livekit-server announces a participant that publishes no track up to 3 s after
    /// it joined), so reliable data waits in the outbox for this, or for
    /// [`ANNOUNCE_WAIT`] at most.
    pub(super) fn announced(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if link.announced {
            return;
        }
        link.announced = true;
        if matches!(self.phase, Phase::Connected) {
            tracing::debug!("the room knows us now; sending");
            self.start_writer();
        }
    }

    pub(super) async fn stop_writer(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if let Some((handle, stop)) = link.writer.take() {
            let _ = stop.send(true);
            let abort = handle.abort_handle();
            if tokio::time::timeout(Duration::from_secs(3), handle)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }

    /// What became of each kind of network path on the link's peer connections: the
    /// publisher's, then what only the subscriber tried.
    pub(super) async fn paths_tried(&self) -> Vec<String> {
        let Some(link) = self.link.as_ref() else {
            return Vec::new();
        };
        let mut paths = link.publisher.path_report().await;
        if let Some(sub) = &link.subscriber {
            for p in sub.path_report().await {
                match paths.iter_mut().find(|q| q.kind == p.kind) {
                    Some(q) if p.worked && !q.worked => *q = p,
                    Some(_) => {}
                    None => paths.push(p),
                }
            }
        }
        paths.iter().map(ToString::to_string).collect()
    }

    /// Transport settings for a link with this join response.
    pub(super) fn wire_config(&self, join: &JoinResponse) -> WireConfig {
        WireConfig {
            loopback: host_is_loopback(&self.url),
            send_buffer_limit: self.opts.send_buffer_limit,
            ice_servers: ice_servers(join),
            relay_only: proto::force_relay(join),
            tls_roots: self.opts.extra_root_ca_pem.clone(),
        }
    }

    /// Sends a new publisher offer (tracks added or removed), or, while the last one is
    /// unanswered, notes that one is due: offers go out one at a time, as the official
    /// SDKs send them, since an answer to an older offer cannot be applied to a newer one.
    pub(super) async fn renegotiate(&mut self) -> Result<()> {
        let Some(link) = self.link.as_mut() else {
            return Err(Error::Closed("not connected to the room".into()));
        };
        if link.awaiting_answer.is_some() {
            link.offer_again = true;
            return Ok(());
        }
        Self::send_offer(link, false).await
    }

    pub(super) async fn send_offer(link: &mut Link, ice_restart: bool) -> Result<()> {
        let sdp = link.publisher.offer(ice_restart).await?;
        link.offer_id += 1;
        link.awaiting_answer = Some(link.offer_id);
        link.offer_again = false;
        link.signal.send(proto::offer(sdp, link.offer_id)).await;
        Ok(())
    }

    /// The server's answer to our publisher offer. One that names an older offer than the
    /// last we sent is stale and ignored (livekit-server answers every offer, in order).
    pub(super) async fn on_publisher_answer(&mut self, sd: SessionDescription) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        match link.awaiting_answer {
            Some(id) if sd.id != 0 && sd.id != id => {
                tracing::debug!(
                    answer = sd.id,
                    awaiting = id,
                    "ignoring the answer to an older offer"
                );
                return;
            }
            None if link.answered => {
                tracing::debug!(answer = sd.id, "ignoring an answer to no offer of ours");
                return;
            }
            _ => {}
        }
        if let Err(e) = link.publisher.apply_answer(sd.sdp).await {
            tracing::warn!("publisher answer: {e}");
            self.lost(format!("bad publisher answer: {e}"), false).await;
            return;
        }
        link.answered = true;
        link.awaiting_answer = None;
        for c in std::mem::take(&mut link.pub_candidates) {
            if let Err(e) = link.publisher.add_candidate(&c).await {
                tracing::debug!("early publisher candidate: {e}");
            }
        }
        if link.offer_again {
            if let Err(e) = Self::send_offer(link, false).await {
                tracing::warn!("publisher offer: {e}");
                self.lost(format!("publisher offer failed: {e}"), false)
                    .await;
            }
        }
    }
}

/// The join response's ICE servers as the wire takes them: (urls, username, credential).
pub(super) fn ice_servers(join: &JoinResponse) -> Vec<(Vec<String>, String, String)> {
    join.ice_servers
        .iter()
        .map(|s| (s.urls.clone(), s.username.clone(), s.credential.clone()))
        .collect()
}

/// Whether the server URL's host is a loopback address (then loopback ICE
/// candidates are needed).
pub(super) fn host_is_loopback(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(authority)
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
