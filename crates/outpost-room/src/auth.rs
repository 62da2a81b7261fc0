//! API key pairs, access-token minting (for the `token` command and tests) and
//! verification (HS256, as livekit-server does).

use std::time::Duration;

use livekit_token::{AccessToken, TokenVerifier, VideoGrants};

use crate::error::{Error, Result};

/// The key pair `livekit-server --dev` uses; ours too unless told otherwise.
pub const DEV_KEY: &str = "devkey";
/// Secret of the dev key pair.
pub const DEV_SECRET: &str = "secret";

/// An API key and its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    /// API key (the token's `iss`).
    pub key: String,
    /// HMAC secret.
    pub secret: String,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Default for Keys {
    fn default() -> Self {
        Self::dev()
    }
}

impl std::str::FromStr for Keys {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.split_once(':') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok(Self {
                key: k.to_owned(),
                secret: v.to_owned(),
            }),
            _ => Err(Error::BadKeys(s.to_owned())),
        }
    }
}

impl Keys {
    /// The dev key pair (`devkey:secret`).
    pub fn dev() -> Self {
        Self {
            key: DEV_KEY.to_owned(),
            secret: DEV_SECRET.to_owned(),
        }
    }

    /// Mints a token that lets `identity` join `room` for `ttl` and update its own
    /// name, metadata and attributes.
    pub fn mint(
        &self,
        room: &str,
        identity: &str,
        name: Option<&str>,
        ttl: Duration,
    ) -> Result<String> {
        self.mint_with_kind(room, identity, name, ttl, "")
    }

    /// Like [`Keys::mint`], with the participant `kind` claim (`agent` for assistants).
    pub fn mint_with_kind(
        &self,
        room: &str,
        identity: &str,
        name: Option<&str>,
        ttl: Duration,
        kind: &str,
    ) -> Result<String> {
        let mut token = AccessToken::with_api_key(&self.key, &self.secret)
            .with_identity(identity)
            .with_ttl(ttl)
            .with_grants(VideoGrants {
                room_join: true,
                room: room.to_owned(),
                // Agents publish their state as an attribute (`lk.agent.state`), so the
                // tokens this server hands out for local use allow it.
                can_update_own_metadata: Some(true),
                ..Default::default()
            });
        if let Some(name) = name {
            token = token.with_name(name);
        }
        if !kind.is_empty() {
            token = token.with_kind(kind);
        }
        token.to_jwt().map_err(|e| Error::Token(e.to_string()))
    }

    /// Verifies a token and returns who may join which room.
    pub fn verify(&self, token: &str) -> Result<Grant> {
        let claims = TokenVerifier::with_api_key(&self.key, &self.secret)
            .verify(token)
            .map_err(|e| Error::Unauthorized(describe(&e)))?;
        if !claims.video.room_join || claims.video.room.is_empty() {
            return Err(Error::Unauthorized(
                "token has no room grant (video.roomJoin with video.room)".to_owned(),
            ));
        }
        if claims.sub.is_empty() {
            return Err(Error::Unauthorized(
                "token has no identity (sub)".to_owned(),
            ));
        }
        Ok(Grant {
            room: claims.video.room.clone(),
            identity: claims.sub.clone(),
            name: claims.name.clone(),
            metadata: claims.metadata.clone(),
            attributes: claims.attributes.clone(),
            can_publish: claims.video.can_publish(),
            can_subscribe: claims.video.can_subscribe(),
            can_publish_data: claims.video.can_publish_data.unwrap_or(true),
            hidden: claims.video.hidden,
            can_update_own_metadata: claims.video.can_update_own_metadata(),
            kind: claims.kind.clone(),
        })
    }
}

/// What a verified token allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Room name.
    pub room: String,
    /// Participant identity (`sub`).
    pub identity: String,
    /// Display name.
    pub name: String,
    /// Participant metadata.
    pub metadata: String,
    /// Participant attributes.
    pub attributes: std::collections::HashMap<String, String>,
    /// May publish tracks.
    pub can_publish: bool,
    /// May subscribe.
    pub can_subscribe: bool,
    /// May send data packets.
    pub can_publish_data: bool,
    /// Invisible to others.
    pub hidden: bool,
    /// May change its own name, metadata and attributes (`canUpdateOwnMetadata`;
    /// off unless the token grants it, as in livekit-server).
    pub can_update_own_metadata: bool,
    /// The token's participant kind (`standard`, `agent`, `sip`, …; empty means standard),
    /// reported to the other participants so SDKs can tell an agent apart.
    pub kind: String,
}

fn describe(e: &livekit_token::AccessTokenError) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e {
        livekit_token::AccessTokenError::Encoding(jwt) => match jwt.kind() {
            K::ExpiredSignature => "token expired".to_owned(),
            K::ImmatureSignature => "token not valid yet (nbf)".to_owned(),
            K::InvalidSignature => "token signature invalid (wrong secret?)".to_owned(),
            K::InvalidIssuer => "token issued for another API key".to_owned(),
            K::InvalidAlgorithm => "token algorithm is not HS256".to_owned(),
            other => format!("token malformed: {other:?}"),
        },
        other => format!("token rejected: {other}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn kind_claim_round_trips() {
        let keys = Keys::default();
        let t = keys
            .mint_with_kind("r", "assistant", None, Duration::from_secs(60), "agent")
            .unwrap();
        assert_eq!(keys.verify(&t).unwrap().kind, "agent");
        let t = keys.mint("r", "u", None, Duration::from_secs(60)).unwrap();
        assert_eq!(keys.verify(&t).unwrap().kind, "");
    }

    #[test]
    fn mint_and_verify() {
        let k = Keys::dev();
        let t = k
            .mint("r1", "alice", Some("Alice"), Duration::from_secs(60))
            .unwrap();
        let g = k.verify(&t).unwrap();
        assert_eq!(
            (g.room.as_str(), g.identity.as_str(), g.name.as_str()),
            ("r1", "alice", "Alice")
        );
    }

    #[test]
    fn wrong_secret_is_refused_with_reason() {
        let t = Keys::dev()
            .mint("r", "a", None, Duration::from_secs(60))
            .unwrap();
        let other: Keys = "devkey:other".parse().unwrap();
        let err = other.verify(&t).unwrap_err().to_string();
        assert!(err.contains("signature"), "{err}");
    }

    #[test]
    fn expired_is_refused_with_reason() {
        let claims = livekit_token::Claims {
            exp: 1_000,
            iss: DEV_KEY.into(),
            sub: "a".into(),
            video: VideoGrants {
                room_join: true,
                room: "r".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        // Mint once so livekit-token installs jsonwebtoken's HMAC provider.
        Keys::dev()
            .mint("r", "a", None, Duration::from_secs(1))
            .unwrap();
        let t = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(DEV_SECRET.as_bytes()),
        )
        .unwrap();
        let err = Keys::dev().verify(&t).unwrap_err().to_string();
        assert!(err.contains("expired"), "{err}");
    }

    #[test]
    fn missing_room_grant_is_refused() {
        let t = AccessToken::with_api_key(DEV_KEY, DEV_SECRET)
            .with_identity("a")
            .to_jwt()
            .unwrap();
        let err = Keys::dev().verify(&t).unwrap_err().to_string();
        assert!(err.contains("room grant"), "{err}");
    }

    #[test]
    fn garbage_token_is_refused() {
        assert!(Keys::dev().verify("not.a.jwt").is_err());
        assert!(Keys::dev().verify("").is_err());
    }

    #[test]
    fn key_pair_parsing() {
        assert!("a:b".parse::<Keys>().is_ok());
        assert!("ab".parse::<Keys>().is_err());
        assert!(":b".parse::<Keys>().is_err());
        assert!("a:".parse::<Keys>().is_err());
    }
}
