//! A streaming mono resampler: any-length blocks in, the same audio at another rate out.
//! rubato's FFT resampler does the work in fixed 10 ms input chunks; samples that do not
//! fill a chunk yet wait for the next call.

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};

use crate::error::{AudioError, Result};

/// Resamples one channel from `from` Hz to `to` Hz, block by block.
pub struct MonoResampler {
    inner: Option<Fft<f32>>,
    chunk: usize,
    pending: Vec<f32>,
    out: Vec<f32>,
}

impl std::fmt::Debug for MonoResampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonoResampler")
            .field("chunk", &self.chunk)
            .field("passthrough", &self.inner.is_none())
            .finish_non_exhaustive()
    }
}

impl MonoResampler {
    /// A resampler from `from` to `to` Hz (both 8 kHz..=384 kHz). Equal rates pass
    /// samples through untouched.
    pub fn new(from: u32, to: u32) -> Result<Self> {
        for r in [from, to] {
            if !(8_000..=384_000).contains(&r) {
                return Err(AudioError::Host(format!(
                    "cannot resample at {r} Hz (8000..=384000 Hz)"
                )));
            }
        }
        if from == to {
            return Ok(Self {
                inner: None,
                chunk: 0,
                pending: Vec::new(),
                out: Vec::new(),
            });
        }
        let chunk = (from / 100) as usize;
        let inner = Fft::<f32>::new(from as usize, to as usize, chunk, 1, FixedSync::Input)
            .map_err(|e| AudioError::Host(format!("resampler {from} Hz → {to} Hz: {e}")))?;
        let out = vec![0.0; inner.output_frames_max()];
        Ok(Self {
            inner: Some(inner),
            chunk,
            pending: Vec::with_capacity(chunk * 2),
            out,
        })
    }

    /// Feeds `input`; appends whatever output is ready to `output`.
    pub fn process(&mut self, input: &[f32], output: &mut Vec<f32>) {
        let Some(inner) = self.inner.as_mut() else {
            output.extend_from_slice(input);
            return;
        };
        self.pending.extend_from_slice(input);
        let mut start = 0;
        while self.pending.len() - start >= self.chunk {
            let block = &self.pending[start..start + self.chunk];
            let max = self.out.len();
            let done = match (
                InterleavedSlice::new(block, 1, self.chunk),
                InterleavedSlice::new_mut(&mut self.out, 1, max),
            ) {
                (Ok(i), Ok(mut o)) => inner.process_into_buffer(&i, &mut o, None),
                // Sizes are ours and always fit; should they not, the block is dropped.
                _ => Ok((self.chunk, 0)),
            };
            match done {
                Ok((_, n)) => output.extend_from_slice(&self.out[..n]),
                Err(e) => tracing::warn!("resampling failed, a block is dropped: {e}"),
            }
            start += self.chunk;
        }
        self.pending.drain(..start);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Frequency by counting upward zero crossings.
    fn freq(s: &[f32], rate: u32) -> f32 {
        let ups = s.windows(2).filter(|w| w[0] < 0.0 && w[1] >= 0.0).count();
        ups as f32 * rate as f32 / s.len() as f32
    }

    fn tone(hz: f32, rate: u32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| 0.5 * (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin())
            .collect()
    }

    #[test]
    fn keeps_a_tone_at_its_frequency_across_rates() {
        for (from, to) in [
            (44_100, 48_000),
            (48_000, 44_100),
            (16_000, 48_000),
            (48_000, 96_000),
        ] {
            let mut r = MonoResampler::new(from, to).unwrap();
            let input = tone(440.0, from, from as usize); // one second
            let mut out = Vec::new();
            // Odd block sizes, like a device's callbacks.
            for block in input.chunks(333) {
                r.process(block, &mut out);
            }
            let expect = to as usize;
            assert!(
                out.len() + to as usize / 20 >= expect && out.len() <= expect,
                "{from}→{to}: {} samples",
                out.len()
            );
            let skip = to as usize / 10; // the resampler's start-up delay
            let f = freq(&out[skip..], to);
            assert!((f - 440.0).abs() < 440.0 * 0.02, "{from}→{to}: {f} Hz");
        }
    }

    #[test]
    fn equal_rates_pass_through_and_bad_rates_are_refused() {
        let mut r = MonoResampler::new(48_000, 48_000).unwrap();
        let mut out = Vec::new();
        r.process(&[0.1, 0.2], &mut out);
        assert_eq!(out, vec![0.1, 0.2]);
        assert!(MonoResampler::new(0, 48_000).is_err());
        assert!(MonoResampler::new(48_000, 10_000_000).is_err());
    }
}
