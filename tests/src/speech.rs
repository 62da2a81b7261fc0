//! Speech for the voice tests: `espeak-ng`'s audio of a sentence (a WAV file), and how
//! well a recording matches it (loudness envelopes, 10 ms RMS, compared by normalised
//! cross-correlation: robust to the codec and resampling, which change the waveform).

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail, ensure};

/// `espeak-ng`'s audio for `text` as a WAV file at `path` (22.05 kHz mono).
pub fn espeak(text: &str, path: &Path) -> anyhow::Result<()> {
    espeak_voice(text, "en", path)
}

/// [`espeak`] in the voice `voice` (`en+f3`: a second talker).
pub fn espeak_voice(text: &str, voice: &str, path: &Path) -> anyhow::Result<()> {
    let st = Command::new("espeak-ng")
        .args(["-v", voice, "-s", "150", "-w"])
        .arg(path)
        .arg(text)
        .status()
        .context("running espeak-ng (Debian's espeak-ng; scripts/setup.sh installs it)")?;
    ensure!(st.success(), "espeak-ng failed: {st}");
    Ok(())
}

/// The 16-bit mono samples and rate of a WAV espeak-ng wrote.
pub fn read_wav(path: &Path) -> anyhow::Result<(Vec<f64>, u32)> {
    let b = std::fs::read(path)?;
    ensure!(b.len() > 44 && &b[..4] == b"RIFF", "not a WAV file");
    let rate = u32::from_le_bytes([b[24], b[25], b[26], b[27]]);
    // The data chunk: find it (espeak-ng writes a plain 44-byte header, but be careful).
    let mut i = 12;
    while i + 8 <= b.len() {
        let size = u32::from_le_bytes([b[i + 4], b[i + 5], b[i + 6], b[i + 7]]) as usize;
        if &b[i..i + 4] == b"data" {
            let end = (i + 8 + size).min(b.len());
            let s = b[i + 8..end]
                .chunks_exact(2)
                .map(|c| f64::from(i16::from_le_bytes([c[0], c[1]])))
                .collect();
            return Ok((s, rate));
        }
        i += 8 + size;
    }
    bail!("no data chunk")
}

/// [`espeak_voice`]'s audio for `text` as 48 kHz samples in -1..1 (the WAV it wrote stays
/// at `path`), for a test that plays it through outpost-audio's speaker.
pub fn speech_48k(text: &str, voice: &str, path: &Path) -> anyhow::Result<Vec<f32>> {
    espeak_voice(text, voice, path)?;
    let (wav, rate) = read_wav(path)?;
    ensure!(!wav.is_empty(), "no samples in {}", path.display());
    let samples: Vec<f32> = wav.iter().map(|v| (v / 32768.0) as f32).collect();
    let mut r = outpost_audio::MonoResampler::new(rate, 48_000)?;
    let mut out = Vec::new();
    r.process(&samples, &mut out);
    Ok(out)
}

/// Loudness per 10 ms (RMS).
pub fn envelope<T: Copy + Into<f64>>(x: &[T], rate: u32) -> Vec<f64> {
    let mut out = Vec::new();
    let mut k = 0usize;
    loop {
        let a = k * rate as usize / 100;
        let b = (k + 1) * rate as usize / 100;
        if b > x.len() {
            return out;
        }
        let w = &x[a..b];
        let power = w
            .iter()
            .map(|v| {
                let v: f64 = (*v).into();
                v * v
            })
            .sum::<f64>();
        out.push((power / w.len() as f64).sqrt());
        k += 1;
    }
}

/// The best normalised cross-correlation of `reference` slid along `signal`, and where.
pub fn best_match(signal: &[f64], reference: &[f64]) -> (f64, usize) {
    let n = reference.len();
    if signal.len() < n || n == 0 {
        return (0.0, 0);
    }
    let mr = reference.iter().sum::<f64>() / n as f64;
    let r: Vec<f64> = reference.iter().map(|v| v - mr).collect();
    let rn = r.iter().map(|v| v * v).sum::<f64>().sqrt();
    let mut best = (0.0, 0);
    for off in 0..=signal.len() - n {
        let w = &signal[off..off + n];
        let mw = w.iter().sum::<f64>() / n as f64;
        let (mut dot, mut wn) = (0.0, 0.0);
        for (a, b) in w.iter().zip(&r) {
            dot += (a - mw) * b;
            wn += (a - mw) * (a - mw);
        }
        let c = dot / (wn.sqrt() * rn).max(1e-9);
        if c > best.0 {
            best = (c, off);
        }
    }
    best
}

/// The normalised correlation of two equal-length pieces.
pub fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    if n == 0 {
        return 0.0;
    }
    let ma = a[..n].iter().sum::<f64>() / n as f64;
    let mb = b[..n].iter().sum::<f64>() / n as f64;
    let (mut dot, mut na, mut nb) = (0.0, 0.0, 0.0);
    for (x, y) in a[..n].iter().zip(&b[..n]) {
        dot += (x - ma) * (y - mb);
        na += (x - ma) * (x - ma);
        nb += (y - mb) * (y - mb);
    }
    dot / (na.sqrt() * nb.sqrt()).max(1e-9)
}

/// How well `reference` is heard in `signal` around `at` (the whole reference's best
/// lag), piece by piece: each 400 ms piece's best correlation within 300 ms of where it
/// should be (a jitter-buffer or playback underrun shifts what follows it), averaged.
pub fn piecewise_match(signal: &[f64], reference: &[f64], at: usize) -> f64 {
    const PIECE: usize = 40;
    const SLACK: usize = 30;
    let mut scores = Vec::new();
    for (k, piece) in reference.chunks(PIECE).enumerate() {
        if piece.len() < PIECE / 2 {
            break;
        }
        let centre = at + k * PIECE;
        let best = (centre.saturating_sub(SLACK)..=centre + SLACK)
            .filter(|o| o + piece.len() <= signal.len())
            .map(|o| correlation(&signal[o..o + piece.len()], piece))
            .fold(0.0, f64::max);
        scores.push(best);
    }
    if scores.is_empty() {
        return 0.0;
    }
    scores.iter().sum::<f64>() / scores.len() as f64
}

/// Checks that `recorded` (48 kHz samples of a speaker, as `Pulse::record` keeps them)
/// played the utterance in the WAV file `reply`: its loudness envelope correlates with the
/// reply's at ≥ 0.5 at its best lag and ≥ 0.8 piece by piece (what the app's voice tests
/// hold an agent's spoken reply to); an error says by how much it did not.
pub fn assert_reply_played(recorded: &[i16], reply: &Path) -> anyhow::Result<()> {
    let samples: Vec<f64> = recorded.iter().map(|s| f64::from(*s)).collect();
    let heard = envelope(&samples, 48_000);
    let (reference, rate) = read_wav(reply)?;
    let want = envelope(&reference, rate);
    let (corr, at) = best_match(&heard, &want);
    let pieces = piecewise_match(&heard, &want, at);
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "speaker: {} ms recorded; the reply's envelope correlation {corr:.3} at {} ms, \
             piece by piece {pieces:.3}",
            samples.len() / 48,
            at * 10
        );
    }
    ensure!(
        pieces >= 0.8 && corr >= 0.5,
        "the app's speaker did not play the agent's reply (envelope correlation {corr:.3}, \
         piece by piece {pieces:.3})"
    );
    Ok(())
}
