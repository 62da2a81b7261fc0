//! `voice_*`: the microphone and speaker (push-to-talk, open mic, mute, devices).

use outpost_desktop::Desktop;
use outpost_desktop::contract::{AudioDevices, VoiceControl, VoiceStatus};
use tauri::State;

use crate::error::{CmdResult, err};

/// The voice state now.
#[tauri::command]
pub fn voice_status(desktop: State<'_, Desktop>) -> VoiceStatus {
    desktop.voice_status()
}

/// Turns voice on: opens the devices and publishes the microphone (muted until it
/// should send).
#[tauri::command]
pub async fn voice_start(desktop: State<'_, Desktop>) -> CmdResult<VoiceStatus> {
    desktop.voice_start().await.map_err(err)
}

/// Turns voice off.
#[tauri::command]
pub async fn voice_stop(desktop: State<'_, Desktop>) -> CmdResult<VoiceStatus> {
    Ok(desktop.voice_stop().await)
}

/// Mute, mode (push-to-talk or open mic), talk key down or up.
#[tauri::command]
pub fn voice_control(desktop: State<'_, Desktop>, control: VoiceControl) -> VoiceStatus {
    desktop.voice_control(control)
}

/// The audio devices and the chosen ones.
#[tauri::command]
pub async fn voice_devices(desktop: State<'_, Desktop>) -> CmdResult<AudioDevices> {
    Ok(desktop.voice_devices().await)
}

/// Chooses the microphone and output (absent = the system default).
#[tauri::command]
pub async fn voice_set_devices(
    desktop: State<'_, Desktop>,
    input: Option<String>,
    output: Option<String>,
) -> CmdResult<AudioDevices> {
    desktop.voice_set_devices(input, output).await.map_err(err)
}
