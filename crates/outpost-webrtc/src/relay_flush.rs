//! Extra passes of `webrtc`'s driver loop while traffic is relayed, so nothing waits in
//! its TURN client for the next timer.
//!
//! `webrtc` 0.21.1's driver writes, in each pass of its loop, first what its TURN
//! relayer has queued, then what the connection's core has queued; the core's packets
//! for a relayed path go *into* the relayer (`turn_relayer.handle_write`), which sends
//! them only at its next `poll_write`, in the next pass. The next pass comes with the
//! next socket read, driver event or timer: an RPC answer relayed over TURN waited up to
//! the core's delayed-SACK timer (~200 ms; docs/BENCHMARKS.md, issue 26). Decapsulated
//! relayed input takes one pass more: it reaches the core only in the pass after the
//! read, and what the core writes in answer goes to the relayer in the pass after that.
//!
//! The runtime cannot change the loop, but it sees each pass end (the driver asks it for
//! a sleep before waiting) and owns the sockets the loop waits on. After a pass that a
//! real wake started, [`RelayFlush`] asks for two more: each by making a socket's
//! pending receive return `Interrupted`, which the driver treats as transient and answers
//! with `continue`, i.e. a new pass, without touching any timer. Two is what the longest
//! chain above needs (read → core → relayer → wire). Only while relayed datagrams
//! (TURN ChannelData or Send indications) went out in the last [`RELAYED_RECENTLY`]: a
//! direct connection's loop is left exactly as it was.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;

/// How long after the last relayed datagram the extra passes go on.
pub(crate) const RELAYED_RECENTLY: Duration = Duration::from_secs(10);

/// Extra passes after a pass that a real wake (a packet, an event, a timer) started.
const EXTRA_PASSES: u8 = 2;

/// One peer connection's state; shared by its runtime and every socket it wraps.
#[derive(Debug)]
pub(crate) struct RelayFlush {
    start: Instant,
    /// Milliseconds since `start` at the last relayed datagram, plus one (0: never).
    relayed_at: AtomicU64,
    /// A pass was asked for and no socket has taken it yet.
    pending: AtomicBool,
    /// The last wake of the loop was one this asked for.
    took: AtomicBool,
    /// Passes still to ask for since the last real wake.
    left: AtomicU8,
    /// The task waiting on a socket's receive (the driver's), woken to take a pass.
    waker: AtomicWaker,
}

impl Default for RelayFlush {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            relayed_at: AtomicU64::new(0),
            pending: AtomicBool::new(false),
            took: AtomicBool::new(false),
            left: AtomicU8::new(0),
            waker: AtomicWaker::new(),
        }
    }
}

/// Whether a datagram sent to a TURN server carries relayed data: ChannelData (first
/// byte 0x40–0x4F, RFC 8656 §12 and RFC 7983's demultiplexing) or a STUN Send
/// indication (type 0x0016).
pub(crate) fn is_relayed(datagram: &[u8]) -> bool {
    match datagram {
        [first, ..] if (0x40..=0x4f).contains(first) => true,
        [0x00, 0x16, ..] => true,
        _ => false,
    }
}

impl RelayFlush {
    /// A socket sent `datagram`.
    pub(crate) fn sent(&self, datagram: &[u8]) {
        if is_relayed(datagram) {
            self.relayed_at
                .store(self.millis(Instant::now()) + 1, Ordering::Relaxed);
        }
    }

    fn millis(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.start).as_millis()).unwrap_or(u64::MAX)
    }

    fn relaying(&self, now: Instant) -> bool {
        match self.relayed_at.load(Ordering::Relaxed) {
            0 => false,
            at => self.millis(now).saturating_sub(at - 1) <= RELAYED_RECENTLY.as_millis() as u64,
        }
    }

    /// The driver finished a pass and is about to wait: ask for another pass if the
    /// rules above want one. Returns whether it asked.
    pub(crate) fn pass_done(&self, now: Instant) -> bool {
        if !self.relaying(now) {
            return false;
        }
        let took = self.took.swap(false, Ordering::AcqRel);
        if self.pending.load(Ordering::Acquire) {
            // The asked-for pass has not been taken: something else woke the loop
            // first, a real wake. The pending one still comes; one more after it.
            self.left.store(EXTRA_PASSES - 1, Ordering::Release);
            return false;
        }
        if took {
            let left = self.left.load(Ordering::Acquire);
            if left == 0 {
                return false;
            }
            self.left.store(left - 1, Ordering::Release);
        } else {
            self.left.store(EXTRA_PASSES - 1, Ordering::Release);
        }
        self.pending.store(true, Ordering::Release);
        self.waker.wake();
        true
    }

    /// Called by a socket's receive: whether to end it with a pass taken. A waiting
    /// receive (one that registers a real waker) is remembered to be woken.
    pub(crate) fn take(&self, cx: &Context<'_>) -> bool {
        if self.pending.swap(false, Ordering::AcqRel) {
            self.took.store(true, Ordering::Release);
            return true;
        }
        // The driver also probes sockets with a no-op waker between passes; keep the
        // waker of the receive that actually waits.
        if !cx.waker().will_wake(Waker::noop()) {
            self.waker.register(cx.waker());
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANNEL_DATA: &[u8] = &[0x40, 0x00, 0x00, 0x04, 1, 2, 3, 4];

    fn cx() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    /// Runs the loop's passes: each real wake, then the passes the flush asks for, as
    /// the driver would take them. Returns how many passes it asked for.
    fn passes_after_a_real_wake(flush: &RelayFlush, now: Instant) -> usize {
        let mut asked = 0;
        while flush.pass_done(now) {
            asked += 1;
            assert!(flush.take(&cx()), "the asked-for pass is taken");
            assert!(asked <= 10, "the passes end");
        }
        asked
    }

    #[test]
    fn only_relayed_datagrams_count() {
        assert!(is_relayed(CHANNEL_DATA));
        assert!(is_relayed(&[0x4f, 0xff]));
        // A STUN Send indication.
        assert!(is_relayed(&[0x00, 0x16, 0x00, 0x08]));
        // A STUN binding request, DTLS, RTP: direct traffic.
        assert!(!is_relayed(&[0x00, 0x01, 0x00, 0x00]));
        assert!(!is_relayed(&[22, 0xfe, 0xfd]));
        assert!(!is_relayed(&[0x80, 0x6f]));
        assert!(!is_relayed(&[]));
    }

    #[test]
    fn a_direct_connection_gets_no_extra_pass() {
        let flush = RelayFlush::default();
        flush.sent(&[0x80, 0x6f, 0, 1]);
        assert_eq!(passes_after_a_real_wake(&flush, Instant::now()), 0);
        assert!(!flush.take(&cx()));
    }

    #[test]
    fn a_relayed_connection_gets_two_after_each_real_wake() {
        let flush = RelayFlush::default();
        flush.sent(CHANNEL_DATA);
        let now = Instant::now();
        assert_eq!(passes_after_a_real_wake(&flush, now), 2);
        // The next real wake: two again.
        assert_eq!(passes_after_a_real_wake(&flush, now), 2);
    }

    #[test]
    fn a_real_wake_before_the_asked_pass_is_taken_restarts_the_count() {
        let flush = RelayFlush::default();
        flush.sent(CHANNEL_DATA);
        let now = Instant::now();
        assert!(flush.pass_done(now));
        // A packet woke the loop first; the asked-for pass is still pending.
        assert!(!flush.pass_done(now));
        assert!(flush.take(&cx()));
        // The pending pass was taken; one more follows, then the loop waits.
        assert!(flush.pass_done(now));
        assert!(flush.take(&cx()));
        assert!(!flush.pass_done(now));
    }

    #[test]
    fn the_extra_passes_stop_once_nothing_is_relayed() {
        let flush = RelayFlush::default();
        flush.sent(CHANNEL_DATA);
        let later = Instant::now() + RELAYED_RECENTLY + Duration::from_secs(1);
        assert_eq!(passes_after_a_real_wake(&flush, later), 0);
    }

    #[test]
    fn an_asked_pass_wakes_the_waiting_receive() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicUsize;
        use std::task::Wake;
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let flush = RelayFlush::default();
        flush.sent(CHANNEL_DATA);
        // The driver's receive waits (registers its waker); a probe with a no-op
        // waker does not replace it.
        assert!(!flush.take(&Context::from_waker(&waker)));
        assert!(!flush.take(&cx()));
        assert!(flush.pass_done(Instant::now()));
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
    }
}
