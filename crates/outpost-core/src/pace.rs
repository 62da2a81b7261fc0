//! How often a session takes the MCP servers' tools again.
//!
//! Each change of a server's state could rebuild the tool registry (every schema compiled
//! again) and send the assistant the whole catalogue. [`CataloguePace`] coalesces: changes
//! that come within [`MIN_INTERVAL`] of the last refresh fold into one, and no refresh
//! happens while a catalogue (a ToolsChanged) is still queued for the assistant, so a
//! server that floods changes costs one catalogue at a time, never a growing queue. Pure:
//! the session passes the time and whether a catalogue is queued.

use std::time::Duration;

use tokio::time::Instant;

/// Shortest time between two refreshes of the catalogue.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// How long to wait again while a catalogue is still queued.
const QUEUED_RETRY: Duration = Duration::from_millis(200);

/// When the next refresh is due.
#[derive(Debug, Clone)]
pub struct CataloguePace {
    last: Option<Instant>,
    due: Option<Instant>,
}

impl Default for CataloguePace {
    fn default() -> Self {
        Self::new()
    }
}

impl CataloguePace {
    /// No refresh yet, none due.
    pub fn new() -> Self {
        Self {
            last: None,
            due: None,
        }
    }

    /// Something changed at `now`: a refresh becomes due (at once, or [`MIN_INTERVAL`]
    /// after the last one); one already due stays as it is.
    pub fn changed(&mut self, now: Instant) {
        if self.due.is_none() {
            self.due = Some(match self.last {
                Some(last) => (last + MIN_INTERVAL).max(now),
                None => now,
            });
        }
    }

    /// When the next refresh is due, if one is.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// The due time came at `now`: true = refresh now. With a catalogue still queued
    /// (`queued`), the refresh waits a little longer.
    pub fn fire(&mut self, now: Instant, queued: bool) -> bool {
        if self.due.is_none_or(|d| d > now) {
            return false;
        }
        if queued {
            self.due = Some(now + QUEUED_RETRY);
            return false;
        }
        self.due = None;
        self.last = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Issue 30, finding 6: a flood of changes (one every 10 ms for 3 s) makes at most one
    /// refresh per second, the last change is still taken, and nothing is refreshed while
    /// a catalogue is queued.
    #[test]
    fn a_flood_of_changes_is_paced_and_waits_for_the_queue() {
        let start = Instant::now();
        let mut pace = CataloguePace::new();
        let mut refreshes = Vec::new();
        let step = Duration::from_millis(10);
        let mut now = start;
        while now < start + Duration::from_secs(3) {
            pace.changed(now);
            if pace.fire(now, false) {
                refreshes.push(now - start);
            }
            now += step;
        }
        // After the flood: the pending change is taken when due.
        let due = pace.due().unwrap();
        assert!(pace.fire(due, false));
        refreshes.push(due - start);
        assert!(refreshes.len() <= 4, "{refreshes:?}");
        for pair in refreshes.windows(2) {
            assert!(pair[1] - pair[0] >= MIN_INTERVAL, "{refreshes:?}");
        }
        assert_eq!(pace.due(), None);
        // A change while a catalogue is queued waits for it.
        let later = due + MIN_INTERVAL;
        pace.changed(later);
        assert!(!pace.fire(later, true));
        assert!(!pace.fire(later + Duration::from_millis(100), false));
        assert!(pace.fire(pace.due().unwrap(), false));
    }
}
