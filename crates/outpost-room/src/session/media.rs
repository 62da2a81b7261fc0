//! The session's side of the small SFU: the tracks this participant publishes (announced
//! with `AddTrackRequest`, published when an offer or its media carries them, unpublished
//! when they stop) and the others' tracks it subscribes to on its subscriber connection,
//! with the server-side renegotiation (offers) that adding or removing one takes.
//! [`crate::media`] holds what the tracks themselves are and the forwarding task.

use std::sync::Arc;

use outpost_webrtc::{MediaKind, RemoteTrack};

use super::{Lost, Session, Subscription};
use crate::media::{self, PublishedTrack};
use crate::proto::{
    self, AddTrackRequest, MuteTrackRequest, RequestResponse, TrackPublishedResponse,
    TrackUnpublishedResponse, request_response, signal_response,
};
use crate::wire::{Peer, Role, WireEvent};

impl Session {
    /// The client answered the subscriber offer: the tracks it carried are bound to
    /// their receivers, and their publishers may hear of this subscriber.
    pub(super) fn subscriber_answered(&mut self) {
        self.sub_answered = true;
        self.sub_offer_outstanding = false;
        for s in self.subscriptions.values_mut() {
            s.bound |= s.offered;
        }
        self.tell_subscribed();
    }

    /// Sends an offer for the subscriber connection (an ICE restart after a resume).
    pub(super) async fn offer_subscriber(&mut self, ice_restart: bool) -> Result<(), Lost> {
        let Some(sub) = &self.subscriber else {
            return Ok(());
        };
        let sdp = sub.offer(ice_restart).await.map_err(Lost::Offer)?;
        tracing::trace!(identity = %self.participant.identity(), ice_restart, %sdp, "subscriber offer");
        self.sub_answered = false;
        self.sub_offer_outstanding = true;
        self.offer_id += 1;
        for s in self.subscriptions.values_mut() {
            s.offered = true;
        }
        self.say(&proto::offer(sdp, self.offer_id)).await
    }

    /// `AddTrackRequest`: an audio track gets its sid and a `TrackPublishedResponse`
    /// (what the SDK's `publish_track` waits for, before it offers the media); it is
    /// published when an offer carries its media section (before any audio, as
    /// livekit-server does), or failing a match when its media arrives. Anything else
    /// is refused with a
    /// `RequestResponse` saying why (video: UNSUPPORTED_TYPE).
    pub(super) async fn add_track(&mut self, req: AddTrackRequest) -> Result<(), Lost> {
        let sid = format!("TR_{}", crate::room::short_id());
        let refused = if self.pending_tracks.len() >= media::MAX_PENDING_TRACKS {
            Err((
                request_response::Reason::LimitExceeded,
                "too many tracks awaiting media",
            ))
        } else if self.pending_tracks.iter().any(|(cid, _)| *cid == req.cid)
            || self.participant.tracks().iter().any(|t| t.cid == req.cid)
        {
            Err((
                request_response::Reason::DuplicateHandle,
                "a track with this cid is already published",
            ))
        } else {
            media::track_info_for(&req, sid, self.participant.grant.can_publish)
        };
        match refused {
            Ok(info) => {
                tracing::info!(identity = %self.participant.identity(), cid = %req.cid, sid = %info.sid, name = %info.name, "audio track announced");
                self.pending_tracks.push((req.cid.clone(), info.clone()));
                let published = TrackPublishedResponse {
                    cid: req.cid,
                    track: Some(info),
                };
                self.say(&proto::response(signal_response::Message::TrackPublished(
                    published,
                )))
                .await
            }
            Err((reason, message)) => {
                tracing::warn!(identity = %self.participant.identity(), cid = %req.cid, kind = req.r#type, ?reason, "track refused: {message}");
                let response = RequestResponse {
                    request_id: 0,
                    reason: reason as i32,
                    message: message.to_owned(),
                    request: Some(request_response::Request::AddTrack(req)),
                };
                self.say(&proto::response(signal_response::Message::RequestResponse(
                    response,
                )))
                .await
            }
        }
    }

    /// A publisher offer was applied: each pending track whose media section it now
    /// sends is published (announced to everyone, subscribed by the others) at once,
    /// before its first packet, as livekit-server does (its `OnTrack` fires from the
    /// SDP). A section is matched to its `AddTrackRequest` by the track id of its
    /// `a=msid` (the SDKs use the cid), else, when one section and one request are
    /// left unmatched, to each other. What stays unmatched is published when its
    /// media arrives ([`Self::track_arrived`]).
    pub(super) fn publish_offered(&mut self, sending: &[String]) {
        let known: Vec<String> = self
            .participant
            .tracks()
            .iter()
            .map(|t| t.media_id.clone())
            .collect();
        let mut new: Vec<&String> = sending.iter().filter(|id| !known.contains(id)).collect();
        new.dedup();
        let mut unmatched = Vec::new();
        for id in new {
            match self.pending_tracks.iter().position(|(cid, _)| cid == id) {
                Some(at) => {
                    self.publish_pending(at, id);
                }
                None => unmatched.push(id),
            }
        }
        if let ([id], 1) = (unmatched.as_slice(), self.pending_tracks.len()) {
            self.publish_pending(0, id);
        }
    }

    /// Publishes pending track `at`, whose media will carry the track id `media_id`.
    fn publish_pending(&mut self, at: usize, media_id: &str) -> Arc<PublishedTrack> {
        let (cid, info) = self.pending_tracks.remove(at);
        let track = PublishedTrack::new(&self.participant.sid, &cid, media_id, info);
        tracing::info!(identity = %self.participant.identity(), sid = %track.sid, "audio track published");
        self.awaiting_media.push(track.clone());
        self.room.publish(&self.participant, track.clone());
        track
    }

    /// Media arrived on the publisher connection: the published track it belongs to
    /// (matched by the track id of its `a=msid`, else the only one awaiting media) or,
    /// when no offer's section was matched to it, the pending track (same rules) is
    /// published now; a task forwards its packets until it ends.
    pub(super) fn track_arrived(&mut self, remote: RemoteTrack) {
        if remote.kind() == MediaKind::Video {
            tracing::warn!(identity = %self.participant.identity(), ?remote, "{}", media::VIDEO_REFUSED);
            return;
        }
        let id = remote.track_id();
        let awaiting = self
            .awaiting_media
            .iter()
            .position(|t| t.media_id == id)
            .or_else(|| {
                let pending = self.pending_tracks.iter().any(|(cid, _)| cid == id);
                (!pending && self.awaiting_media.len() == 1).then_some(0)
            });
        let track = if let Some(at) = awaiting {
            self.awaiting_media.remove(at)
        } else {
            let at = self
                .pending_tracks
                .iter()
                .position(|(cid, _)| cid == id)
                .or((self.pending_tracks.len() == 1).then_some(0));
            let Some(at) = at else {
                tracing::warn!(identity = %self.participant.identity(), ?remote, "media for a track that was not announced with AddTrackRequest; ignored");
                return;
            };
            let track = self.publish_pending(at, id);
            self.awaiting_media.retain(|t| t.sid != track.sid);
            track
        };
        tracing::debug!(identity = %self.participant.identity(), sid = %track.sid, "audio track media arrived");
        let events = self.wire_tx.clone();
        self.tasks.push(self.shared.tasks.spawn(async move {
            while let Some(packet) = remote.recv().await {
                track.forward(packet);
            }
            let _ = events.send(WireEvent::TrackEnded(track.sid.clone()));
        }));
    }

    /// Stops publishing one of this client's tracks; the client hears of it
    /// (`TrackUnpublishedResponse`), the others see it go.
    pub(super) async fn unpublish(&mut self, sid: &str, why: &str) -> Result<(), Lost> {
        self.awaiting_media.retain(|t| t.sid != sid);
        if !self.room.unpublish(&self.participant, sid) {
            return Ok(());
        }
        tracing::info!(identity = %self.participant.identity(), %sid, "audio track unpublished: {why}");
        self.say(&proto::response(
            signal_response::Message::TrackUnpublished(TrackUnpublishedResponse {
                track_sid: sid.to_owned(),
            }),
        ))
        .await
    }

    /// `MuteTrackRequest` for one of this client's tracks: the flag goes to everyone
    /// else in a participant update (the SDKs fire track muted / unmuted from it).
    pub(super) fn mute(&mut self, req: &MuteTrackRequest) {
        if let Some(track) = self.participant.track(&req.sid) {
            if track.set_muted(req.muted) {
                tracing::debug!(identity = %self.participant.identity(), sid = %req.sid, muted = req.muted, "track mute");
                self.room.announce(&self.participant);
            }
        } else if let Some((_, info)) = self
            .pending_tracks
            .iter_mut()
            .find(|(_, i)| i.sid == req.sid)
        {
            info.muted = req.muted;
        } else {
            tracing::debug!(identity = %self.participant.identity(), sid = %req.sid, "mute for an unknown track; ignored");
        }
    }

    /// `UpdateSubscription`: explicit subscriptions (a client that joined with
    /// auto_subscribe off asks for the tracks it wants, as livekit-server lets it).
    pub(super) async fn update_subscription(
        &mut self,
        s: proto::UpdateSubscription,
    ) -> Result<(), Lost> {
        tracing::debug!(identity = %self.participant.identity(), tracks = ?s.track_sids, subscribe = s.subscribe, "UpdateSubscription");
        for sid in s.track_sids.iter().take(media::MAX_PENDING_TRACKS) {
            if s.subscribe {
                let track = self
                    .room
                    .others(&self.participant.sid)
                    .iter()
                    .find_map(|p| p.track(sid));
                if let Some(track) = track {
                    self.subscribe_to(track, true).await?;
                }
            } else {
                self.unsubscribe(sid).await?;
            }
        }
        Ok(())
    }

    /// Forwards another participant's track to this client: a local track on the
    /// subscriber connection (created on first use), a forwarding task, and a new
    /// offer. `Err` only when the client cannot be talked to.
    pub(super) async fn subscribe(&mut self, track: Arc<PublishedTrack>) -> Result<(), Lost> {
        self.subscribe_to(track, false).await
    }

    /// Forwards `track` to this client: asked for (`explicit`, an `UpdateSubscription`)
    /// or because it joined with auto_subscribe.
    async fn subscribe_to(
        &mut self,
        track: Arc<PublishedTrack>,
        explicit: bool,
    ) -> Result<(), Lost> {
        if !(self.auto_subscribe || explicit)
            || !self.participant.grant.can_subscribe
            || track.publisher_sid == self.participant.sid
            || self.subscriptions.contains_key(&track.sid)
        {
            return Ok(());
        }
        let allowed = self
            .room
            .by_sid(&track.publisher_sid)
            .is_some_and(|p| p.allows_subscriber(self.participant.identity(), &track.sid));
        if !allowed {
            // As livekit-server: the subscriber is told it may not have this track.
            tracing::info!(identity = %self.participant.identity(), track = %track.sid, "not subscribed: the publisher's subscription permissions leave this participant out");
            let update = proto::SubscriptionPermissionUpdate {
                participant_sid: track.publisher_sid.clone(),
                track_sid: track.sid.clone(),
                allowed: false,
            };
            return self
                .say(&proto::response(
                    signal_response::Message::SubscriptionPermissionUpdate(update),
                ))
                .await;
        }
        if self.subscriber.is_none() {
            match Peer::new(
                &self.shared.config.wire,
                Role::Subscriber,
                self.wire_tx.clone(),
            )
            .await
            {
                Ok(peer) => self.subscriber = Some(peer),
                Err(e) => {
                    tracing::warn!(identity = %self.participant.identity(), "cannot create the subscriber connection: {e}");
                    return Ok(());
                }
            }
        }
        let Some(sub) = &self.subscriber else {
            return Ok(());
        };
        let local = match sub.add_audio_track(&track.stream_id(), &track.sid).await {
            Ok(local) => local,
            Err(e) => {
                tracing::warn!(identity = %self.participant.identity(), track = %track.sid, "cannot subscribe: {e}");
                return Ok(());
            }
        };
        tracing::info!(identity = %self.participant.identity(), track = %track.sid, "subscribed");
        let (deliver, may_send) = tokio::sync::watch::channel(false);
        let task = self.shared.tasks.spawn(media::forward(
            track.subscribe(),
            local.clone(),
            may_send,
            track.sid.clone(),
        ));
        self.subscriptions.insert(
            track.sid.clone(),
            Subscription {
                local,
                task,
                track,
                offered: false,
                bound: false,
                deliver,
            },
        );
        self.renegotiate_subscriber().await
    }

    /// The subscriber connection is up: the tracks already bound start to flow, and
    /// their publishers hear of this subscriber.
    pub(super) fn subscriber_connected(&mut self) {
        self.sub_connected.send_replace(true);
        self.tell_subscribed();
    }

    /// Starts forwarding the tracks this client can now receive (its answer bound them
    /// and its subscriber connection is up), and tells their publishers that they have
    /// a subscriber, as livekit-server does (`TrackSubscribed` on the down track's
    /// bind-and-connected, once per track; not for hidden participants): a publisher
    /// that waits for it before it speaks (LiveKit Agents) is not heard from before it
    /// can be.
    ///
    /// Nothing is forwarded before: packets that reach the client before the offer
    /// that names their SSRC are routed by payload type to a track it already
    /// receives (libwebrtc then keeps that SSRC for the other receiver), and the new
    /// track stays silent for good.
    fn tell_subscribed(&self) {
        if !*self.sub_connected.borrow() {
            return;
        }
        for s in self.subscriptions.values().filter(|s| s.bound) {
            s.deliver.send_replace(true);
            if !self.participant.grant.hidden {
                // Only the track's first subscriber reaches its publisher.
                self.room.subscribed(&s.track);
            }
        }
    }

    /// Stops forwarding a track to this client and renegotiates it away.
    pub(super) async fn unsubscribe(&mut self, sid: &str) -> Result<(), Lost> {
        let Some(sub) = self.subscriptions.remove(sid) else {
            return Ok(());
        };
        sub.task.abort();
        if let Some(peer) = &self.subscriber {
            if let Err(e) = peer.remove_track(&sub.local).await {
                tracing::debug!(identity = %self.participant.identity(), track = %sid, "remove track: {e}");
            }
        }
        tracing::info!(identity = %self.participant.identity(), track = %sid, "unsubscribed");
        self.renegotiate_subscriber().await
    }

    /// Offers the subscriber connection again (its tracks changed), or, when an offer
    /// is still unanswered, once it is answered.
    pub(super) async fn renegotiate_subscriber(&mut self) -> Result<(), Lost> {
        if self.subscriber.is_none() {
            return Ok(());
        }
        if self.sub_offer_outstanding || self.sink.is_none() {
            self.sub_renegotiate = true;
            return Ok(());
        }
        self.offer_subscriber(false).await.inspect_err(|e| {
            tracing::warn!(identity = %self.participant.identity(), "subscriber renegotiation: {e}");
        })
    }
}
