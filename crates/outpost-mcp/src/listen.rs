//! `subscriptions/listen` (MCP 2026-07-28, SEP-2575): on that revision a server announces a
//! changed tool list only on a stream the client opened for it, never on its own. The
//! connection opens one (tools only) before the host first lists the tools, so no change
//! falls between, and keeps it open for the session: each `tools/list_changed` on it is
//! counted as the older revisions' plain notification is ([`Shared::tools_changed`]).
//!
//! A stream that ends while the session goes on (a final result, a cancel, a full buffer,
//! or over HTTP its own response cut by a proxy or a redeploy) is opened again after a
//! pause that grows while streams keep ending early, and the reopen counts as a change
//! (one may have happened while none was open). Once the session is over the follower
//! stops: the host's restart opens a new one.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient, ServiceError, Subscription, SubscriptionEnd};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::handler::Shared;

/// First pause before a stream is opened again; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// A stream that lived this long resets the pause: the server is not ending them in a
/// loop.
const SETTLED: Duration = Duration::from_secs(60);
/// How long a reopened stream may wait for the server's acknowledgement.
const ACK_WAIT: Duration = Duration::from_secs(30);

/// Opens the tools stream and waits for the server's acknowledgement.
pub(crate) async fn open(peer: &Peer<RoleClient>) -> Result<Subscription, ServiceError> {
    peer.listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
}

/// Follows `first` until `stop` or the end of the session (`closed`), counting its
/// tool-list changes into `shared`.
pub(crate) fn follow(
    server: String,
    peer: Peer<RoleClient>,
    first: Subscription,
    shared: Arc<Shared>,
    stop: CancellationToken,
    closed: watch::Receiver<Option<String>>,
) {
    let over = move || stop.is_cancelled() || closed.borrow().is_some();
    tokio::spawn(async move {
        let mut stream = first;
        let mut pause = FIRST_PAUSE;
        loop {
            let opened = Instant::now();
            drain(&server, &mut stream, &shared, &over).await;
            if opened.elapsed() >= SETTLED {
                pause = FIRST_PAUSE;
            }
            // Reopen while the session goes on, waiting longer after each failure. (A
            // transport that just closed may not have said so yet: the next turn sees it.)
            stream = loop {
                if over() {
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                if over() {
                    return;
                }
                match tokio::time::timeout(ACK_WAIT, open(&peer)).await {
                    Ok(Ok(s)) => break s,
                    Ok(Err(e)) => tracing::debug!(server, "subscriptions/listen again: {e}"),
                    Err(_) => tracing::warn!(server, "subscriptions/listen not acknowledged"),
                }
            };
            shared.tools_changed.send_modify(|n| *n += 1);
        }
    });
}

/// Reads one stream to its end (or until the session is `over`, checked each second).
async fn drain(server: &str, stream: &mut Subscription, shared: &Shared, over: &impl Fn() -> bool) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let next = tokio::select! {
            n = stream.next() => n,
            _ = tick.tick() => {
                if over() {
                    let _ = stream.cancel().await;
                    return;
                }
                continue;
            }
        };
        match next {
            Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                shared.tools_changed.send_modify(|n| *n += 1);
            }
            // rmcp lets through only what the acknowledged filter names.
            Ok(Some(_)) => {}
            Ok(None) => {
                if !matches!(stream.end(), Some(SubscriptionEnd::Abrupt) | None) {
                    tracing::info!(
                        server,
                        "the server ended its tools stream: {:?}",
                        stream.end()
                    );
                }
                return;
            }
            Err(ServiceError::TransportClosed) => return,
            Err(e) => {
                tracing::warn!(server, "the tools stream broke: {e}");
                return;
            }
        }
    }
}
