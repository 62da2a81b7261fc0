//! Fetching connection details from a token endpoint, following LiveKit's
//! token-server convention: a `POST` with a JSON body of optional snake_case fields
//! (`room_name`, `participant_identity`, `participant_name`, `participant_metadata`,
//! `participant_attributes`, `room_config`), answered with JSON carrying the server
//! URL and the participant token (`server_url` / `participant_token`, or the
//! camelCase `serverUrl` / `participantToken` some servers use). A `GET` variant
//! sends the same fields as query parameters. Extra headers (an app's own auth, or
//! LiveKit Cloud's sandbox `X-Sandbox-ID`) are passed through.

use std::collections::HashMap;
use std::time::Duration;

use livekit_net::{Header, HttpMethod};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How to call the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EndpointMethod {
    /// `POST` with a JSON body (LiveKit's standard endpoint).
    #[default]
    Post,
    /// `GET` with the fields as query parameters.
    Get,
}

/// A token endpoint.
#[derive(Debug, Clone)]
pub struct TokenEndpoint {
    /// `http://` or `https://` URL.
    pub url: String,
    /// POST (standard) or GET.
    pub method: EndpointMethod,
    /// Extra request headers, e.g. `Authorization` or `X-Sandbox-ID`.
    pub headers: Vec<(String, String)>,
    /// Deadline for the whole request.
    pub timeout: Duration,
}

impl TokenEndpoint {
    /// A standard `POST` endpoint with a 10 s deadline.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            method: EndpointMethod::Post,
            headers: Vec::new(),
            timeout: Duration::from_secs(10),
        }
    }

    /// Adds a request header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What we ask the endpoint for; every field is optional.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TokenRequest {
    /// Room to join.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room_name: Option<String>,
    /// Participant identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub participant_identity: Option<String>,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub participant_name: Option<String>,
    /// Metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub participant_metadata: Option<String>,
    /// Attributes.
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub participant_attributes: HashMap<String, String>,
    /// Room configuration (agent dispatch and so on), passed through as JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room_config: Option<serde_json::Value>,
}

impl TokenRequest {
    /// Asks for the LiveKit Agents agent registered as `agent_name` to be dispatched to
    /// the room (LiveKit's explicit dispatch: `room_config.agents`), as the official
    /// SDKs' token sources do. An empty name leaves the room to automatic dispatch.
    #[must_use]
    pub fn dispatch_agent(mut self, agent_name: &str) -> Self {
        if !agent_name.is_empty() {
            self.room_config = Some(serde_json::json!({
                "agents": [{ "agent_name": agent_name }]
            }));
        }
        self
    }

    /// The agent names this request asks to dispatch (from `room_config.agents`, in
    /// either spelling of the field).
    pub fn agent_names(&self) -> Vec<String> {
        self.room_config
            .as_ref()
            .and_then(|c| c.get("agents"))
            .and_then(|a| a.as_array())
            .map(|agents| {
                agents
                    .iter()
                    .filter_map(|a| a.get("agent_name").or_else(|| a.get("agentName")))
                    .filter_map(|n| n.as_str())
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A development token minted here from an API key pair (what `lk token create` or a
/// token endpoint would hand out), for the room, identity, name, metadata, attributes and
/// agent dispatch `request` asks for: join, publish, subscribe and publish data, valid
/// for `ttl`. For local development against your own livekit-server: in production the
/// secret belongs on a server, behind a token endpoint.
pub fn mint_dev_token(
    api_key: &str,
    api_secret: &str,
    request: &TokenRequest,
    ttl: Duration,
) -> Result<String> {
    let bad = |what: &str| Error::InvalidArgument(what.to_owned());
    if api_key.is_empty() || api_secret.is_empty() {
        return Err(bad("minting a token needs an API key and its secret"));
    }
    let room = request
        .room_name
        .clone()
        .filter(|r| !r.is_empty())
        .ok_or_else(|| bad("minting a token needs the room's name"))?;
    let identity = request
        .participant_identity
        .clone()
        .filter(|i| !i.is_empty())
        .ok_or_else(|| bad("minting a token needs this participant's identity"))?;
    let mut token = livekit_token::AccessToken::with_api_key(api_key, api_secret)
        .with_identity(&identity)
        .with_name(request.participant_name.as_deref().unwrap_or(&identity))
        .with_ttl(ttl)
        .with_grants(livekit_token::VideoGrants {
            room_join: true,
            room,
            ..Default::default()
        });
    if let Some(m) = &request.participant_metadata {
        token = token.with_metadata(m);
    }
    if !request.participant_attributes.is_empty() {
        token = token.with_attributes(request.participant_attributes.clone());
    }
    let agents = request.agent_names();
    if !agents.is_empty() {
        token = token.with_room_config(crate::proto::dispatch_config(&agents));
    }
    token
        .to_jwt()
        .map_err(|e| Error::InvalidArgument(format!("minting a token: {e}")))
}

/// The endpoint's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionDetails {
    /// `ws(s)://` URL of the LiveKit server.
    pub server_url: String,
    /// Access token.
    pub participant_token: String,
}

#[derive(Deserialize)]
struct Wire {
    #[serde(alias = "serverUrl")]
    server_url: Option<String>,
    #[serde(alias = "participantToken")]
    participant_token: Option<String>,
}

/// Parses an endpoint's JSON answer.
pub(crate) fn parse_details(url: &str, body: &[u8]) -> Result<ConnectionDetails> {
    let err = |reason: String| Error::TokenEndpoint {
        url: url.to_owned(),
        reason,
    };
    let w: Wire = serde_json::from_slice(body).map_err(|e| {
        err(format!(
            "answer is not the expected JSON ({e}): {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ))
    })?;
    match (w.server_url, w.participant_token) {
        (Some(server_url), Some(participant_token))
            if !server_url.is_empty() && !participant_token.is_empty() =>
        {
            Ok(ConnectionDetails {
                server_url,
                participant_token,
            })
        }
        _ => Err(err(
            "answer lacks server_url/serverUrl or participant_token/participantToken".into(),
        )),
    }
}

/// Asks the endpoint for connection details.
pub async fn fetch_connection_details(
    endpoint: &TokenEndpoint,
    request: &TokenRequest,
) -> Result<ConnectionDetails> {
    let err = |reason: String| Error::TokenEndpoint {
        url: endpoint.url.clone(),
        reason,
    };
    if !(endpoint.url.starts_with("http://") || endpoint.url.starts_with("https://")) {
        return Err(err("the URL must start with http:// or https://".into()));
    }
    let client =
        livekit_net::http_client().ok_or_else(|| err("no HTTP client available".into()))?;
    let mut headers: Vec<Header> = endpoint
        .headers
        .iter()
        .map(|(name, value)| Header {
            name: name.clone(),
            value: value.clone(),
        })
        .collect();
    let (method, url, body) = match endpoint.method {
        EndpointMethod::Post => {
            headers.push(Header {
                name: "Content-Type".into(),
                value: "application/json".into(),
            });
            let body = serde_json::to_vec(request).map_err(|e| err(e.to_string()))?;
            (HttpMethod::Post, endpoint.url.clone(), Some(body))
        }
        EndpointMethod::Get => {
            let value = serde_json::to_value(request).map_err(|e| err(e.to_string()))?;
            let mut url = endpoint.url.clone();
            let mut sep = if url.contains('?') { '&' } else { '?' };
            if let serde_json::Value::Object(map) = value {
                for (k, v) in map {
                    let v = match v {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    url.push(sep);
                    url.push_str(&percent_encode(&k));
                    url.push('=');
                    url.push_str(&percent_encode(&v));
                    sep = '&';
                }
            }
            (HttpMethod::Get, url, None)
        }
    };
    let resp = tokio::time::timeout(endpoint.timeout, client.request(method, url, headers, body))
        .await
        .map_err(|_| err(format!("no answer within {:?}", endpoint.timeout)))?
        .map_err(|e| err(e.to_string()))?;
    if !(200..300).contains(&resp.status) {
        return Err(err(format!(
            "HTTP {}: {}",
            resp.status,
            String::from_utf8_lossy(&resp.body[..resp.body.len().min(300)])
        )));
    }
    parse_details(&endpoint.url, &resp.body)
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod dispatch_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_dispatch_goes_into_the_request_and_into_a_minted_token() {
        let r = TokenRequest {
            room_name: Some("r".into()),
            participant_identity: Some("me".into()),
            ..TokenRequest::default()
        }
        .dispatch_agent("helper");
        let body = serde_json::to_value(&r).unwrap();
        assert_eq!(body["room_config"]["agents"][0]["agent_name"], "helper");
        assert_eq!(r.agent_names(), vec!["helper".to_string()]);
        let jwt = mint_dev_token("devkey", "secret", &r, Duration::from_secs(60)).unwrap();
        let claims = livekit_token::TokenVerifier::with_api_key("devkey", "secret")
            .verify(&jwt)
            .unwrap();
        assert_eq!(claims.sub, "me");
        assert!(claims.video.room_join);
        assert_eq!(claims.video.room, "r");
        let config = claims.room_config.unwrap();
        assert_eq!(config.agents.len(), 1);
        assert_eq!(config.agents[0].agent_name, "helper");
        // No room or identity: a clear error, not a token the server refuses later.
        assert!(
            mint_dev_token("k", "s", &TokenRequest::default(), Duration::from_secs(1)).is_err()
        );
        assert!(
            TokenRequest::default()
                .dispatch_agent("")
                .room_config
                .is_none()
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_both_spellings_and_rejects_incomplete_answers() {
        let a = parse_details("u", br#"{"server_url":"ws://x","participant_token":"t"}"#).unwrap();
        let b = parse_details("u", br#"{"serverUrl":"ws://x","participantToken":"t"}"#).unwrap();
        assert_eq!(a, b);
        assert!(parse_details("u", br#"{"serverUrl":"ws://x"}"#).is_err());
        assert!(parse_details("u", b"<html>").is_err());
    }

    #[test]
    fn request_serialises_only_given_fields() {
        let r = TokenRequest {
            room_name: Some("r".into()),
            ..Default::default()
        };
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"room_name":"r"}"#);
        assert_eq!(percent_encode("a b&c"), "a%20b%26c");
    }
}
