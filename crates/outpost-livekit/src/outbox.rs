//! The reliable send queue, shared by the room handle (which enqueues) and the
//! per-connection writer task (which hands packets to the `_reliable` channel).
//!
//! Every reliable packet gets a sequence number when it is enqueued, so order is the
//! order of calls. A packet stays in `inflight` after it was handed to SCTP until SCTP
//! reports it acknowledged (via the channel's outstanding byte count). When a link is
//! replaced by a new one (full rejoin), the unacknowledged tail goes back to the front
//! of `pending` and is sent again on the new link; the acknowledged rest is dropped.
//! A resume keeps the SCTP association, which retransmits by itself, so nothing is
//! requeued then. Either way nothing is sent twice that the server already had.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::{Notify, oneshot, watch};

use crate::error::{Error, Result};
use crate::wire::Channel;

/// One encoded reliable packet.
#[derive(Debug)]
pub(crate) struct Out {
    pub seq: u32,
    pub bytes: Bytes,
    /// Told once the packet is handed to SCTP.
    pub done: Option<oneshot::Sender<Result<()>>>,
}

#[derive(Debug, Default)]
struct Inner {
    next_seq: u32,
    pending: VecDeque<Out>,
    inflight: VecDeque<Out>,
    inflight_bytes: usize,
    closed: Option<String>,
}

/// The queue. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    inner: Mutex<Inner>,
    notify: Notify,
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        outpost_sync::lock(&self.inner)
    }

    /// Assigns the next sequence number, lets `encode` build the packet with it, and
    /// queues the result.
    pub(crate) fn push(
        &self,
        encode: impl FnOnce(u32) -> Vec<u8>,
        done: Option<oneshot::Sender<Result<()>>>,
    ) -> Result<()> {
        let mut g = self.lock();
        if let Some(why) = &g.closed {
            return Err(Error::Closed(why.clone()));
        }
        g.next_seq = g.next_seq.wrapping_add(1).max(1);
        let seq = g.next_seq;
        let bytes = Bytes::from(encode(seq));
        g.pending.push_back(Out { seq, bytes, done });
        drop(g);
        self.notify.notify_one();
        Ok(())
    }

    /// Refuses further sends and fails everything still queued.
    pub(crate) fn close(&self, why: &str) {
        let mut g = self.lock();
        g.closed = Some(why.to_owned());
        let pending: Vec<Out> = g.pending.drain(..).collect();
        g.inflight.clear();
        g.inflight_bytes = 0;
        drop(g);
        for out in pending {
            if let Some(done) = out.done {
                let _ = done.send(Err(Error::Closed(why.to_owned())));
            }
        }
        self.notify.notify_waiters();
    }

    /// Packets waiting to be handed to a channel.
    pub(crate) fn pending_len(&self) -> usize {
        self.lock().pending.len()
    }

    /// Takes every queued packet (tests and the fuzzer inspect what would be sent);
    /// senders waiting for them are told they were handed to the transport.
    pub(crate) fn take_pending(&self) -> Vec<Bytes> {
        let taken: Vec<Out> = self.lock().pending.drain(..).collect();
        taken
            .into_iter()
            .map(|o| {
                if let Some(done) = o.done {
                    let _ = done.send(Ok(()));
                }
                o.bytes
            })
            .collect()
    }

    /// Keeps only the newest in-flight packets that cover `outstanding` bytes.
    pub(crate) fn trim(&self, outstanding: usize) {
        let mut g = self.lock();
        while let Some(front) = g.inflight.front() {
            let len = front.bytes.len();
            if g.inflight_bytes.saturating_sub(len) >= outstanding {
                g.inflight_bytes -= len;
                g.inflight.pop_front();
            } else {
                break;
            }
        }
    }

    /// The link is being replaced: packets SCTP did not acknowledge (`outstanding`
    /// bytes, or all in flight when unknown) go back to the front of the queue.
    /// Returns how many were requeued.
    pub(crate) fn requeue_unacked(&self, outstanding: Option<usize>) -> usize {
        if let Some(o) = outstanding {
            self.trim(o);
        }
        let mut g = self.lock();
        let inflight: Vec<Out> = g.inflight.drain(..).collect();
        g.inflight_bytes = 0;
        let n = inflight.len();
        for out in inflight.into_iter().rev() {
            g.pending.push_front(out);
        }
        drop(g);
        self.notify.notify_one();
        n
    }

    fn pop(&self) -> Option<Out> {
        self.lock().pending.pop_front()
    }

    fn unpop(&self, out: Out) {
        self.lock().pending.push_front(out);
    }

    fn sent(&self, out: Out) {
        let mut g = self.lock();
        g.inflight_bytes += out.bytes.len();
        g.inflight.push_back(Out {
            seq: out.seq,
            bytes: out.bytes,
            done: None,
        });
    }

    fn inflight_len(&self) -> usize {
        self.lock().inflight.len()
    }
}

/// How often an idle writer reads how much SCTP has acknowledged, while anything is in
/// flight.
const ACK_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// Hands queued packets to `channel` until `stop` turns true or the channel fails.
/// The send itself is never interrupted, so a packet is either in `pending` or in
/// `inflight`, never lost between them.
pub(crate) async fn writer(
    outbox: std::sync::Arc<Outbox>,
    channel: Channel,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        // Wait for something to send. Meanwhile, while packets are in flight, follow
        // SCTP's acknowledgements: a link that is lost later may no longer tell what it
        // acknowledged (a peer connection the server closed is gone by the time we
        // notice), and whatever is still in `inflight` then is sent again on the next
        // link. Trimming as the acknowledgements come keeps that to what really was
        // unacknowledged (or acknowledged within the last `ACK_POLL`).
        loop {
            let notified = outbox.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if outbox.pending_len() > 0 {
                break;
            }
            let in_flight = outbox.inflight_len() > 0;
            tokio::select! {
                _ = notified => {}
                _ = stop.changed() => return,
                _ = tokio::time::sleep(ACK_POLL), if in_flight => {
                    match channel.outstanding_bytes().await {
                        Ok(o) => outbox.trim(o),
                        Err(_) => return,
                    }
                }
            }
        }
        // Wait for room in the channel's send buffer.
        tokio::select! {
            r = channel.writable() => if r.is_err() { return },
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        let Some(mut out) = outbox.pop() else {
            continue;
        };
        match channel.send(&out.bytes).await {
            Ok(()) => {
                if let Some(done) = out.done.take() {
                    let _ = done.send(Ok(()));
                }
                outbox.sent(out);
                if outbox.inflight_len() >= 64 {
                    if let Ok(o) = channel.outstanding_bytes().await {
                        outbox.trim(o);
                    }
                }
            }
            Err(e) => {
                tracing::debug!("reliable channel send failed, keeping the packet queued: {e}");
                outbox.unpop(out);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn seqs(o: &Outbox) -> Vec<u32> {
        o.lock().pending.iter().map(|x| x.seq).collect()
    }

    #[test]
    fn requeue_puts_only_the_unacknowledged_tail_back_in_order() {
        let o = Outbox::default();
        for _ in 0..5 {
            o.push(|_| vec![0; 10], None).unwrap();
        }
        for _ in 0..4 {
            let x = o.pop().unwrap();
            o.sent(x);
        }
        // 4 sent (40 bytes), 20 bytes still unacknowledged: packets 3 and 4.
        assert_eq!(o.requeue_unacked(Some(20)), 2);
        assert_eq!(seqs(&o), vec![3, 4, 5]);
        // Unknown outstanding: everything in flight goes back.
        let x = o.pop().unwrap();
        o.sent(x);
        assert_eq!(o.requeue_unacked(None), 1);
        assert_eq!(seqs(&o), vec![3, 4, 5]);
    }

    #[test]
    fn closed_outbox_refuses_and_fails_waiters() {
        let o = Outbox::default();
        let (tx, mut rx) = oneshot::channel();
        o.push(|s| vec![u8::try_from(s).unwrap()], Some(tx))
            .unwrap();
        o.close("left");
        assert!(matches!(rx.try_recv(), Ok(Err(Error::Closed(_)))));
        assert!(o.push(|_| vec![], None).is_err());
    }
}
