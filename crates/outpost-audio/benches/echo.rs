//! CPU time per 10 ms microphone frame: the capture path's own work (the level and the
//! copy handed out; with a 44.1 kHz device also the resampling) side by side with the same
//! plus the echo canceller (the far-end frame fed, the microphone frame processed). The
//! signal is speech-like noise with an echo of the far end in it, so the canceller adapts
//! as it would in a call. `cargo bench -p outpost-audio --bench echo`; figures in
//! docs/BENCHMARKS.md.
#![allow(clippy::unwrap_used, missing_docs, clippy::cast_precision_loss)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use outpost_audio::{EchoCanceller, FRAME_SAMPLES, MonoResampler, level_of};

/// 10 s of pseudo-random audio (a fixed xorshift), amplitude 0.3, in 10 ms frames.
fn noise(seed: u32) -> Vec<Vec<f32>> {
    let mut x = seed;
    (0..1000)
        .map(|_| {
            (0..FRAME_SAMPLES)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    (x as f32 / u32::MAX as f32 - 0.5) * 0.6
                })
                .collect()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let far = noise(7);
    let near = noise(11);
    // The microphone hears the far end (delayed 3 frames, -6 dB) and the near end.
    let mic: Vec<Vec<f32>> = (0..far.len())
        .map(|i| {
            let echo = &far[(i + far.len() - 3) % far.len()];
            near[i]
                .iter()
                .zip(echo)
                .map(|(n, e)| 0.2 * n + 0.5 * e)
                .collect()
        })
        .collect();
    let mut g = c.benchmark_group("capture_frame");
    let mut i = 0usize;
    g.bench_function("plain", |b| {
        b.iter(|| {
            i = (i + 1) % mic.len();
            let frame = black_box(&mic[i]);
            black_box(level_of(frame));
            black_box(frame.to_vec())
        });
    });
    let mut r = MonoResampler::new(44_100, 48_000).unwrap();
    let at441: Vec<f32> = mic.iter().flat_map(|f| f[..441].iter().copied()).collect();
    let mut out = Vec::with_capacity(2048);
    let mut j = 0usize;
    g.bench_function("plain_resampled_from_44k1", |b| {
        b.iter(|| {
            j = (j + 1) % 1000;
            out.clear();
            r.process(black_box(&at441[j * 441..(j + 1) * 441]), &mut out);
            black_box(level_of(&out));
            black_box(out.to_vec())
        });
    });
    let mut speaker = EchoCanceller::new().unwrap();
    let mut microphone = speaker.clone();
    let mut k = 0usize;
    g.bench_function("echo_canceller", |b| {
        b.iter(|| {
            k = (k + 1) % mic.len();
            speaker.render(black_box(&far[k]));
            let mut frame = mic[k].clone();
            microphone.capture(black_box(&mut frame));
            black_box(level_of(&frame));
            black_box(frame)
        });
    });
    g.finish();
    assert!(microphone.last_error().is_none());
}

criterion_group!(benches, bench);
criterion_main!(benches);
