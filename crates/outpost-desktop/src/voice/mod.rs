//! Voice in the app: the microphone (outpost-audio) feeds the session's microphone track
//! (outpost-core → outpost-livekit), and the assistant's audio tracks play on the output
//! device. One [`VoiceHub`] per app owns the devices and the voice state the UI shows:
//! on/off, push-to-talk or open mic, mute, the talk key, each device's state, and the
//! levels (about ten times a second).
//!
//! What is sent follows one rule, [`transmitting`]: voice on, microphone working, not
//! muted, and open mic or the talk key held. Otherwise the track is muted (the server and
//! the agent see it muted, and no packet leaves). A device that fails — none there, the
//! system refuses it, unplugged mid-call, a stream that stops calling back — is shown as
//! failed with the reason and the device's name; the session, the call, the published
//! microphone track (muted meanwhile) and the text chat go on. The hub then opens that
//! device again in the background ([`REOPEN_FIRST`] doubling up to [`REOPEN_MAX`] between
//! tries, while voice is on): the chosen device, or the system default when the chosen
//! one is gone; choosing another device in Settings tries it at once. When it opens,
//! voice resumes without leaving the call.
//!
//! Echo cancellation (the "Echo cancellation" setting, on by default): one
//! [`EchoCanceller`] per voice run is shared by the speaker (which feeds it what it
//! plays) and the microphone (whose frames it cleans), a reopened device included, so
//! open mic works through speakers. Switched off, or when the canceller cannot be
//! created, open mic needs headphones and the UI says so ([`VoiceStatus::echo_cancelling`]).
//!
//! [`crate::Desktop`]'s `voice_*` commands over the hub are in `commands`.

mod commands;

use outpost_sync::lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use outpost_audio::{Capture, CaptureOptions, EchoCanceller, Health, Playback, PlaybackOptions};
use outpost_core::{LocalAudioTrack, Session, VoiceEvent};
use tokio::sync::{Notify, mpsc};

use crate::contract::{
    AppEvent, AudioDevice, AudioDevices, DeviceState, DeviceStatus, VoiceControl, VoiceLevel,
    VoiceMode, VoiceStatus,
};

/// Sends an event to the UI.
pub type Emit = Arc<dyn Fn(AppEvent) + Send + Sync>;

/// Whether the microphone track should be live.
pub fn transmitting(s: &VoiceStatus) -> bool {
    s.on && s.input.state == DeviceState::Ready
        && !s.muted
        && (s.mode == VoiceMode::OpenMic || s.talking)
}

fn off() -> DeviceStatus {
    DeviceStatus {
        state: DeviceState::Off,
        device: None,
        error: None,
    }
}

fn failed(error: String) -> DeviceStatus {
    DeviceStatus {
        state: DeviceState::Failed,
        device: None,
        error: Some(error),
    }
}

/// The first wait before opening a failed device again.
pub const REOPEN_FIRST: Duration = Duration::from_millis(250);
/// The longest wait between two tries (the backoff's bound).
pub const REOPEN_MAX: Duration = Duration::from_secs(2);

/// How long the microphone track is tried again after it was lost (a rejoin can take
/// this long when the network is down).
pub const REPUBLISH_FOR: Duration = Duration::from_secs(120);

/// One direction of audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Input,
    Output,
}

impl Dir {
    fn what(self) -> &'static str {
        match self {
            Dir::Input => "microphone",
            Dir::Output => "speaker",
        }
    }

    fn index(self) -> usize {
        match self {
            Dir::Input => 0,
            Dir::Output => 1,
        }
    }
}

/// A device opened (again).
enum Opened {
    Mic(Capture),
    Speaker(Box<Playback>),
}

/// Tries `chosen`, and the system default when `chosen` is a device that is gone.
fn chosen_or_default<T>(
    what: &str,
    chosen: Option<String>,
    mut open: impl FnMut(Option<String>) -> Result<T, outpost_audio::AudioError>,
) -> Result<T, outpost_audio::AudioError> {
    match open(chosen.clone()) {
        Err(outpost_audio::AudioError::DeviceNotFound(id)) if chosen.is_some() => {
            tracing::info!(device = %id, "the chosen {what} is not there; using the default");
            open(None)
        }
        r => r,
    }
}

/// Opens the microphone (`chosen`, else the default), its frames to `tx`.
fn open_mic(
    chosen: Option<String>,
    tx: &mpsc::Sender<Vec<f32>>,
    echo: Option<EchoCanceller>,
) -> Result<Capture, outpost_audio::AudioError> {
    chosen_or_default("microphone", chosen, |device| {
        Capture::start(
            &CaptureOptions {
                device,
                device_rate: None,
                echo: echo.clone(),
            },
            tx.clone(),
        )
    })
}

/// Opens the speaker (`chosen`, else the default).
fn open_speaker(
    chosen: Option<String>,
    echo: Option<EchoCanceller>,
) -> Result<Playback, outpost_audio::AudioError> {
    chosen_or_default("speaker", chosen, |device| {
        Playback::start(&PlaybackOptions {
            device,
            device_rate: None,
            echo: echo.clone(),
        })
    })
}

/// Opens `dir`'s device again (see [`open_mic`], [`open_speaker`]), on the voice run's
/// echo canceller.
fn open(
    dir: Dir,
    chosen: Option<String>,
    mic: Option<mpsc::Sender<Vec<f32>>>,
    echo: Option<EchoCanceller>,
) -> Result<Opened, outpost_audio::AudioError> {
    match dir {
        Dir::Input => match mic {
            Some(tx) => open_mic(chosen, &tx, echo).map(Opened::Mic),
            None => Err(outpost_audio::AudioError::Host(
                "the microphone has nowhere to send".into(),
            )),
        },
        Dir::Output => open_speaker(chosen, echo).map(|p| Opened::Speaker(Box::new(p))),
    }
}

#[derive(Default)]
struct Devices {
    capture: Option<Capture>,
    playback: Option<Arc<Playback>>,
    /// Shared by the two while voice is on (None: off, or it could not be created).
    echo: Option<EchoCanceller>,
}

struct State {
    status: VoiceStatus,
    devices: Devices,
    /// The live microphone track (replaced after a full rejoin).
    track: Option<LocalAudioTrack>,
    session: Option<Arc<Session>>,
    /// Tasks of the current voice run (microphone pump, meter, reopening), aborted at stop.
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The chosen devices (input, output; `None` = the system default).
    choice: (Option<String>, Option<String>),
    /// Where a (re)opened microphone sends its frames: the pump of this voice run.
    mic_tx: Option<mpsc::Sender<Vec<f32>>>,
    /// Whether a task is opening the input (0) or output (1) device again.
    reopening: [bool; 2],
    /// Counts voice runs: a reopening task of an earlier run does nothing.
    run: u64,
}

/// The app's voice: devices, state, and the pumps between them and the session.
pub struct VoiceHub {
    state: Mutex<State>,
    /// The playback the assistant's audio goes to (None while voice is off: dropped).
    playback: Mutex<Option<Arc<Playback>>>,
    emit: Emit,
    /// The runtime the session runs on, kept from `attach`/`start`: `control` may be
    /// called from a thread without one (a synchronous command), and still mutes the
    /// track there.
    runtime: Mutex<Option<tokio::runtime::Handle>>,
    /// Wakes the reopening tasks (another device was chosen).
    wake: Notify,
}

impl std::fmt::Debug for VoiceHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VoiceHub").finish_non_exhaustive()
    }
}

impl VoiceHub {
    /// A hub that tells the UI through `emit`, with echo cancellation on or off.
    pub fn new(emit: Emit, echo_cancellation: bool) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                status: VoiceStatus {
                    on: false,
                    mode: VoiceMode::PushToTalk,
                    muted: false,
                    talking: false,
                    transmitting: false,
                    input: off(),
                    output: off(),
                    echo_cancellation,
                    echo_cancelling: false,
                },
                devices: Devices::default(),
                track: None,
                session: None,
                tasks: Vec::new(),
                choice: (None, None),
                mic_tx: None,
                reopening: [false; 2],
                run: 0,
            }),
            playback: Mutex::new(None),
            emit,
            runtime: Mutex::new(tokio::runtime::Handle::try_current().ok()),
            wake: Notify::new(),
        })
    }

    /// The state now.
    pub fn status(&self) -> VoiceStatus {
        lock(&self.state).status.clone()
    }

    /// A new session: its assistant's audio plays while voice is on; a lost microphone
    /// track is published again.
    pub fn attach(self: &Arc<Self>, session: Arc<Session>) {
        self.keep_runtime();
        let events = session.take_voice_events();
        lock(&self.state).session = Some(Arc::clone(&session));
        let Some(mut events) = events else { return };
        let me = Arc::clone(self);
        tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                match ev {
                    VoiceEvent::AssistantAudio {
                        track_sid,
                        mut stream,
                    } => {
                        let me = Arc::clone(&me);
                        tokio::spawn(async move {
                            tracing::info!(track = %track_sid, "assistant audio subscribed");
                            let (mut frames, mut played) = (0u64, 0u64);
                            while let Some(frame) = stream.recv().await {
                                frames += 1;
                                let p = lock(&me.playback).clone();
                                if let Some(p) = &p {
                                    p.push_i16(&frame.samples);
                                    played += 1;
                                }
                                if frames == 1 || frames % 500 == 0 {
                                    tracing::info!(
                                        track = %track_sid,
                                        frames,
                                        played,
                                        queued_ms = p.as_ref().map(|p| p.queued_ms()),
                                        "assistant audio"
                                    );
                                }
                            }
                            tracing::info!(track = %track_sid, frames, played, "assistant audio ended");
                        });
                    }
                    VoiceEvent::LocalTrackLost {
                        sid,
                        by_server: true,
                    } => {
                        // Not published again: the server would refuse it.
                        tracing::warn!(track = %sid, "the server stopped our microphone track");
                        let mut st = lock(&me.state);
                        if st.track.as_ref().is_some_and(|t| t.sid() == sid) {
                            st.track = None;
                            st.status.input = failed(
                                "The room's server stopped your microphone (you may no longer \
                                 publish audio in this room)."
                                    .into(),
                            );
                            me.changed(&mut st);
                        }
                    }
                    VoiceEvent::LocalTrackMutedByServer { sid } => {
                        // The room's operator muted us: shown as the user's mute, which
                        // the user can lift.
                        let mut st = lock(&me.state);
                        if st.track.as_ref().is_some_and(|t| t.sid() == sid) {
                            tracing::info!(track = %sid, "the room muted our microphone");
                            st.status.muted = true;
                            me.changed(&mut st);
                        }
                    }
                    VoiceEvent::LocalTrackLost { sid, .. } => {
                        tracing::info!(track = %sid, "microphone track lost; publishing again");
                        {
                            // Gone with the old connection: publish again now, or when
                            // the microphone is back.
                            let mut st = lock(&me.state);
                            if st.track.as_ref().is_some_and(|t| t.sid() == sid) {
                                st.track = None;
                            }
                        }
                        // In its own task: it retries while the rejoin is under way, and
                        // the assistant's audio of the new connection must not wait.
                        let me = Arc::clone(&me);
                        tokio::spawn(async move { me.republish().await });
                    }
                    _ => {}
                }
            }
        });
    }

    /// The session ended: voice stops with it.
    pub async fn detach(&self) {
        self.stop().await;
        lock(&self.state).session = None;
    }

    fn keep_runtime(&self) {
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            *lock(&self.runtime) = Some(h);
        }
    }

    fn changed(&self, st: &mut State) {
        let live = transmitting(&st.status);
        st.status.transmitting = live;
        let wanted = st.status.echo_cancellation;
        st.status.echo_cancelling = match &st.devices.echo {
            Some(e) => {
                e.set_enabled(wanted);
                wanted && st.status.on
            }
            None => false,
        };
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| lock(&self.runtime).clone());
        if let (Some(track), Some(rt)) = (st.track.clone(), runtime) {
            if track.is_muted() == live {
                rt.spawn(async move {
                    if let Err(e) = track.set_muted(!live).await {
                        tracing::warn!(
                            "could not {} the microphone track: {e}",
                            if live { "unmute" } else { "mute" }
                        );
                    }
                });
            }
        }
        (self.emit)(AppEvent::Voice(st.status.clone()));
    }

    /// `voice_start`: opens the devices and publishes the microphone (muted until it
    /// should send). A device that cannot be opened is shown failed; the other is used.
    pub async fn start(
        self: &Arc<Self>,
        input: Option<String>,
        output: Option<String>,
    ) -> VoiceStatus {
        self.keep_runtime();
        let session = {
            let mut st = lock(&self.state);
            if st.status.on {
                return st.status.clone();
            }
            st.choice = (input.clone(), output.clone());
            st.session.clone()
        };
        let (tx, mut rx) = mpsc::channel::<Vec<f32>>(50);
        let mic_tx = tx.clone();
        let want_echo = self.status().echo_cancellation;
        // The chosen devices, or the defaults for one that is not there.
        let opened = tokio::task::spawn_blocking(move || {
            // Created whatever the setting (switching it on later applies at once);
            // without the library, voice still works and open mic needs headphones.
            let echo = match EchoCanceller::new() {
                Ok(e) => {
                    e.set_enabled(want_echo);
                    Some(e)
                }
                Err(e) => {
                    tracing::warn!("{e}; open mic needs headphones");
                    None
                }
            };
            let play = open_speaker(output, echo.clone());
            let cap = open_mic(input, &tx, echo.clone());
            (play, cap, echo)
        })
        .await;
        let (play, cap, echo) = match opened {
            Ok(x) => x,
            Err(e) => {
                let mut st = lock(&self.state);
                st.status.on = true;
                st.status.input = failed(format!("the audio devices could not be opened: {e}"));
                st.status.output = st.status.input.clone();
                self.changed(&mut st);
                return st.status.clone();
            }
        };
        let mut track = None;
        // A device that could not be opened is tried again in the background.
        let retry = [cap.is_err(), play.is_err()];
        let mut input_status = match &cap {
            Ok(c) => DeviceStatus {
                state: DeviceState::Ready,
                device: Some(c.device().to_owned()),
                error: None,
            },
            Err(e) => failed(open_failed("microphone", e)),
        };
        if cap.is_ok() {
            match session {
                // Published muted: nothing is sent until the rules say so.
                Some(s) => match s.publish_microphone(true).await {
                    Ok(t) => track = Some(t),
                    Err(e) => input_status = failed(capitalise(&e.to_string())),
                },
                None => input_status = failed("Not connected to an assistant.".into()),
            }
        }
        let output_status = match &play {
            Ok(p) => DeviceStatus {
                state: DeviceState::Ready,
                device: Some(p.device().to_owned()),
                error: None,
            },
            Err(e) => failed(open_failed("speaker", e)),
        };
        let playback = play.ok().map(Arc::new);
        *lock(&self.playback) = playback.clone();
        let mut st = lock(&self.state);
        st.status.on = true;
        st.status.input = input_status;
        st.status.output = output_status;
        st.devices = Devices {
            capture: if track.is_some() { cap.ok() } else { None },
            playback,
            echo,
        };
        st.track = track;
        st.mic_tx = Some(mic_tx);
        st.run += 1;
        st.reopening = [false; 2];
        // The microphone pump: frames go to whichever track is live now. While it should
        // not send, a frame is handed over only once the track is muted (the track drops
        // it but keeps its RTP clock running), so nothing leaks while the mute is on its way.
        let me = Arc::clone(self);
        st.tasks.push(tokio::spawn(async move {
            while let Some(frame) = rx.recv().await {
                let track = {
                    let st = lock(&me.state);
                    let live = st.status.transmitting;
                    st.track.clone().filter(|t| live || t.is_muted())
                };
                if let Some(t) = track {
                    if let Err(e) = t.push_frame_f32(&frame).await {
                        tracing::debug!("microphone frame not sent: {e}");
                    }
                }
            }
        }));
        let me = Arc::clone(self);
        st.tasks.push(tokio::spawn(async move { me.meter().await }));
        if retry[0] {
            self.reopen_later(&mut st, Dir::Input, REOPEN_FIRST);
        }
        if retry[1] {
            self.reopen_later(&mut st, Dir::Output, REOPEN_FIRST);
        }
        self.changed(&mut st);
        st.status.clone()
    }

    /// Starts a task that opens `dir`'s device again (unless one runs): first after
    /// `first`, then with a doubling wait up to [`REOPEN_MAX`], until it opens or voice
    /// stops. A new device choice wakes it.
    fn reopen_later(self: &Arc<Self>, st: &mut State, dir: Dir, first: Duration) {
        if !st.status.on || st.reopening[dir.index()] {
            self.wake.notify_waiters();
            return;
        }
        st.reopening[dir.index()] = true;
        let me = Arc::clone(self);
        let run = st.run;
        let task = async move { me.reopen(dir, run, first).await };
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| lock(&self.runtime).clone());
        match runtime {
            Some(rt) => st.tasks.push(rt.spawn(task)),
            None => {
                st.reopening[dir.index()] = false;
                tracing::warn!("no runtime to open the {} again on", dir.what());
            }
        }
    }

    async fn reopen(self: Arc<Self>, dir: Dir, run: u64, first: Duration) {
        let mut wait = first;
        let mut tries = 0u32;
        loop {
            if !wait.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = self.wake.notified() => {}
                }
            }
            let (chosen, mic, echo) = {
                let st = lock(&self.state);
                if !st.status.on || st.run != run {
                    return;
                }
                let chosen = match dir {
                    Dir::Input => st.choice.0.clone(),
                    Dir::Output => st.choice.1.clone(),
                };
                (chosen, st.mic_tx.clone(), st.devices.echo.clone())
            };
            tries += 1;
            let opened = tokio::task::spawn_blocking(move || open(dir, chosen, mic, echo)).await;
            let opened = match opened {
                Ok(Ok(o)) => o,
                Ok(Err(e)) => {
                    if tries == 1 || tries % 30 == 0 {
                        tracing::info!(tries, "the {} cannot be opened yet: {e}", dir.what());
                    }
                    wait = (wait * 2).clamp(REOPEN_FIRST, REOPEN_MAX);
                    continue;
                }
                Err(e) => {
                    tracing::warn!("opening the {} again failed: {e}", dir.what());
                    wait = (wait * 2).clamp(REOPEN_FIRST, REOPEN_MAX);
                    continue;
                }
            };
            let republish = {
                let mut st = lock(&self.state);
                if !st.status.on || st.run != run {
                    return;
                }
                st.reopening[dir.index()] = false;
                match opened {
                    Opened::Mic(c) if st.session.is_none() => {
                        // Nowhere to send it (as at `start` without a session).
                        drop(c);
                        st.status.input = failed("Not connected to an assistant.".into());
                    }
                    Opened::Mic(c) => {
                        tracing::info!(tries, device = %c.device(), "microphone open again");
                        st.status.input = ready(c.device());
                        st.devices.capture = Some(c);
                    }
                    Opened::Speaker(p) => {
                        tracing::info!(tries, device = %p.device(), "speaker open again");
                        st.status.output = ready(p.device());
                        let p = Arc::new(*p);
                        st.devices.playback = Some(Arc::clone(&p));
                        *lock(&self.playback) = Some(p);
                    }
                }
                self.changed(&mut st);
                dir == Dir::Input && st.track.is_none()
            };
            if republish {
                self.republish().await;
            }
            return;
        }
    }

    /// `voice_set_devices` while voice is on: a changed device is closed and the new
    /// choice opened at once (the call and the microphone track stay).
    pub fn use_devices(self: &Arc<Self>, input: Option<String>, output: Option<String>) {
        let mut st = lock(&self.state);
        let before = std::mem::replace(&mut st.choice, (input, output));
        if !st.status.on {
            return;
        }
        if before.0 != st.choice.0 {
            if let Some(c) = st.devices.capture.take() {
                c.stop();
                st.status.input =
                    failed(format!("Switching the microphone from \"{}\"…", c.device()));
            }
            self.reopen_later(&mut st, Dir::Input, Duration::ZERO);
        }
        if before.1 != st.choice.1 {
            if let Some(p) = st.devices.playback.take() {
                *lock(&self.playback) = None;
                p.stop();
                st.status.output =
                    failed(format!("Switching the speaker from \"{}\"…", p.device()));
            }
            self.reopen_later(&mut st, Dir::Output, Duration::ZERO);
        }
        self.changed(&mut st);
    }

    /// Levels to the UI, and the devices' health watched.
    async fn meter(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            let mut st = lock(&self.state);
            if !st.status.on {
                return;
            }
            let input = st.devices.capture.as_ref().map_or(0.0, Capture::level);
            let output = st.devices.playback.as_ref().map_or(0.0, |p| p.level());
            let mut broke = false;
            // A stream that ended (the device is gone) or stopped calling back is closed
            // and its device opened again in the background.
            if let Some(h) = st.devices.capture.as_ref().map(Capture::health) {
                if h != Health::Running {
                    if let Some(c) = st.devices.capture.take() {
                        st.status.input = failed(gone("microphone", c.device(), &h));
                    }
                    self.reopen_later(&mut st, Dir::Input, REOPEN_FIRST);
                    broke = true;
                }
            }
            if let Some(h) = st.devices.playback.as_ref().map(|p| p.health()) {
                if h != Health::Running {
                    if let Some(p) = st.devices.playback.take() {
                        st.status.output = failed(gone("speaker", p.device(), &h));
                    }
                    *lock(&self.playback) = None;
                    self.reopen_later(&mut st, Dir::Output, REOPEN_FIRST);
                    broke = true;
                }
            }
            if broke {
                self.changed(&mut st);
            }
            (self.emit)(AppEvent::VoiceLevel(VoiceLevel { input, output }));
        }
    }

    /// `voice_stop`: unpublishes the microphone and closes the devices.
    pub async fn stop(&self) -> VoiceStatus {
        let track = {
            let mut st = lock(&self.state);
            for t in st.tasks.drain(..) {
                t.abort();
            }
            st.devices = Devices::default();
            *lock(&self.playback) = None;
            st.mic_tx = None;
            st.reopening = [false; 2];
            st.run += 1;
            st.status.on = false;
            st.status.talking = false;
            st.status.input = off();
            st.status.output = off();
            let track = st.track.take();
            self.changed(&mut st);
            track
        };
        if let Some(t) = track {
            let _ = t.unpublish().await;
        }
        self.status()
    }

    /// `voice_control`: mute, mode, talk key.
    pub fn control(&self, c: VoiceControl) -> VoiceStatus {
        let mut st = lock(&self.state);
        if let Some(m) = c.muted {
            st.status.muted = m;
        }
        if let Some(m) = c.mode {
            st.status.mode = m;
        }
        if let Some(t) = c.talking {
            st.status.talking = t;
        }
        if let Some(e) = c.echo_cancellation {
            st.status.echo_cancellation = e;
        }
        self.changed(&mut st);
        st.status.clone()
    }

    /// Publishes the microphone again after the track was lost (a full rejoin) or when a
    /// microphone that was down opens again without a track. The track is lost as the
    /// rejoin begins, so the first tries usually fail (not connected yet): tried again
    /// with the same backoff as the devices for up to [`REPUBLISH_FOR`], while voice is on,
    /// the microphone works and no track is there; then the microphone is shown failed.
    async fn republish(self: &Arc<Self>) {
        let run = lock(&self.state).run;
        let began = tokio::time::Instant::now();
        let mut wait = Duration::ZERO;
        let mut tries = 0u32;
        loop {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let session = {
                let st = lock(&self.state);
                if !st.status.on
                    || st.run != run
                    || st.devices.capture.is_none()
                    || st.track.is_some()
                {
                    return;
                }
                st.session.clone()
            };
            let Some(session) = session else { return };
            tries += 1;
            // Published muted; `changed` unmutes it when it should send.
            match session.publish_microphone(true).await {
                Ok(t) => {
                    let stale = {
                        let mut st = lock(&self.state);
                        if st.status.on && st.run == run && st.track.is_none() {
                            tracing::info!(tries, track = %t.sid(), "microphone track published again");
                            st.track = Some(t);
                            self.changed(&mut st);
                            None
                        } else {
                            Some(t)
                        }
                    };
                    if let Some(t) = stale {
                        let _ = t.unpublish().await;
                    }
                    return;
                }
                Err(e) => {
                    if tries == 1 {
                        tracing::info!("the microphone track cannot be published yet: {e}");
                    }
                    if began.elapsed() >= REPUBLISH_FOR {
                        let mut st = lock(&self.state);
                        if st.status.on && st.run == run {
                            st.devices.capture = None;
                            st.status.input = failed(capitalise(&e.to_string()));
                            self.changed(&mut st);
                        }
                        return;
                    }
                    wait = (wait * 2).clamp(REOPEN_FIRST, REOPEN_MAX);
                }
            }
        }
    }
}

fn ready(device: &str) -> DeviceStatus {
    DeviceStatus {
        state: DeviceState::Ready,
        device: Some(device.to_owned()),
        error: None,
    }
}

/// Why a working device stopped, naming it; the hub is trying to open it again.
fn gone(what: &str, device: &str, h: &Health) -> String {
    let why = match h {
        Health::Failed(why) => why.clone(),
        _ => "it stopped taking or sending audio".into(),
    };
    format!(
        "The {what} \"{device}\" was disconnected ({why}): unplugged, or the sound server \
         stopped. Voice resumes when it is back or another {what} is chosen in Settings."
    )
}

/// Why `what` (microphone, speaker) could not be opened, naming it when the error does
/// not ("The audio device \"alsa:default\" is not available" alone does not say which).
fn open_failed(what: &str, e: &outpost_audio::AudioError) -> String {
    let m = e.to_string();
    if m.contains(what) {
        capitalise(&m)
    } else {
        format!("The {what} could not be opened: {m}.")
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => {
            f.to_uppercase().collect::<String>()
                + c.as_str()
                + if s.ends_with('.') { "" } else { "." }
        }
        None => String::new(),
    }
}

/// `voice_devices`: the devices and the chosen ones.
pub async fn devices(input: Option<String>, output: Option<String>) -> AudioDevices {
    let listed = tokio::task::spawn_blocking(outpost_audio::list_devices).await;
    let map = |d: outpost_audio::DeviceInfo| AudioDevice {
        id: d.id,
        name: d.name,
        is_default: d.is_default,
    };
    match listed {
        Ok(Ok(d)) => AudioDevices {
            inputs: d.inputs.into_iter().map(map).collect(),
            outputs: d.outputs.into_iter().map(map).collect(),
            input,
            output,
            error: None,
        },
        Ok(Err(e)) => AudioDevices {
            inputs: Vec::new(),
            outputs: Vec::new(),
            input,
            output,
            error: Some(capitalise(&e.to_string())),
        },
        Err(e) => AudioDevices {
            inputs: Vec::new(),
            outputs: Vec::new(),
            input,
            output,
            error: Some(format!("The audio devices could not be listed: {e}.")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(on: bool, ready: bool, muted: bool, mode: VoiceMode, talking: bool) -> VoiceStatus {
        VoiceStatus {
            echo_cancellation: true,
            echo_cancelling: false,
            on,
            mode,
            muted,
            talking,
            transmitting: false,
            input: DeviceStatus {
                state: if ready {
                    DeviceState::Ready
                } else {
                    DeviceState::Failed
                },
                device: None,
                error: None,
            },
            output: off(),
        }
    }

    #[test]
    fn a_chosen_device_that_is_gone_falls_back_to_the_default_and_nothing_else_does() {
        use outpost_audio::AudioError;
        let tried = std::cell::RefCell::new(Vec::new());
        let gone_then_default = |d: Option<String>| {
            tried.borrow_mut().push(d.clone());
            match d {
                Some(id) => Err(AudioError::DeviceNotFound(id)),
                None => Ok("default"),
            }
        };
        assert_eq!(
            chosen_or_default("speaker", Some("alsa:usb".into()), gone_then_default),
            Ok("default")
        );
        assert_eq!(*tried.borrow(), vec![Some("alsa:usb".to_owned()), None]);
        // Another failure of the chosen device (busy, denied) is its own answer.
        tried.borrow_mut().clear();
        let busy = |d: Option<String>| -> Result<&str, AudioError> {
            tried.borrow_mut().push(d);
            Err(AudioError::OpenFailed {
                device: "alsa:usb".into(),
                reason: "busy".into(),
            })
        };
        assert!(matches!(
            chosen_or_default("speaker", Some("alsa:usb".into()), busy),
            Err(AudioError::OpenFailed { .. })
        ));
        assert_eq!(tried.borrow().len(), 1);
        // The default that is not there is not tried twice.
        tried.borrow_mut().clear();
        let none = |d: Option<String>| -> Result<&str, AudioError> {
            tried.borrow_mut().push(d);
            Err(AudioError::DeviceNotFound("default".into()))
        };
        assert!(chosen_or_default("microphone", None, none).is_err());
        assert_eq!(tried.borrow().len(), 1);
    }

    #[test]
    fn a_disconnected_device_is_named_and_the_way_back_said() {
        let m = gone("speaker", "alsa:usb", &Health::Stalled);
        assert!(
            m.contains("The speaker \"alsa:usb\" was disconnected"),
            "{m}"
        );
        assert!(m.contains("another speaker is chosen in Settings"), "{m}");
        let m = gone(
            "microphone",
            "alsa:pulse",
            &Health::Failed("Device disconnected".into()),
        );
        assert!(m.contains("(Device disconnected)"), "{m}");
    }

    #[test]
    fn only_an_unmuted_working_microphone_held_or_open_transmits() {
        use VoiceMode::{OpenMic, PushToTalk};
        assert!(transmitting(&status(true, true, false, OpenMic, false)));
        assert!(transmitting(&status(true, true, false, PushToTalk, true)));
        assert!(!transmitting(&status(true, true, false, PushToTalk, false)));
        assert!(!transmitting(&status(true, true, true, OpenMic, false)));
        assert!(!transmitting(&status(true, true, true, PushToTalk, true)));
        assert!(!transmitting(&status(true, false, false, OpenMic, false)));
        assert!(!transmitting(&status(false, true, false, OpenMic, true)));
    }
}
