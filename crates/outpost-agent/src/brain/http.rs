//! The HTTP both provider brains share: POST a JSON body, check the status, then either
//! read one JSON answer or walk the server-sent events.

use eventsource_stream::Eventsource as _;
use futures::StreamExt as _;
use serde_json::Value;

use crate::error::{Error, Result};

/// Longest error body kept for the message.
const ERROR_BODY_PREVIEW: usize = 500;

pub(crate) async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &Value,
) -> Result<reqwest::Response> {
    let mut req = client.post(url).header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = req
        .body(body.to_string())
        .send()
        .await
        .map_err(|source| Error::Http {
            url: url.to_owned(),
            source,
        })?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        let body: String = text.chars().take(ERROR_BODY_PREVIEW).collect();
        return Err(Error::Status {
            url: url.to_owned(),
            status: status.as_u16(),
            body,
        });
    }
    Ok(resp)
}

pub(crate) async fn json(url: &str, resp: reqwest::Response) -> Result<Value> {
    let text = resp.text().await.map_err(|source| Error::Http {
        url: url.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| Error::Stream {
        url: url.to_owned(),
        reason: format!("the answer is not JSON: {e}"),
    })
}

/// Calls `on_data(event_name, data)` for every event until it returns `true` (done).
/// A stream that ends before that is an error: the answer would be cut short.
pub(crate) async fn events(
    url: &str,
    resp: reqwest::Response,
    mut on_data: impl FnMut(&str, &str) -> Result<bool>,
) -> Result<()> {
    let mut stream = resp.bytes_stream().eventsource();
    while let Some(ev) = stream.next().await {
        let ev = ev.map_err(|e| Error::Stream {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
        if on_data(&ev.event, &ev.data)? {
            return Ok(());
        }
    }
    Err(Error::Truncated(url.to_owned()))
}
