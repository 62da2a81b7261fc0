//! A private PulseAudio daemon for a sound test, wired one of two ways:
//! - [`Pulse::start`], for the voice tests: two null sinks, `mic_in` (what a test plays
//!   into it is the default source, its monitor: the app's microphone) and `speaker` (the
//!   default sink: what the app plays, recorded from `speaker.monitor`);
//! - [`Pulse::start_loopback`], for outpost-audio's device tests: one null sink, `speaker`,
//!   whose monitor is the default source (what the speaker plays, the microphone hears).
//!
//! The daemon runs with its own runtime folder and socket; the process that uses it points
//! `PULSE_SERVER` at [`Pulse::server`] before any audio code runs. Killed on drop. Also
//! the sound a test plays and measures: [`tone`], [`rms`], [`peak_hz`].

use std::io::{Read, Write};
use std::ops::Range;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The daemon.
#[derive(Debug)]
pub struct Pulse {
    child: Child,
    _dir: tempfile::TempDir,
    socket: PathBuf,
    wiring: Wiring,
}

/// The null sinks a daemon starts with, and which sink and source are the defaults.
#[derive(Debug, Clone, Copy)]
struct Wiring {
    sinks: &'static [&'static str],
    default_sink: &'static str,
    default_source: &'static str,
}

/// The voice tests': a microphone sink and a speaker.
const VOICE: Wiring = Wiring {
    sinks: &["mic_in", "speaker"],
    default_sink: "speaker",
    default_source: "mic_in.monitor",
};

/// outpost-audio's device tests': the speaker's monitor is the microphone.
const LOOPBACK: Wiring = Wiring {
    sinks: &["speaker"],
    default_sink: "speaker",
    default_source: "speaker.monitor",
};

fn spawn_daemon(
    dir: &std::path::Path,
    socket: &std::path::Path,
    wiring: Wiring,
) -> anyhow::Result<Child> {
    let mut cmd = Command::new("pulseaudio");
    cmd.args([
        "-n",
        "--daemonize=no",
        "--exit-idle-time=-1",
        "--disable-shm=yes",
        "--use-pid-file=no",
        "--system=no",
    ])
    .arg("-L")
    .arg(format!(
        "module-native-protocol-unix auth-anonymous=1 socket={}",
        socket.display()
    ))
    .env("HOME", dir)
    .env("XDG_RUNTIME_DIR", dir)
    .env("PULSE_RUNTIME_PATH", dir)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    for sink in wiring.sinks {
        cmd.arg("-L")
            .arg(format!("module-null-sink sink_name={sink} rate=48000"));
    }
    cmd.spawn()
        .context("starting pulseaudio (Debian's pulseaudio; scripts/setup.sh installs it)")
}

impl Pulse {
    /// For a test program without libtest's harness, first thing in `main`: starts the
    /// daemon and points this process's `PULSE_SERVER` at it (ALSA's pulse plugin reads it
    /// later, from any thread). Exits the process with the reason when it cannot start.
    pub fn start_for_this_process() -> Self {
        Self::for_this_process(VOICE)
    }

    /// [`Pulse::start_loopback`] as [`Pulse::start_for_this_process`] does it.
    pub fn start_loopback_for_this_process() -> Self {
        Self::for_this_process(LOOPBACK)
    }

    fn for_this_process(wiring: Wiring) -> Self {
        let pulse = match Self::start_wired(wiring) {
            Ok(p) => p,
            Err(e) => {
                #[allow(clippy::print_stderr)]
                {
                    eprintln!("{e:#}");
                }
                std::process::exit(1);
            }
        };
        // SAFETY: the caller is `main` before it starts any thread (this function's
        // contract), so nothing reads the environment while it changes.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("PULSE_SERVER", pulse.server());
        }
        pulse
    }

    /// Starts it (the voice tests' two sinks) and waits until it answers.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_wired(VOICE)
    }

    /// Starts it with one sink, `speaker`, whose monitor is the default source, and waits
    /// until it answers.
    pub fn start_loopback() -> anyhow::Result<Self> {
        Self::start_wired(LOOPBACK)
    }

    fn start_wired(wiring: Wiring) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let socket = dir.path().join("native");
        let child = spawn_daemon(dir.path(), &socket, wiring)?;
        let me = Self {
            child,
            _dir: dir,
            socket,
            wiring,
        };
        me.wait_ready()?;
        Ok(me)
    }

    /// A fresh daemon in place of this one, on the same socket (so a process whose
    /// `PULSE_SERVER` names it keeps working): for a test that killed it, before its
    /// next scenario.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        let _ = std::fs::remove_file(&self.socket);
        self.child = spawn_daemon(self._dir.path(), &self.socket, self.wiring)?;
        self.wait_ready()
    }

    /// Kills the daemon (a sound server that goes away mid-call).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn set_defaults(&self) -> anyhow::Result<()> {
        self.pactl(&["set-default-sink", self.wiring.default_sink])?;
        self.pactl(&["set-default-source", self.wiring.default_source])?;
        Ok(())
    }

    fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.pactl(&["info"]).is_ok_and(|s| !s.is_empty()) {
            if Instant::now() > deadline {
                bail!("pulseaudio did not start");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.set_defaults()
    }

    /// The daemon's process id (a test kills it to take the sound away mid-call).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `PULSE_SERVER` for this daemon.
    pub fn server(&self) -> String {
        format!("unix:{}", self.socket.display())
    }

    /// Runs `pactl ARGS` against it; its stdout.
    pub fn pactl(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("pactl")
            .args(args)
            .env("PULSE_SERVER", self.server())
            .output()
            .context("running pactl (Debian's pulseaudio-utils)")?;
        if !out.status.success() {
            bail!(
                "pactl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Unplugs the null sink `sink` (its monitor source goes with it): `pactl
    /// unload-module`. PulseAudio moves the streams of a sink or source that goes to the
    /// default one if there is any; with both null sinks unplugged there is none, and the
    /// streams on them end as a headset's do when it is pulled out.
    pub fn unplug(&self, sink: &str) -> anyhow::Result<()> {
        let modules = self.pactl(&["list", "short", "modules"])?;
        let name = format!("sink_name={sink} ");
        let id = modules
            .lines()
            .find(|l| l.contains("module-null-sink") && l.contains(&name))
            .and_then(|l| l.split_whitespace().next())
            .with_context(|| format!("no module for the sink {sink}: {modules}"))?
            .to_owned();
        self.pactl(&["unload-module", &id])?;
        Ok(())
    }

    /// Plugs `sink` back in (a null sink of that name, as at start) and makes the
    /// defaults what they were at start again once all the sinks are there.
    pub fn plug(&self, sink: &str) -> anyhow::Result<()> {
        self.pactl(&[
            "load-module",
            "module-null-sink",
            &format!("sink_name={sink}"),
            "rate=48000",
        ])?;
        let sinks = self.pactl(&["list", "short", "sinks"])?;
        if self.wiring.sinks.iter().all(|s| sinks.contains(s)) {
            self.set_defaults()?;
        }
        Ok(())
    }

    /// Plays a sine of `hz` into `sink` (48 kHz mono, real time through the pipe) until
    /// the returned child is killed.
    pub fn play_tone(&self, sink: &str, hz: f64, seconds: u32) -> anyhow::Result<Child> {
        let mut child = Command::new("pacat")
            .args([
                "--playback",
                &format!("--device={sink}"),
                "--format=s16le",
                "--rate=48000",
                "--channels=1",
                "--latency-msec=40",
            ])
            .env("PULSE_SERVER", self.server())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("running pacat")?;
        let mut stdin = child.stdin.take().context("pacat's stdin")?;
        std::thread::spawn(move || {
            let n = 48_000 * seconds as usize;
            let mut buf = Vec::with_capacity(960 * 2);
            for i in 0..n {
                let v = 0.5 * (2.0 * std::f64::consts::PI * hz * i as f64 / 48_000.0).sin();
                buf.extend_from_slice(&((v * 32767.0) as i16).to_le_bytes());
                if buf.len() >= 1920 {
                    if stdin.write_all(&buf).is_err() {
                        return;
                    }
                    buf.clear();
                }
            }
        });
        Ok(child)
    }

    /// Records `source` (48 kHz mono) into the returned buffer until the child is killed.
    pub fn record(&self, source: &str) -> anyhow::Result<(Child, Arc<Mutex<Vec<i16>>>)> {
        let mut child = Command::new("parec")
            .args([
                &format!("--device={source}"),
                "--format=s16le",
                "--rate=48000",
                "--channels=1",
                "--latency-msec=40",
                "--raw",
            ])
            .env("PULSE_SERVER", self.server())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("running parec")?;
        let mut out = child.stdout.take().context("parec's stdout")?;
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&buf);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 3840];
            while let Ok(n) = out.read(&mut chunk) {
                if n == 0 {
                    return;
                }
                let mut b = outpost_sync::lock(&sink);
                b.extend(
                    chunk[..n - n % 2]
                        .chunks_exact(2)
                        .map(|c| i16::from_le_bytes([c[0], c[1]])),
                );
            }
        });
        Ok((child, buf))
    }
}

impl Drop for Pulse {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A sine tone: `n` samples at `rate`, amplitude `amp`.
pub fn tone(hz: f32, rate: u32, n: usize, amp: f32) -> Vec<f32> {
    (0..n)
        .map(|i| amp * (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin())
        .collect()
}

/// RMS of `x`.
pub fn rms(x: &[f32]) -> f64 {
    if x.is_empty() {
        return 0.0;
    }
    (x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len() as f64).sqrt()
}

/// The strongest frequency of `x` (48 kHz) between 100 Hz and 2 kHz, in 2 Hz steps.
pub fn peak_hz(x: &[f64]) -> f64 {
    peak_hz_in(x, 48_000, 100.0..2000.0)
}

/// The strongest frequency of `x` (sampled at `rate`) in `band`, in 2 Hz steps (a direct
/// DFT at each).
pub fn peak_hz_in<T: Copy + Into<f64>>(x: &[T], rate: u32, band: Range<f64>) -> f64 {
    let mut best = (0.0, 0.0);
    let mut f = band.start;
    while f < band.end {
        let w = 2.0 * std::f64::consts::PI * f / f64::from(rate);
        let (mut re, mut im) = (0.0, 0.0);
        for (i, v) in x.iter().enumerate() {
            let v: f64 = (*v).into();
            re += v * (w * i as f64).cos();
            im += v * (w * i as f64).sin();
        }
        let p = re * re + im * im;
        if p > best.0 {
            best = (p, f);
        }
        f += 2.0;
    }
    best.1
}
