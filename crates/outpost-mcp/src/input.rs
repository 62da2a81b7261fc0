//! The `input_required` rounds of MCP 2026-07-28 (multi round-trip requests, SEP-2322).
//!
//! A server on that revision cannot send the host requests of its own. When a tool needs
//! the user (elicitation), the roots or a model (sampling) before it can answer, the
//! server answers `tools/call` with what it needs (`inputRequests`) and an opaque
//! `requestState`. The host answers each need exactly as it answers the same server
//! request on older revisions ([`Handler`]), then sends the call again with the answers
//! (`inputResponses`) and the state, echoed unread. [`crate::Connection::call`] drives the
//! rounds within the call's timeout and cancellation, at most [`MAX_ROUNDS`] of them.

// Roots and sampling are marked deprecated in rmcp (SEP-2577) but still ride these rounds.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{InputRequest, InputRequiredResult, InputResponses};
use serde_json::Value;

use crate::handler::Handler;

/// Most rounds of one call (rmcp's and the other official SDKs' default); a server that
/// still needs input after them fails the call.
pub const MAX_ROUNDS: usize = 10;

/// Most needs one round may name. Each may be a question to the user, asked one after
/// the other, so more than a few is not a form anyone should answer.
pub const MAX_INPUTS_PER_ROUND: usize = 8;

/// Longest `requestState` echoed back. The server keeps what it needs in it; past this it
/// is not a state but a payload the host would carry for it.
pub const MAX_REQUEST_STATE: usize = 64 * 1024;

/// Longest key of one need (the server's name for it, echoed in the answer).
const MAX_KEY: usize = 256;

/// What the next round sends along with the call.
#[derive(Debug, Default, Clone)]
pub(crate) struct Retry {
    pub input_responses: Option<InputResponses>,
    pub request_state: Option<String>,
}

/// Answers one `input_required` result. `state_only_rounds` counts consecutive rounds that
/// named no need (only a state): those wait a little before the next round, more each
/// time, so a server polling through them cannot make the host spin.
///
/// An `Err` is why the round cannot be answered: the call fails with it.
pub(crate) async fn answer(
    handler: &Handler,
    needs: InputRequiredResult,
    state_only_rounds: &mut u32,
) -> Result<Retry, String> {
    let requests = needs.input_requests.unwrap_or_default();
    if requests.is_empty() && needs.request_state.is_none() {
        return Err("it asked for input but named neither a need nor a state".into());
    }
    if requests.len() > MAX_INPUTS_PER_ROUND {
        return Err(format!(
            "it asked for {} inputs in one round (at most {MAX_INPUTS_PER_ROUND})",
            requests.len()
        ));
    }
    if let Some(state) = &needs.request_state
        && state.len() > MAX_REQUEST_STATE
    {
        return Err(format!(
            "its requestState takes {} bytes (at most {MAX_REQUEST_STATE})",
            state.len()
        ));
    }
    if let Some(key) = requests.keys().find(|k| k.is_empty() || k.len() > MAX_KEY) {
        return Err(format!(
            "an input request's key is empty or longer than {MAX_KEY} bytes ({} bytes)",
            key.len()
        ));
    }

    if requests.is_empty() {
        tokio::time::sleep(state_only_pause(*state_only_rounds)).await;
        *state_only_rounds += 1;
    } else {
        *state_only_rounds = 0;
    }

    // One question at a time, in the order of their keys (the map keeps no other).
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let answer = match request {
            InputRequest::Elicitation(r) => handler.elicit(r.params).await.and_then(to_value),
            InputRequest::ListRoots(_) => to_value(handler.roots_now()),
            InputRequest::CreateMessage(r) => handler.sample(r.params).await.and_then(to_value),
            _ => Err(rmcp::model::ErrorData::invalid_request(
                "Outpost does not know this kind of input request",
                None,
            )),
        }
        .map_err(|e| {
            format!(
                "its input request '{key}' could not be answered: {}",
                e.message
            )
        })?;
        responses.insert(key, answer);
    }
    Ok(Retry {
        input_responses: (!responses.is_empty()).then_some(responses),
        request_state: needs.request_state,
    })
}

fn to_value(answer: impl serde::Serialize) -> Result<Value, rmcp::model::ErrorData> {
    serde_json::to_value(answer)
        .map_err(|e| rmcp::model::ErrorData::internal_error(format!("answer: {e}"), None))
}

/// 50 ms, doubling up to 1 s.
fn state_only_pause(rounds: u32) -> Duration {
    Duration::from_millis((50u64 << rounds.min(5)).min(1000))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::handler::Shared;
    use crate::requests::{DefaultRequests, Root};
    use serde_json::json;
    use std::sync::Arc;

    fn handler(roots: Vec<Root>) -> Handler {
        Handler {
            server: "s".into(),
            info: Default::default(),
            roots: tokio::sync::watch::channel(roots).1,
            requests: Arc::new(DefaultRequests),
            shared: Shared::new(),
        }
    }

    fn needs(wire: Value) -> InputRequiredResult {
        serde_json::from_value(wire).unwrap()
    }

    fn roots_request() -> Value {
        json!({"method": "roots/list"})
    }

    #[tokio::test]
    async fn each_need_is_answered_under_its_key_and_the_state_goes_back_unread() {
        let root = Root {
            uri: "file:///home/me/src".into(),
            name: Some("src".into()),
        };
        let form = json!({"method": "elicitation/create", "params": {"mode": "form",
            "message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}});
        let got = answer(
            &handler(vec![root]),
            needs(json!({"resultType": "input_required",
                "inputRequests": {"r": roots_request(), "q": form},
                "requestState": "opaque \u{0} state"})),
            &mut 0,
        )
        .await
        .unwrap();
        let responses = got.input_responses.unwrap();
        assert_eq!(
            responses["r"],
            json!({"roots": [{"uri": "file:///home/me/src", "name": "src"}]})
        );
        // The default handler declines: an answer all the same.
        assert_eq!(responses["q"]["action"], json!("decline"));
        assert_eq!(got.request_state.as_deref(), Some("opaque \u{0} state"));
    }

    #[tokio::test]
    async fn too_many_needs_a_huge_state_or_a_bad_key_fail_the_round_clearly() {
        let many: serde_json::Map<String, Value> = (0..=MAX_INPUTS_PER_ROUND)
            .map(|i| (format!("k{i}"), roots_request()))
            .collect();
        let cases = [
            (
                json!({"resultType": "input_required", "inputRequests": many}),
                "inputs in one round",
            ),
            (
                json!({"resultType": "input_required",
                    "requestState": "x".repeat(MAX_REQUEST_STATE + 1)}),
                "requestState takes",
            ),
            (
                json!({"resultType": "input_required", "inputRequests": {"": roots_request()}}),
                "key is empty",
            ),
            (
                json!({"resultType": "input_required", "inputRequests": {},
                    "requestState": null}),
                "neither a need nor a state",
            ),
        ];
        for (wire, expected) in cases {
            let parsed = serde_json::from_value::<InputRequiredResult>(wire.clone()).unwrap();
            let err = answer(&handler(Vec::new()), parsed, &mut 0)
                .await
                .unwrap_err();
            assert!(err.contains(expected), "{wire}: {err}");
        }
    }

    #[test]
    fn rounds_with_only_a_state_wait_longer_each_time_but_never_past_a_second() {
        let pauses: Vec<u64> = (0..8)
            .map(|n| state_only_pause(n).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
    }
}
