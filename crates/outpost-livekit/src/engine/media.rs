//! Media: our audio tracks (publish, mute, unpublish), remote audio tracks and
//! their publishers, and subscriptions to the assistant's audio.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::audio::LocalShared;
use crate::error::{Error, Result};
use crate::events::RoomEvent;
use crate::proto::{self, signal_request};
use crate::types::{Participant, TrackSubscribers};

use super::Engine;

/// A track we asked the server to publish, waiting for its `TrackPublishedResponse`.
pub(super) struct PendingTrack {
    pub(super) local: Arc<LocalShared>,
    pub(super) out: outpost_webrtc::LocalAudioTrack,
    pub(super) done: oneshot::Sender<Result<String>>,
}

/// Audio tracks of unknown publishers held at once; the oldest goes beyond it.
const MAX_UNOWNED_AUDIO: usize = 8;

/// A subscribed audio track waiting for its publisher to be named.
pub(super) struct UnownedAudio {
    pub(super) sid: String,
    /// The publisher's sid, from the track's stream id (`<participant sid>|<track sid>`).
    pub(super) stream_sid: String,
    pub(super) stream: crate::audio::AudioStream,
}

impl Engine {
    /// A remote track arrived on the subscriber connection: decode it (audio only).
    pub(super) fn on_remote_track(&mut self, track: outpost_webrtc::RemoteTrack) {
        if track.kind() != outpost_webrtc::MediaKind::Audio {
            tracing::debug!(track = %track.track_id(), "ignoring a video track");
            return;
        }
        let sid = track.track_id().to_owned();
        let stream_sid = track.stream_id().split('|').next().unwrap_or("").to_owned();
        let (stream, task) = crate::audio::spawn_receiver(track);
        if let Some(old) = self.receivers_audio.insert(sid.clone(), task) {
            old.abort();
        }
        self.unowned_audio.retain(|u| u.sid != sid);
        self.unowned_audio.push(UnownedAudio {
            sid,
            stream_sid,
            stream,
        });
        self.adopt_audio();
        if self.unowned_audio.len() > MAX_UNOWNED_AUDIO {
            let old = self.unowned_audio.remove(0);
            tracing::info!(track = %old.sid, "dropping audio whose publisher was never named");
            if let Some(task) = self.receivers_audio.remove(&old.sid) {
                task.abort();
            }
        }
    }

    /// The publisher of `sid` (whose stream names `stream_sid`), when the room knows it:
    /// from the participant updates' track lists, else by session id.
    pub(super) fn audio_owner(&self, sid: &str, stream_sid: &str) -> Option<Participant> {
        let owner = self
            .published
            .iter()
            .find(|(_, ts)| ts.iter().any(|t| t.sid == sid))
            .map(|(identity, _)| identity.clone());
        let roster = self.shared.roster();
        roster
            .remote
            .iter()
            .find(|p| {
                Some(&p.identity) == owner.as_ref()
                    || (!stream_sid.is_empty() && p.sid == stream_sid)
            })
            .cloned()
    }

    /// Tells the application about the held audio tracks whose publisher is now known.
    /// One that stays unknown (a hidden participant's, or media that came before the
    /// participant update) is never reported as anyone's.
    pub(super) fn adopt_audio(&mut self) {
        let mut i = 0;
        while i < self.unowned_audio.len() {
            let u = &self.unowned_audio[i];
            let Some(participant) = self.audio_owner(&u.sid, &u.stream_sid) else {
                tracing::debug!(track = %u.sid, "audio of a publisher not named yet; held");
                i += 1;
                continue;
            };
            let u = self.unowned_audio.remove(i);
            tracing::info!(track = %u.sid, from = %participant.identity, "audio track subscribed");
            self.emit(RoomEvent::AudioTrackSubscribed {
                participant,
                track_sid: u.sid,
                stream: u.stream,
            });
        }
    }

    /// Adds our audio track to the publisher connection and asks the server to
    /// publish it; `done` is answered when the server confirms it.
    pub(super) async fn publish_audio(
        &mut self,
        name: String,
        local: Arc<LocalShared>,
        done: oneshot::Sender<Result<String>>,
    ) {
        self.pending_tracks.retain(|_, p| !p.done.is_closed());
        let Some(link) = self.link.as_ref() else {
            let _ = done.send(Err(Error::Closed("not connected to the room".into())));
            return;
        };
        let cid = format!("TR_{}", nanoid::nanoid!(12));
        let stream_id = self
            .shared
            .roster()
            .local
            .as_ref()
            .map(|l| format!("{}|{cid}", l.sid))
            .unwrap_or_else(|| cid.clone());
        let out = match link.publisher.add_audio_track(&stream_id, &cid).await {
            Ok(o) => o,
            Err(e) => {
                let _ = done.send(Err(e));
                return;
            }
        };
        let stereo = local.channels() == 2;
        link.signal
            .send(signal_request::Message::AddTrack(proto::add_audio_track(
                &cid,
                &name,
                stereo,
                local.is_muted(),
            )))
            .await;
        self.pending_tracks
            .insert(cid, PendingTrack { local, out, done });
    }

    /// The server unpublished our track `sid` (our permission to publish was revoked, or
    /// the operator removed it): it stops being sent and leaves the publisher.
    pub(super) async fn on_server_unpublished(&mut self, sid: &str) {
        let Some(local) = self.local_tracks.remove(sid) else {
            return;
        };
        tracing::info!(track = %sid, "the server unpublished our track");
        let out = local.out();
        local.set_out(None);
        if let (Some(link), Some(out)) = (self.link.as_ref(), out) {
            if let Err(e) = link.publisher.remove_track(&out).await {
                tracing::debug!("removing the unpublished track: {e}");
            }
        }
        if let Err(e) = self.renegotiate().await {
            tracing::debug!("renegotiating after the server's unpublish: {e}");
        }
        self.emit(RoomEvent::LocalTrackUnpublished {
            sid: sid.to_owned(),
            by_server: true,
        });
    }

    /// The server asks us to mute or unmute our track `sid` (livekit-server does when the
    /// room's operator changed it through the API). A mute is followed here and told to
    /// the application; an unmute is not (only the user unmutes a microphone), and the
    /// server is told the track stays muted.
    pub(super) async fn on_server_mute(&mut self, sid: &str, muted: bool) {
        let Some(local) = self.local_tracks.get(sid) else {
            return;
        };
        if muted {
            if !local.is_muted() {
                tracing::info!(track = %sid, "the server muted our track");
                local.set_muted_here(true);
                self.emit(RoomEvent::LocalTrackMutedByServer {
                    sid: sid.to_owned(),
                });
            }
        } else if local.is_muted() {
            tracing::info!(track = %sid, "the server asks us to unmute our track; only its user does");
            if let Some(link) = self.link.as_ref() {
                link.signal.send(proto::mute_track(sid, true)).await;
            }
        }
    }

    /// The server refused our track `cid`: it leaves the publisher and its caller hears why.
    pub(super) async fn refuse_track(&mut self, cid: &str, why: Error) {
        let Some(pending) = self.pending_tracks.remove(cid) else {
            tracing::debug!(%cid, "a refusal for a track we are not waiting for: {why}");
            return;
        };
        tracing::info!(%cid, "the server refused our track: {why}");
        if let Some(link) = self.link.as_ref() {
            if let Err(e) = link.publisher.remove_track(&pending.out).await {
                tracing::debug!("removing the refused track: {e}");
            }
        }
        let _ = pending.done.send(Err(why));
    }

    /// The server published our track `cid` as `sid`: renegotiate so it is sent.
    pub(super) async fn on_track_published(&mut self, cid: String, sid: Option<String>) {
        let Some(pending) = self.pending_tracks.remove(&cid) else {
            tracing::debug!(%cid, "TrackPublished for a track we did not ask for");
            return;
        };
        let Some(sid) = sid.filter(|s| !s.is_empty()) else {
            let _ = pending.done.send(Err(Error::Signal(format!(
                "the server confirmed track {cid} without a sid"
            ))));
            return;
        };
        pending.local.set_out(Some(pending.out));
        self.local_tracks.insert(sid.clone(), pending.local);
        let verdict = self.renegotiate().await.map(|()| sid);
        let _ = pending.done.send(verdict);
    }

    /// Stops sending our track `sid` and renegotiates.
    pub(super) async fn unpublish(&mut self, sid: &str) -> Result<()> {
        let Some(local) = self.local_tracks.remove(sid) else {
            return Err(Error::Closed(format!("track {sid} is not published")));
        };
        let out = local.out();
        local.set_out(None);
        let Some(link) = self.link.as_ref() else {
            return Ok(());
        };
        if let Some(out) = out {
            link.publisher.remove_track(&out).await?;
        }
        self.renegotiate().await
    }

    /// Notes the assistant's audio tracks we have not asked the server for yet (with
    /// `auto_subscribe` off and `subscribe_to_assistant` on); the event loop sends the
    /// request ([`Engine::send_subscriptions`]).
    pub(super) fn want_assistant_audio(&mut self) {
        if self.opts.auto_subscribe || !self.opts.subscribe_to_assistant {
            return;
        }
        let Some(assistant) = self.shared.roster().assistant.clone() else {
            return;
        };
        let Some(link) = self.link.as_mut() else {
            return;
        };
        for t in self
            .published
            .get(&assistant.identity)
            .into_iter()
            .flatten()
        {
            if t.audio && link.subscribed.insert(t.sid.clone()) {
                link.to_subscribe.push(t.sid.clone());
            }
        }
    }

    /// Sends the subscriptions [`Engine::want_assistant_audio`] noted.
    pub(super) async fn send_subscriptions(&mut self) {
        let Some(link) = self.link.as_mut() else {
            return;
        };
        if link.to_subscribe.is_empty() {
            return;
        }
        let tracks = std::mem::take(&mut link.to_subscribe);
        tracing::debug!(?tracks, "subscribing to the assistant's audio");
        link.signal
            .send(signal_request::Message::Subscription(proto::subscription(
                tracks, true,
            )))
            .await;
    }

    /// Tells the server who may subscribe to our tracks, when it changed (with
    /// [`TrackSubscribers::Assistant`]: the assistant only, by identity).
    pub(super) async fn sync_subscription_permission(&mut self) {
        if self.opts.track_subscribers != TrackSubscribers::Assistant {
            return;
        }
        let assistant = self.shared.assistant_identity();
        if self.permitted.as_ref() == Some(&assistant) {
            return;
        }
        let Some(link) = self.link.as_ref() else {
            return;
        };
        tracing::info!(subscriber = ?assistant, "only the assistant may subscribe to our tracks");
        link.signal
            .send(signal_request::Message::SubscriptionPermission(
                proto::subscription_permission(Some(assistant.as_deref())),
            ))
            .await;
        self.permitted = Some(assistant);
    }
}
