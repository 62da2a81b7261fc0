//! Participant name, metadata and attributes: what changed between two views of a
//! participant, as events, and the signal request that changes our own.

use std::collections::HashMap;

use crate::events::RoomEvent;
use crate::proto::UpdateParticipantMetadata;
use crate::types::Participant;

/// The attributes that differ between `old` and `new`, with their new values; a
/// removed key maps to an empty string (as the official SDKs report it).
pub(crate) fn changed_attributes(
    old: &HashMap<String, String>,
    new: &HashMap<String, String>,
) -> HashMap<String, String> {
    let mut changed: HashMap<String, String> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for k in old.keys() {
        if !new.contains_key(k) {
            changed.insert(k.clone(), String::new());
        }
    }
    changed
}

/// Events for what changed from `old` to `new` (the same participant): name,
/// metadata, attributes, in that order (the official SDKs' order).
pub(crate) fn profile_events(old: &Participant, new: &Participant) -> Vec<RoomEvent> {
    let mut events = Vec::new();
    if old.name != new.name {
        events.push(RoomEvent::ParticipantNameChanged {
            participant: new.clone(),
            old_name: old.name.clone(),
        });
    }
    if old.metadata != new.metadata {
        events.push(RoomEvent::ParticipantMetadataChanged {
            participant: new.clone(),
            old_metadata: old.metadata.clone(),
        });
    }
    let changed = changed_attributes(&old.attributes, &new.attributes);
    if !changed.is_empty() {
        events.push(RoomEvent::ParticipantAttributesChanged {
            participant: new.clone(),
            changed,
        });
    }
    events
}

/// What to change about ourselves; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProfileUpdate {
    pub name: Option<String>,
    pub metadata: Option<String>,
    pub attributes: HashMap<String, String>,
}

impl ProfileUpdate {
    /// The signal request. Servers (livekit-server, outpost-room) leave an empty name
    /// or metadata as it is and merge attributes, an empty value deleting its key.
    pub(crate) fn request(self, request_id: u32) -> UpdateParticipantMetadata {
        UpdateParticipantMetadata {
            metadata: self.metadata.unwrap_or_default(),
            name: self.name.unwrap_or_default(),
            attributes: self.attributes,
            request_id,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::types::ParticipantKind;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn p(name: &str, metadata: &str, attributes: &[(&str, &str)]) -> Participant {
        Participant {
            sid: "PA_1".into(),
            identity: "agent".into(),
            name: name.into(),
            kind: ParticipantKind::Agent,
            metadata: metadata.into(),
            attributes: map(attributes),
            client_protocol: 0,
        }
    }

    #[test]
    fn changes_are_reported_with_deletions_as_empty_values() {
        let old = p(
            "A",
            "m",
            &[
                ("lk.agent.state", "listening"),
                ("gone", "1"),
                ("same", "x"),
            ],
        );
        let new = p(
            "A",
            "m",
            &[("lk.agent.state", "thinking"), ("same", "x"), ("new", "2")],
        );
        let events = profile_events(&old, &new);
        assert_eq!(events.len(), 1);
        let RoomEvent::ParticipantAttributesChanged {
            changed,
            participant,
        } = &events[0]
        else {
            panic!("{events:?}")
        };
        assert_eq!(
            changed,
            &map(&[("lk.agent.state", "thinking"), ("gone", ""), ("new", "2")])
        );
        assert_eq!(participant.attributes, new.attributes);
        assert!(profile_events(&new, &new).is_empty());
        let renamed = p(
            "B",
            "m2",
            &[("lk.agent.state", "thinking"), ("same", "x"), ("new", "2")],
        );
        let kinds: Vec<String> = profile_events(&new, &renamed)
            .iter()
            .map(|e| {
                format!("{e:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        assert_eq!(
            kinds,
            vec!["ParticipantNameChanged", "ParticipantMetadataChanged"]
        );
    }
}
