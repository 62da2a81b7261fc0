//! Voice in the app: the microphone (outpost-audio) feeds the session's microphone track
//! (outpost-core → outpost-livekit), and the assistant's audio tracks play on the output
//! device. One [`VoiceHub`] per app owns the devices and the voice state the UI shows:
//! on/off, push-to-talk or open mic, mute, the talk key, each device's state, and the
//! levels (about ten times a second).
//!
//! What is sent follows one rule, [`transmitting`]: voice on, microphone working, not
//! muted, and open mic or the talk key held. Otherwise the track is muted (the server and
//! the agent see it muted, and no packet leaves). A device that fails — none there, the
//! system refuses it, unplugged mid-call — is shown as failed with the reason; the
//! session and the text chat go on.
//!
//! Echo cancellation (the "Echo cancellation" setting, on by default): one
//! [`EchoCanceller`] per voice run is shared by the speaker (which feeds it what it
//! plays) and the microphone (whose frames it cleans), so open mic works through
//! speakers. Switched off, or when the canceller cannot be created, open mic needs
//! headphones and the UI says so ([`VoiceStatus::echo_cancelling`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outpost_audio::{Capture, CaptureOptions, EchoCanceller, Health, Playback, PlaybackOptions};
use outpost_core::{LocalAudioTrack, Session, VoiceEvent};
use tokio::sync::mpsc;

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
    /// Tasks of the current voice run (microphone pump, meter), aborted at stop.
    tasks: Vec<tokio::task::JoinHandle<()>>,
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
}

impl std::fmt::Debug for VoiceHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VoiceHub").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
            }),
            playback: Mutex::new(None),
            emit,
            runtime: Mutex::new(tokio::runtime::Handle::try_current().ok()),
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
                    VoiceEvent::LocalTrackLost { sid } => {
                        tracing::info!(track = %sid, "microphone track lost; publishing again");
                        me.republish().await;
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
            let st = lock(&self.state);
            if st.status.on {
                return st.status.clone();
            }
            st.session.clone()
        };
        let (tx, mut rx) = mpsc::channel::<Vec<f32>>(50);
        let want_echo = self.status().echo_cancellation;
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
            let play = Playback::start(&PlaybackOptions {
                device: output,
                device_rate: None,
                echo: echo.clone(),
            });
            let cap = Capture::start(
                &CaptureOptions {
                    device: input,
                    device_rate: None,
                    echo: echo.clone(),
                },
                tx,
            );
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
                Some(s) => match s.publish_microphone().await {
                    Ok(t) => {
                        // Nothing is sent until the rules say so.
                        if let Err(e) = t.set_muted(true).await {
                            tracing::warn!("could not mute the new microphone track: {e}");
                        }
                        track = Some(t);
                    }
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
        self.changed(&mut st);
        st.status.clone()
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
            if let Some(h) = st.devices.capture.as_ref().map(Capture::health) {
                if h != Health::Running {
                    st.devices.capture = None;
                    st.status.input = failed(gone("microphone", &h));
                    broke = true;
                }
            }
            if let Some(h) = st.devices.playback.as_ref().map(|p| p.health()) {
                if h != Health::Running {
                    st.devices.playback = None;
                    *lock(&self.playback) = None;
                    st.status.output = failed(gone("speaker", &h));
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

    /// Publishes the microphone again after the track was lost (full rejoin).
    async fn republish(&self) {
        let session = {
            let st = lock(&self.state);
            if !st.status.on || st.devices.capture.is_none() {
                return;
            }
            st.session.clone()
        };
        let Some(session) = session else { return };
        match session.publish_microphone().await {
            Ok(t) => {
                // Muted first; `changed` unmutes it when it should send.
                if let Err(e) = t.set_muted(true).await {
                    tracing::warn!("could not mute the republished track: {e}");
                }
                let mut st = lock(&self.state);
                st.track = Some(t);
                self.changed(&mut st);
            }
            Err(e) => {
                let mut st = lock(&self.state);
                st.status.input = failed(capitalise(&e.to_string()));
                self.changed(&mut st);
            }
        }
    }
}

fn gone(what: &str, h: &Health) -> String {
    match h {
        Health::Failed(why) => format!(
            "The {what} stopped working: it was unplugged or the sound server stopped ({why})."
        ),
        _ => format!("The {what} stopped sending audio (unplugged, or the sound server stopped)."),
    }
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
