//! What each `SignalRequest` of the client does: its publisher offer, its answer to our
//! subscriber offer, its ICE candidates, profile updates, track requests (handed to
//! `media`), subscription permissions, pings and leave.

use super::{End, Flow, Lost, Session};
use crate::media;
use crate::proto::{
    self, ParticipantUpdate, Pong, RequestResponse, SessionDescription, SignalTarget,
    TrickleRequest, UpdateParticipantMetadata, request_response, signal_request, signal_response,
};

/// Candidates buffered before the matching description arrives.
const MAX_EARLY_CANDIDATES: usize = 64;

impl Session {
    /// Handles one request. `Err` means the client cannot be talked to.
    pub(super) async fn handle(&mut self, req: signal_request::Message) -> Result<Flow, Lost> {
        use signal_request::Message as M;
        tracing::trace!(identity = %self.participant.identity(), kind = proto::request_kind(&req), "signal request");
        match req {
            M::Offer(offer) => return self.on_offer(offer).await,
            M::Answer(answer) => return self.on_answer(answer).await,
            M::Trickle(t) => self.on_trickle(t).await,
            M::UpdateMetadata(update) => self.update_metadata(update).await?,
            M::AddTrack(req) => self.add_track(req).await?,
            M::Mute(req) => self.mute(&req),
            M::SubscriptionPermission(perm) => {
                tracing::info!(identity = %self.participant.identity(), all = perm.all_participants, allowed = ?perm.track_permissions.iter().map(|t| (&t.participant_identity, &t.participant_sid)).collect::<Vec<_>>(), "subscription permission");
                self.room.set_subscribers(&self.participant, &perm);
            }
            M::Subscription(s) => self.update_subscription(s).await?,
            M::Leave(_) => return Ok(Flow::Break(End::Quiet("client left"))),
            M::Ping(ts) => {
                let _ = ts;
                self.say(&proto::response(signal_response::Message::Pong(
                    crate::room::now_ms(),
                )))
                .await?;
            }
            M::PingReq(p) => {
                let pong = Pong {
                    last_ping_timestamp: p.timestamp,
                    timestamp: crate::room::now_ms(),
                };
                self.say(&proto::response(signal_response::Message::PongResp(pong)))
                    .await?;
            }
            other => {
                tracing::debug!(kind = proto::request_kind(&other), "ignored signal request");
            }
        }
        Ok(Flow::Continue(()))
    }

    /// The client's publisher offer: answered, with the candidates that came early;
    /// a published track whose section no longer sends (the SDK removed its sender to
    /// unpublish) is unpublished, and the tracks it now sends are published.
    async fn on_offer(&mut self, offer: SessionDescription) -> Result<Flow, Lost> {
        tracing::trace!(identity = %self.participant.identity(), sdp = %offer.sdp, "publisher offer");
        let sending = outpost_webrtc::media::sending_track_ids(&offer.sdp);
        let stopped: Vec<String> = self
            .participant
            .tracks()
            .into_iter()
            .filter(|t| !sending.contains(&t.media_id))
            .map(|t| t.sid.clone())
            .collect();
        if outpost_webrtc::media::sends_video(&offer.sdp) {
            tracing::warn!(identity = %self.participant.identity(), "the publisher offer sends video; {}", media::VIDEO_REFUSED);
        }
        let Some(publisher) = &self.publisher else {
            return Ok(Flow::Continue(()));
        };
        let sdp = match publisher.answer(offer.sdp).await {
            Ok(sdp) => sdp,
            Err(e) => {
                tracing::warn!(identity = %self.participant.identity(), "offer refused: {e}");
                return Ok(Flow::Break(End::Close(1007, format!("offer refused: {e}"))));
            }
        };
        tracing::trace!(identity = %self.participant.identity(), %sdp, "publisher answer");
        self.answered = true;
        let candidates = std::mem::take(&mut self.early_candidates);
        self.say(&proto::answer(sdp, offer.id)).await?;
        if let Some(publisher) = &self.publisher {
            for c in candidates {
                if let Err(e) = publisher.add_candidate(&c).await {
                    tracing::warn!(identity = %self.participant.identity(), "early candidate: {e}");
                }
            }
        }
        for sid in stopped {
            self.unpublish(&sid, "its sender was removed").await?;
        }
        self.publish_offered(&sending);
        Ok(Flow::Continue(()))
    }

    /// The client's answer to our subscriber offer: applied, then the candidates that
    /// came early, then the offer that waited for it, if any.
    async fn on_answer(&mut self, answer: SessionDescription) -> Result<Flow, Lost> {
        let Some(sub) = &self.subscriber else {
            tracing::debug!(identity = %self.participant.identity(), "answer without a subscriber offer; ignored");
            return Ok(Flow::Continue(()));
        };
        tracing::trace!(identity = %self.participant.identity(), sdp = %answer.sdp, "subscriber answer");
        if let Err(e) = sub.apply_answer(answer.sdp).await {
            tracing::warn!(identity = %self.participant.identity(), "subscriber answer refused: {e}");
            return Ok(Flow::Break(End::Close(
                1007,
                format!("answer refused: {e}"),
            )));
        }
        self.subscriber_answered();
        if let Some(sub) = &self.subscriber {
            for c in std::mem::take(&mut self.sub_candidates) {
                if let Err(e) = sub.add_candidate(&c).await {
                    tracing::warn!(identity = %self.participant.identity(), "early subscriber candidate: {e}");
                }
            }
        }
        if std::mem::take(&mut self.sub_renegotiate) {
            self.renegotiate_subscriber().await?;
        }
        Ok(Flow::Continue(()))
    }

    /// One of the client's ICE candidates, for the connection it names; kept (up to
    /// [`MAX_EARLY_CANDIDATES`]) until that connection has its description.
    async fn on_trickle(&mut self, t: TrickleRequest) {
        if t.target == SignalTarget::Subscriber as i32 {
            let Some(sub) = &self.subscriber else {
                // No subscriber connection was offered: nothing to add to.
                return;
            };
            if self.sub_answered {
                if let Err(e) = sub.add_candidate(&t.candidate_init).await {
                    tracing::warn!(identity = %self.participant.identity(), "subscriber candidate: {e}");
                }
            } else if self.sub_candidates.len() < MAX_EARLY_CANDIDATES {
                self.sub_candidates.push(t.candidate_init);
            }
        } else if self.answered {
            if let Some(publisher) = &self.publisher {
                if let Err(e) = publisher.add_candidate(&t.candidate_init).await {
                    tracing::warn!(identity = %self.participant.identity(), "candidate: {e}");
                }
            }
        } else if self.early_candidates.len() < MAX_EARLY_CANDIDATES {
            self.early_candidates.push(t.candidate_init);
        } else {
            tracing::warn!(identity = %self.participant.identity(), "too many candidates before the offer; dropped");
        }
    }

    /// The client changes its own name, metadata or attributes. As livekit-server
    /// does: the change goes to everyone in a `ParticipantUpdate` (the sender
    /// included, first, so its SDK has the new values when its request completes),
    /// then the sender gets a `RequestResponse` carrying its request id, which is what
    /// the SDKs' `set_attributes` / `set_metadata` / `set_name` wait for.
    async fn update_metadata(&mut self, update: UpdateParticipantMetadata) -> Result<(), Lost> {
        let (reason, message) = match self.participant.update_profile(&update) {
            Ok(changed) => {
                if changed {
                    let me = self.participant.info();
                    self.say(&proto::response(signal_response::Message::Update(
                        ParticipantUpdate {
                            participants: vec![me],
                        },
                    )))
                    .await?;
                    self.room.announce(&self.participant);
                }
                (request_response::Reason::Ok, "")
            }
            Err((reason, message)) => {
                tracing::info!(identity = %self.participant.identity(), ?reason, message, "metadata update refused");
                (reason, message)
            }
        };
        let response = RequestResponse {
            request_id: update.request_id,
            reason: reason as i32,
            message: message.to_owned(),
            request: Some(proto::request_response::Request::UpdateMetadata(update)),
        };
        self.say(&proto::response(signal_response::Message::RequestResponse(
            response,
        )))
        .await
    }
}
