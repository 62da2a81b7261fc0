//! The speaker's playout target: how much audio may stand in the playback queue.
//!
//! Audio that arrives late arrives in a burst, and everything queued behind it plays that
//! much later for the rest of the call: the queue never drains by itself, because the
//! device takes exactly as much as the far end sends. [`Playout`] watches the lowest
//! depth of the queue over a window of about a second. What stayed queued the whole
//! window beyond [`TARGET_MS`] is a standing delay: it is cut from quiet 10 ms chunks
//! (pauses between words) as they reach the front, so nothing audible is lost; a standing
//! delay over [`HARD_MS`] (no pause to take it from) is cut at once, one glitch instead of
//! a conversation a quarter of a second behind.

use std::collections::VecDeque;

/// The standing delay left alone (two device periods and room for jitter).
pub const TARGET_MS: usize = 40;
/// A standing delay beyond this is cut at once, quiet or not.
pub const HARD_MS: usize = 250;
/// How long the queue's lowest depth is watched before deciding.
pub const WINDOW_MS: usize = 1000;
/// A 10 ms chunk whose peak stays under this (about -46 dBFS) counts as quiet.
pub const QUIET_PEAK: f32 = 0.005;

/// The playout state of one speaker stream, driven from its device callback.
#[derive(Debug)]
pub struct Playout {
    rate: usize,
    /// The lowest queue depth (samples) seen at a callback in this window.
    low: usize,
    /// Samples played in this window.
    seen: usize,
    /// Samples still to cut from quiet chunks.
    excess: usize,
}

impl Playout {
    /// For a device running at `rate` Hz.
    pub fn new(rate: u32) -> Self {
        Self {
            rate: (rate as usize).max(1000),
            low: usize::MAX,
            seen: 0,
            excess: 0,
        }
    }

    /// Called before a callback takes `wanted` samples from `queue`: notes the depth and
    /// cuts standing delay. Returns how many samples were cut.
    pub fn before_callback(&mut self, queue: &mut VecDeque<f32>, wanted: usize) -> usize {
        self.low = self.low.min(queue.len());
        self.seen += wanted;
        let mut cut = 0;
        if self.seen >= self.samples(WINDOW_MS) {
            let standing = self.low.saturating_sub(self.samples(TARGET_MS));
            if standing > self.samples(HARD_MS) {
                queue.drain(..standing.min(queue.len()));
                cut += standing;
                self.excess = 0;
            } else {
                self.excess = standing;
            }
            self.low = usize::MAX;
            self.seen = 0;
        }
        let chunk = self.samples(10);
        while self.excess >= chunk && queue.len() >= chunk + wanted {
            let quiet = queue.iter().take(chunk).all(|s| s.abs() < QUIET_PEAK);
            if !quiet {
                break;
            }
            queue.drain(..chunk);
            self.excess -= chunk;
            cut += chunk;
        }
        cut
    }

    /// `ms` of audio in samples (exact at 44.1 kHz too: 10 ms = 441).
    fn samples(&self, ms: usize) -> usize {
        ms * self.rate / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: u32 = 48_000;
    const PERIOD: usize = 480; // 10 ms

    fn tone(ms: usize) -> impl Iterator<Item = f32> {
        (0..ms * 48).map(|i| (i as f32 * 0.05).sin() * 0.5)
    }

    fn quiet(ms: usize) -> impl Iterator<Item = f32> {
        std::iter::repeat_n(0.0005, ms * 48)
    }

    /// Plays `secs` seconds with the far end sending exactly what the device takes
    /// (`source` yields the next 10 ms); returns the queue depth in ms at the end.
    fn run(
        p: &mut Playout,
        q: &mut VecDeque<f32>,
        secs: usize,
        mut source: impl FnMut(usize) -> Vec<f32>,
    ) -> usize {
        for i in 0..secs * 100 {
            q.extend(source(i));
            p.before_callback(q, PERIOD);
            for _ in 0..PERIOD {
                q.pop_front();
            }
        }
        q.len() / 48
    }

    #[test]
    fn a_standing_delay_is_cut_from_the_pauses() {
        let mut p = Playout::new(RATE);
        // A burst left 200 ms standing in the queue; the far end then talks with pauses.
        let mut q: VecDeque<f32> = quiet(200).collect();
        let left = run(&mut p, &mut q, 4, |i| {
            if i % 50 < 30 {
                tone(10).collect()
            } else {
                quiet(10).collect()
            }
        });
        assert!(left <= TARGET_MS + 10, "{left} ms still queued");
    }

    #[test]
    fn continuous_sound_is_not_cut_below_the_hard_limit() {
        let mut p = Playout::new(RATE);
        let mut q: VecDeque<f32> = tone(150).collect();
        let left = run(&mut p, &mut q, 3, |_| tone(10).collect());
        assert_eq!(left, 150, "a steady tone lost audio");
    }

    #[test]
    fn a_standing_delay_over_the_hard_limit_is_cut_at_once() {
        let mut p = Playout::new(RATE);
        let mut q: VecDeque<f32> = tone(600).collect();
        let left = run(&mut p, &mut q, 2, |_| tone(10).collect());
        assert!(
            (TARGET_MS - 10..=TARGET_MS).contains(&left),
            "{left} ms still queued"
        );
    }

    #[test]
    fn jitter_that_drains_the_queue_is_left_alone() {
        let mut p = Playout::new(RATE);
        let mut q = VecDeque::new();
        let mut total_in = 0;
        // Packets come in pairs every 20 ms: the queue touches zero every other callback.
        let mut cut = 0;
        for i in 0..300 {
            if i % 2 == 0 {
                let chunk: Vec<f32> = quiet(20).collect();
                total_in += chunk.len();
                q.extend(chunk);
            }
            cut += p.before_callback(&mut q, PERIOD);
            for _ in 0..PERIOD {
                q.pop_front();
            }
        }
        assert_eq!(cut, 0, "cut {cut} of {total_in} samples");
    }

    #[test]
    fn never_cuts_into_what_this_callback_plays() {
        let mut p = Playout::new(RATE);
        // 300 ms of quiet standing, then nothing more arrives.
        let mut q: VecDeque<f32> = quiet(300).collect();
        p.seen = WINDOW_MS * 48; // the window closes at the next callback
        p.before_callback(&mut q, PERIOD);
        assert!(q.len() >= PERIOD, "{} left", q.len());
    }
}
