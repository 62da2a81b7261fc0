//! A private PulseAudio daemon for one test process: a null sink (what is played to it
//! can be recorded from its monitor source, which is the default source), reached
//! through `PULSE_SERVER`, so cpal's ALSA backend talks to it via the pulse ALSA plugin.
//! The daemon is killed and its folder removed on drop.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Pulse {
    child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
}

impl Pulse {
    /// Starts the daemon. The caller points the process at it (`PULSE_SERVER`) before
    /// any audio code runs: ALSA reads its configuration once.
    pub fn start() -> Pulse {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("native");
        let child = Command::new("pulseaudio")
            .args([
                "-n",
                "--daemonize=no",
                "--exit-idle-time=-1",
                "--disable-shm=yes",
                "--use-pid-file=no",
                "--system=no",
                "--log-target=stderr",
            ])
            .arg("-L")
            .arg(format!(
                "module-native-protocol-unix auth-anonymous=1 socket={}",
                socket.display()
            ))
            .args(["-L", "module-null-sink sink_name=outpost_null rate=48000"])
            .env("HOME", dir.path())
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("PULSE_RUNTIME_PATH", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pulseaudio (Debian package pulseaudio; scripts/setup.sh installs it)");
        let server = format!("unix:{}", socket.display());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ok = Command::new("pactl")
                .arg("info")
                .env("PULSE_SERVER", &server)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "pulseaudio did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Pulse { child, dir, socket }
    }

    pub fn server(&self) -> String {
        format!("unix:{}", self.socket.display())
    }

    /// Runs `pactl ARGS` against this daemon.
    pub fn pactl(&self, args: &[&str]) -> String {
        let out = Command::new("pactl")
            .args(args)
            .env("PULSE_SERVER", self.server())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Unplugs the null sink (and with it its monitor, the default source):
    /// `pactl unload-module`.
    pub fn unplug(&self) {
        let modules = self.pactl(&["list", "short", "modules"]);
        let id = modules
            .lines()
            .find(|l| l.contains("module-null-sink") && l.contains("outpost_null"))
            .and_then(|l| l.split_whitespace().next())
            .expect("the null sink's module")
            .to_owned();
        self.pactl(&["unload-module", &id]);
    }

    /// Plugs the null sink back in (and makes it and its monitor the defaults again).
    pub fn plug(&self) {
        self.pactl(&[
            "load-module",
            "module-null-sink",
            "sink_name=outpost_null",
            "rate=48000",
        ]);
        self.pactl(&["set-default-sink", "outpost_null"]);
        self.pactl(&["set-default-source", "outpost_null.monitor"]);
    }

    /// Kills the daemon (a sound server that goes away mid-call).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Pulse {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A sine tone.
pub fn tone(hz: f32, rate: u32, n: usize, amp: f32) -> Vec<f32> {
    (0..n)
        .map(|i| amp * (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin())
        .collect()
}

/// The strongest frequency of `s` between 100 Hz and 4 kHz (1 Hz steps, Goertzel-like
/// direct DFT on a window).
pub fn peak_hz(s: &[f32], rate: u32) -> f32 {
    let mut best = (0.0f64, 0.0f32);
    let mut f = 100.0f32;
    while f < 4000.0 {
        let w = 2.0 * std::f64::consts::PI * f64::from(f) / f64::from(rate);
        let (mut re, mut im) = (0.0f64, 0.0f64);
        for (i, x) in s.iter().enumerate() {
            re += f64::from(*x) * (w * i as f64).cos();
            im += f64::from(*x) * (w * i as f64).sin();
        }
        let p = re * re + im * im;
        if p > best.0 {
            best = (p, f);
        }
        f += if (380.0..1000.0).contains(&f) {
            1.0
        } else {
            10.0
        };
    }
    best.1
}

/// `espeak-ng`'s audio for `text` (voice `voice`) as 48 kHz mono samples, and the WAV
/// file it wrote (22.05 kHz) at `path`.
pub fn speech(text: &str, voice: &str, path: &std::path::Path) -> Vec<f32> {
    let st = Command::new("espeak-ng")
        .args(["-v", voice, "-s", "150", "-w"])
        .arg(path)
        .arg(text)
        .status()
        .expect("espeak-ng (Debian package espeak-ng; scripts/setup.sh installs it)");
    assert!(st.success(), "espeak-ng failed: {st}");
    let b = std::fs::read(path).unwrap();
    assert!(b.len() > 44 && &b[..4] == b"RIFF", "not a WAV file");
    let rate = u32::from_le_bytes([b[24], b[25], b[26], b[27]]);
    let mut i = 12;
    let mut samples = Vec::new();
    while i + 8 <= b.len() {
        let size = u32::from_le_bytes([b[i + 4], b[i + 5], b[i + 6], b[i + 7]]) as usize;
        if &b[i..i + 4] == b"data" {
            let end = (i + 8 + size).min(b.len());
            samples = b[i + 8..end]
                .chunks_exact(2)
                .map(|c| f32::from(i16::from_le_bytes([c[0], c[1]])) / 32768.0)
                .collect();
            break;
        }
        i += 8 + size;
    }
    assert!(!samples.is_empty(), "no samples in {}", path.display());
    let mut r = outpost_audio::MonoResampler::new(rate, 48_000).unwrap();
    let mut out = Vec::new();
    r.process(&samples, &mut out);
    out
}

/// Loudness per 10 ms (RMS) of 48 kHz audio.
pub fn envelope(x: &[f32]) -> Vec<f64> {
    x.chunks_exact(480)
        .map(|w| (w.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / 480.0).sqrt())
        .collect()
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

/// RMS of `x`.
pub fn rms(x: &[f32]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    (x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len() as f64).sqrt()
}
