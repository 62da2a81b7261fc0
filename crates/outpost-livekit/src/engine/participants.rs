//! The roster: participant updates, the assistant, and each participant's track list.

use tokio::time::Instant;

use crate::attributes::profile_events;
use crate::events::RoomEvent;
use crate::proto::{self, ParticipantInfo};
use crate::types::{Participant, ParticipantKind, TrackInfo};

use super::Engine;

impl Engine {
    pub(super) fn is_local(&self, info: &ParticipantInfo) -> bool {
        let roster = self.shared.roster();
        roster
            .local
            .as_ref()
            .is_some_and(|l| l.sid == info.sid || l.identity == info.identity)
    }

    /// Compares the mute state of our tracks in our own participant info with ours, the
    /// first time the server lists each (after it was published, or after the server
    /// answered a mute of it with NOT_FOUND), and notes the ones to tell it again.
    ///
    /// livekit-server (v1.13.5) can lose a mute request that arrives while it takes in
    /// the track's first media: the request finds the track neither pending nor
    /// published, is answered NOT_FOUND, and the track keeps the state its
    /// `AddTrackRequest` (or an earlier mute) gave it. We send no media while muted, so
    /// our first unmute and our first packets always arrive together; a track the user
    /// unmuted then stayed muted for everyone, and the server forwarded nothing of it.
    /// Only the first listing is compared: a later difference is the server's own
    /// doing (an operator's mute), which is not undone here.
    pub(super) fn check_our_mutes(&mut self, info: &ParticipantInfo) {
        let local_tracks = &self.local_tracks;
        self.tracks_listed
            .retain(|sid| local_tracks.contains_key(sid));
        for t in &info.tracks {
            let Some(local) = self.local_tracks.get(&t.sid) else {
                continue;
            };
            if !self.tracks_listed.insert(t.sid.clone()) {
                continue;
            }
            let wanted = local.is_muted();
            if t.muted != wanted {
                self.mute_again.retain(|(sid, _)| sid != &t.sid);
                self.mute_again.push((t.sid.clone(), wanted));
            }
        }
    }

    /// The server could not find our track `sid` to mute or unmute: its next listing in
    /// our participant info is compared again ([`Engine::check_our_mutes`]).
    pub(super) fn mute_not_found(&mut self, sid: &str) {
        if self.local_tracks.contains_key(sid) {
            tracing::info!(track = %sid, "the server did not find our track to (un)mute; checking its next listing");
            self.tracks_listed.remove(sid);
        }
    }

    /// Tells the server again the mute states [`Engine::check_our_mutes`] found it lost.
    pub(super) async fn send_mutes_again(&mut self) {
        let again = std::mem::take(&mut self.mute_again);
        let Some(link) = self.link.as_ref() else {
            return;
        };
        for (sid, muted) in again {
            tracing::info!(track = %sid, muted, "the server lists our track with another mute state; telling it again");
            link.signal.send(proto::mute_track(&sid, muted)).await;
        }
    }

    /// Applies a participant update.
    pub(super) fn update_roster(&mut self, infos: &[ParticipantInfo]) {
        let mut events = Vec::new();
        let mut track_updates = Vec::new();
        for info in infos {
            if !self.is_local(info) {
                let tracks = if proto::is_disconnected(info) {
                    Vec::new()
                } else {
                    proto::tracks(info)
                };
                track_updates.push((proto::participant(info), tracks));
            }
            if self.is_local(info) {
                // Our own name, metadata and attributes as the server now has them.
                if !proto::is_disconnected(info) {
                    self.announced();
                    self.check_our_mutes(info);
                    let permission = proto::permission(info);
                    if permission != self.permission {
                        if let Some((can_publish, can_publish_data, can_subscribe)) = permission {
                            tracing::info!(
                                can_publish,
                                can_publish_data,
                                can_subscribe,
                                "the server changed our permissions"
                            );
                            if self.permission.is_some() {
                                events.push(RoomEvent::LocalPermissionsChanged {
                                    can_publish,
                                    can_publish_data,
                                    can_subscribe,
                                });
                            }
                        }
                        self.permission = permission;
                    }
                    let mut roster = self.shared.roster();
                    if let Some(local) = roster.local.as_mut() {
                        let new = proto::participant(info);
                        events.extend(profile_events(local, &new));
                        *local = new;
                    }
                }
                continue;
            }
            let p = proto::participant(info);
            let mut roster = self.shared.roster();
            let pos = roster.remote.iter().position(|r| r.identity == p.identity);
            if proto::is_disconnected(info) {
                if let Some(i) = pos {
                    if roster.remote[i].sid == p.sid || p.sid.is_empty() {
                        let gone = roster.remote.remove(i);
                        drop(roster);
                        self.receivers
                            .abort_from_participant(&gone, "the sender left mid-stream");
                        self.rpc.participant_left(&gone.identity);
                        events.push(RoomEvent::ParticipantLeft(gone));
                    }
                }
            } else if let Some(i) =
                pos.filter(|&i| !p.sid.is_empty() && roster.remote[i].sid != p.sid)
            {
                // The same identity with a new session: livekit-server tells clients of
                // protocol 12 and up only of the new one (identity-based reconnection),
                // so the old session's leave is ours to conclude.
                let gone = std::mem::replace(&mut roster.remote[i], p.clone());
                drop(roster);
                self.receivers
                    .abort_from_participant(&gone, "the sender left mid-stream");
                self.rpc.participant_left(&gone.identity);
                events.push(RoomEvent::ParticipantLeft(gone));
                events.push(RoomEvent::ParticipantJoined(p));
            } else if let Some(i) = pos {
                events.extend(profile_events(&roster.remote[i], &p));
                // Keep the assistant's copy current before anyone hears of the change.
                if roster
                    .assistant
                    .as_ref()
                    .is_some_and(|a| a.identity == p.identity)
                {
                    roster.assistant = Some(p.clone());
                }
                roster.remote[i] = p;
            } else {
                roster.remote.push(p.clone());
                events.push(RoomEvent::ParticipantJoined(p));
            }
        }
        for (p, tracks) in track_updates {
            self.diff_tracks(p, tracks, &mut events);
        }
        for ev in events {
            self.emit(ev);
        }
        self.update_assistant();
        self.adopt_audio();
        self.want_assistant_audio();
        self.release_held(Instant::now());
    }

    /// After a (re)join: the join response's list is the truth.
    pub(super) fn replace_roster(&mut self, infos: &[ParticipantInfo]) {
        let fresh: Vec<Participant> = infos
            .iter()
            .filter(|i| !proto::is_disconnected(i))
            .map(proto::participant)
            .collect();
        let mut events = Vec::new();
        {
            let mut roster = self.shared.roster();
            let local_identity = roster.local.as_ref().map(|l| l.identity.clone());
            let fresh: Vec<Participant> = fresh
                .into_iter()
                .filter(|p| Some(&p.identity) != local_identity.as_ref())
                .collect();
            for old in &roster.remote {
                if !fresh.iter().any(|p| p.identity == old.identity) {
                    events.push(RoomEvent::ParticipantLeft(old.clone()));
                }
            }
            for p in &fresh {
                match roster.remote.iter().find(|o| o.identity == p.identity) {
                    Some(old) => events.extend(profile_events(old, p)),
                    None => events.push(RoomEvent::ParticipantJoined(p.clone())),
                }
            }
            if let Some(a) = roster.assistant.as_mut() {
                if let Some(p) = fresh.iter().find(|p| p.identity == a.identity) {
                    *a = p.clone();
                }
            }
            roster.remote = fresh;
        }
        let mut track_updates: Vec<(Participant, Vec<TrackInfo>)> = events
            .iter()
            .filter_map(|ev| match ev {
                RoomEvent::ParticipantLeft(p) => Some((p.clone(), Vec::new())),
                _ => None,
            })
            .collect();
        for info in infos {
            if !proto::is_disconnected(info) && !self.is_local(info) {
                track_updates.push((proto::participant(info), proto::tracks(info)));
            }
        }
        for (p, tracks) in track_updates {
            self.diff_tracks(p, tracks, &mut events);
        }
        for ev in events {
            if let RoomEvent::ParticipantLeft(p) = &ev {
                self.receivers
                    .abort_from_participant(p, "the sender left mid-stream");
                self.rpc.participant_left(&p.identity);
            }
            self.emit(ev);
        }
        self.update_assistant();
        self.adopt_audio();
        self.want_assistant_audio();
        self.release_held(Instant::now());
    }

    /// Track events for a participant whose tracks are now `tracks`.
    pub(super) fn diff_tracks(
        &mut self,
        p: Participant,
        tracks: Vec<TrackInfo>,
        events: &mut Vec<RoomEvent>,
    ) {
        let old = self.published.remove(&p.identity).unwrap_or_default();
        for t in &old {
            if !tracks.iter().any(|n| n.sid == t.sid) {
                if let Some(task) = self.receivers_audio.remove(&t.sid) {
                    task.abort();
                }
                self.unowned_audio.retain(|u| u.sid != t.sid);
                events.push(RoomEvent::TrackUnpublished {
                    participant: p.clone(),
                    track: t.clone(),
                });
            }
        }
        for t in &tracks {
            match old.iter().find(|o| o.sid == t.sid) {
                None => events.push(RoomEvent::TrackPublished {
                    participant: p.clone(),
                    track: t.clone(),
                }),
                Some(o) if o.muted != t.muted => events.push(RoomEvent::TrackMuted {
                    participant: p.clone(),
                    track: t.clone(),
                }),
                Some(_) => {}
            }
        }
        if !tracks.is_empty() {
            self.published.insert(p.identity.clone(), tracks);
        }
    }

    pub(super) fn update_assistant(&mut self) {
        let (old, new) = {
            let mut roster = self.shared.roster();
            let new = match &self.opts.assistant_identity {
                Some(id) => roster.remote.iter().find(|p| &p.identity == id).cloned(),
                None => {
                    let current = roster.assistant.as_ref().and_then(|a| {
                        roster
                            .remote
                            .iter()
                            .find(|p| p.identity == a.identity)
                            .cloned()
                    });
                    current.or_else(|| {
                        roster
                            .remote
                            .iter()
                            .find(|p| p.kind == ParticipantKind::Agent)
                            .cloned()
                    })
                }
            };
            let old = std::mem::replace(&mut roster.assistant, new.clone());
            (old, new)
        };
        let same = match (&old, &new) {
            // A new session of the same identity is a new assistant: its hello, grants
            // and tool calls start over.
            (Some(a), Some(b)) => a.identity == b.identity && a.sid == b.sid,
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        if let Some(old) = old {
            self.emit(RoomEvent::AssistantLeft(old));
        }
        if let Some(new) = new {
            self.emit(RoomEvent::AssistantJoined(new));
        }
    }
}
