//! The app's voice hub (`outpost_desktop::voice::VoiceHub`) keeping its speaker through
//! device changes, against a private PulseAudio daemon ([`outpost_tests::pulse`]) reached
//! through cpal → ALSA → the pulse plugin, as in the app:
//!
//! - a chosen device that is not there: the default is opened instead;
//! - another device chosen in Settings while voice is on: switched at once (a microphone
//!   chosen without a session stays "not connected");
//! - the devices unplugged mid-call (`pactl unload-module` of both null sinks; with one
//!   left PulseAudio would move the stream to it): shown disconnected, naming the device,
//!   and open again by themselves once plugged back;
//! - the speaker suspended by the sound server: shown, and working again once resumed;
//! - no device at all when voice is turned on: shown failed, and open once one is plugged.
//!
//! Each step checks the hub's state, that the UI was told (a voice event), and for an
//! open speaker that the sound server really has a stream on the `speaker` sink. No
//! session: the microphone then stays failed ("Not connected"), and its reopening with a
//! session is tested in `voice_app_e2e.rs`. No test harness: `PULSE_SERVER` must be set
//! before any thread starts, so `main` sets it and runs the scenario, printing
//! `N passed, N failed`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use outpost_desktop::contract::{AppEvent, DeviceState, VoiceStatus};
use outpost_desktop::voice::VoiceHub;
use outpost_tests::pulse::Pulse;

/// Waits up to 15 s for the hub's state to satisfy `ok`.
async fn until(
    hub: &VoiceHub,
    what: &str,
    ok: impl Fn(&VoiceStatus) -> bool,
) -> anyhow::Result<VoiceStatus> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let st = hub.status();
        if ok(&st) {
            return Ok(st);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("{what}: still {st:#?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether the sound server has a playback stream on the `speaker` sink.
fn playing_on_speaker(pulse: &Pulse) -> anyhow::Result<bool> {
    let sinks = pulse.pactl(&["list", "short", "sinks"])?;
    let Some(id) = sinks
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("speaker"))
        .and_then(|l| l.split_whitespace().next())
    else {
        return Ok(false);
    };
    let inputs = pulse.pactl(&["list", "short", "sink-inputs"])?;
    Ok(inputs
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(id)))
}

async fn wait_playing(pulse: &Pulse, when: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !playing_on_speaker(pulse)? {
        if tokio::time::Instant::now() > deadline {
            bail!(
                "no stream on the speaker sink {when}: {}",
                pulse.pactl(&["list", "short", "sink-inputs"])?
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn told(events: &Mutex<Vec<AppEvent>>, ok: impl Fn(&VoiceStatus) -> bool) -> bool {
    events
        .lock()
        .unwrap()
        .iter()
        .any(|e| matches!(e, AppEvent::Voice(v) if ok(v)))
}

async fn scenario(pulse: &Pulse) -> anyhow::Result<()> {
    let events: Arc<Mutex<Vec<AppEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let hub = VoiceHub::new(Arc::new(move |e| sink.lock().unwrap().push(e)), true);

    // A chosen speaker that is not there: the default instead.
    let st = hub
        .start(None, Some("alsa:outpost-no-such-device".into()))
        .await;
    println!("voice on with a missing speaker chosen: {:?}", st.output);
    ensure!(
        st.output.state == DeviceState::Ready,
        "the default speaker was not opened: {st:#?}"
    );
    ensure!(
        st.output.device.as_deref() != Some("alsa:outpost-no-such-device"),
        "{st:#?}"
    );
    wait_playing(pulse, "on the default").await?;
    // No session: the microphone says so (and is not retried: it is not the device).
    ensure!(st.input.state == DeviceState::Failed, "{st:#?}");

    // Another device chosen in Settings while voice is on.
    let listed = outpost_desktop::voice::devices(None, None).await;
    let other = listed
        .outputs
        .iter()
        .map(|d| d.id.clone())
        .find(|id| Some(id.as_str()) != st.output.device.as_deref() && id.ends_with(":pulse"))
        .with_context(|| format!("no other output to switch to: {listed:#?}"))?;
    hub.use_devices(None, Some(other.clone()));
    let st = until(&hub, "switched to the chosen speaker", |s| {
        s.output.state == DeviceState::Ready && s.output.device.as_deref() == Some(other.as_str())
    })
    .await?;
    println!("switched: {:?}", st.output);
    wait_playing(pulse, "after the switch").await?;
    // A microphone chosen without a session: opened and closed again, still "not
    // connected" (nowhere to send it).
    hub.use_devices(Some(other.clone()), Some(other.clone()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let st = hub.status();
    ensure!(
        st.input.state == DeviceState::Failed
            && st
                .input
                .error
                .as_deref()
                .is_some_and(|e| e.contains("Not connected")),
        "{st:#?}"
    );
    ensure!(st.output.state == DeviceState::Ready, "{st:#?}");

    // Unplugged mid-call: shown disconnected, naming the device.
    pulse.unplug("mic_in")?;
    pulse.unplug("speaker")?;
    let st = until(&hub, "the speaker shown disconnected", |s| {
        s.output.state == DeviceState::Failed
    })
    .await?;
    println!("unplugged: {:?}", st.output.error);
    let error = st.output.error.clone().unwrap_or_default();
    ensure!(
        error.contains("was disconnected") && error.contains(&format!("\"{other}\"")),
        "the speaker's error does not say it was disconnected or which: {error:?}"
    );
    ensure!(st.on, "voice went off: {st:#?}");
    ensure!(
        told(&events, |v| v.output.state == DeviceState::Failed),
        "the UI was not told"
    );
    // Plugged back: open again by itself.
    pulse.plug("speaker")?;
    pulse.plug("mic_in")?;
    let st = until(&hub, "the speaker open again", |s| {
        s.output.state == DeviceState::Ready
    })
    .await?;
    println!("plugged back: {:?}", st.output);
    wait_playing(pulse, "after the replug").await?;

    // The speaker suspended for a while (`pactl suspend-sink`): its stream stops calling
    // back, which is shown; the hub's next stream opens on the suspended sink and counts
    // as ready (it is given 10 s for its first callback), and plays once it is resumed.
    pulse.pactl(&["suspend-sink", "speaker", "1"])?;
    let st = until(&hub, "the suspended speaker shown", |s| {
        s.output.state == DeviceState::Failed
    })
    .await?;
    println!("suspended: {:?}", st.output.error);
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("suspended 2 s later: {:?}", hub.status().output);
    pulse.pactl(&["suspend-sink", "speaker", "0"])?;
    let resumed = tokio::time::Instant::now();
    // Ready and still Ready 3 s later (a stream that never calls back would fail again).
    until(&hub, "the speaker open after the resume", |s| {
        s.output.state == DeviceState::Ready
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let st = until(&hub, "the speaker working after the resume", |s| {
        s.output.state == DeviceState::Ready
    })
    .await?;
    println!(
        "resumed: {:?} ({} ms)",
        st.output,
        resumed.elapsed().as_millis()
    );
    wait_playing(pulse, "after the resume").await?;

    // No device at all when voice is turned on: failed, then open once one is there.
    let st = hub.stop().await;
    ensure!(!st.on && st.output.state == DeviceState::Off, "{st:#?}");
    pulse.unplug("mic_in")?;
    pulse.unplug("speaker")?;
    let st = hub.start(None, None).await;
    println!("voice on without devices: {:?}", st.output);
    ensure!(st.output.state == DeviceState::Failed, "{st:#?}");
    pulse.plug("speaker")?;
    pulse.plug("mic_in")?;
    let st = until(&hub, "the speaker open once plugged", |s| {
        s.output.state == DeviceState::Ready
    })
    .await?;
    println!("plugged in: {:?}", st.output);
    wait_playing(pulse, "once plugged").await?;

    // Voice off stops the reopening: nothing opens after it.
    let st = hub.stop().await;
    ensure!(!st.on, "{st:#?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    ensure!(
        !playing_on_speaker(pulse)?,
        "a stream is still open with voice off"
    );
    Ok(())
}

fn main() {
    let pulse = Pulse::start_for_this_process();
    let rt = tokio::runtime::Runtime::new().expect("tokio");
    outpost_tests::server::run_one(
        "the_voice_hub_keeps_its_speaker_through_device_changes",
        || rt.block_on(scenario(&pulse)),
    );
}
