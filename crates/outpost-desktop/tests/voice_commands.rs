//! The voice commands without a sound card or a session: bad device ids are refused with
//! the field named, a good choice is saved in settings.toml and survives a restart, voice
//! cannot start without a session, and mute/mode/talk change the state without ever
//! transmitting while voice is off; the echo cancellation setting is on by default and
//! saved. (The devices themselves: outpost-audio's
//! `pulse_devices` test; the whole path: `tests/tests/voice_e2e.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use outpost_desktop::contract::{DeviceState, VoiceControl, VoiceMode};
use outpost_desktop::paths::Paths;
use outpost_desktop::secrets::MemorySecrets;
use outpost_desktop::{Desktop, DesktopError, Notifier};

#[derive(Debug, Default)]
struct Quiet;

impl Notifier for Quiet {
    fn notify(&self, _title: &str, _body: &str) {}
}

fn open(paths: &Paths) -> Desktop {
    Desktop::open(
        paths.clone(),
        Arc::new(MemorySecrets::default()),
        Arc::new(Quiet),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_choice_is_checked_and_saved_and_voice_needs_a_session() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = Paths {
        config_dir: tmp.path().join("config"),
        data_dir: tmp.path().join("data"),
    };
    let desktop = open(&paths);

    for bad in [String::new(), "x".repeat(513)] {
        match desktop.voice_set_devices(Some(bad.clone()), None).await {
            Err(DesktopError::InvalidArgument { name, .. }) => assert_eq!(name, "input"),
            other => panic!("{} chars: expected invalid input, got {other:?}", bad.len()),
        }
        match desktop.voice_set_devices(None, Some(bad)).await {
            Err(DesktopError::InvalidArgument { name, .. }) => assert_eq!(name, "output"),
            other => panic!("expected invalid output, got {other:?}"),
        }
    }
    let chosen = desktop
        .voice_set_devices(Some("alsa:usb-mic".into()), None)
        .await
        .unwrap();
    assert_eq!(chosen.input.as_deref(), Some("alsa:usb-mic"));
    assert_eq!(chosen.output, None);
    drop(desktop);
    let desktop = open(&paths);
    let again = desktop.voice_devices().await;
    assert_eq!(again.input.as_deref(), Some("alsa:usb-mic"));

    let st = desktop.voice_status();
    assert!(!st.on && !st.transmitting);
    assert_eq!(st.input.state, DeviceState::Off);
    assert!(matches!(
        desktop.voice_start().await,
        Err(DesktopError::NotConnected)
    ));

    let st = desktop.voice_control(VoiceControl {
        muted: None,
        mode: Some(VoiceMode::OpenMic),
        talking: Some(true),
        echo_cancellation: None,
    });
    assert_eq!(st.mode, VoiceMode::OpenMic);
    assert!(st.talking && !st.transmitting, "voice is off: {st:?}");
    let st = desktop.voice_control(VoiceControl {
        muted: Some(true),
        mode: None,
        talking: None,
        echo_cancellation: None,
    });
    assert!(st.muted && st.mode == VoiceMode::OpenMic && !st.transmitting);
    let st = desktop.voice_stop().await;
    assert!(!st.on && !st.talking);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_cancellation_is_on_by_default_and_its_setting_survives_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = Paths {
        config_dir: tmp.path().join("config"),
        data_dir: tmp.path().join("data"),
    };
    let desktop = open(&paths);
    let st = desktop.voice_status();
    assert!(st.echo_cancellation, "on by default: {st:?}");
    // Voice is off: nothing is being cancelled yet.
    assert!(!st.echo_cancelling);
    let st = desktop.voice_control(VoiceControl {
        echo_cancellation: Some(false),
        ..VoiceControl::default()
    });
    assert!(!st.echo_cancellation && !st.echo_cancelling);
    drop(desktop);
    let text = std::fs::read_to_string(paths.settings_file()).unwrap();
    assert!(text.contains("voice_echo_cancellation = false"), "{text}");
    let desktop = open(&paths);
    assert!(!desktop.voice_status().echo_cancellation);
    let st = desktop.voice_control(VoiceControl {
        echo_cancellation: Some(true),
        ..VoiceControl::default()
    });
    assert!(st.echo_cancellation);
    drop(desktop);
    assert!(open(&paths).voice_status().echo_cancellation);
}
