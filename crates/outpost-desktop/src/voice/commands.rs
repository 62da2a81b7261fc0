//! [`Desktop`]'s voice commands (`voice_*`).

use crate::contract::{AudioDevices, VoiceControl, VoiceStatus};
use crate::error::{DesktopError, Result};

use crate::desktop::Desktop;
use outpost_sync::lock;

impl Desktop {
    /// `voice_status`: the voice state now (for a reloaded page).
    pub fn voice_status(&self) -> VoiceStatus {
        self.inner.voice.status()
    }

    /// `voice_start`: opens the chosen devices and publishes the microphone (sent only
    /// while it should: see `voice::transmitting`). Needs a session.
    pub async fn voice_start(&self) -> Result<VoiceStatus> {
        self.session().await?;
        let c = self.config();
        Ok(self.inner.voice.start(c.voice_input, c.voice_output).await)
    }

    /// `voice_stop`: unpublishes the microphone and closes the devices.
    pub async fn voice_stop(&self) -> VoiceStatus {
        self.inner.voice.stop().await
    }

    /// `voice_control`: mute, push-to-talk or open mic, the talk key, echo cancellation
    /// (the last one is saved in the settings; if the file cannot be written the change
    /// still applies until the app quits, and the log says why).
    pub fn voice_control(&self, control: VoiceControl) -> VoiceStatus {
        if let Some(on) = control.echo_cancellation {
            let mut c = lock(&self.inner.config);
            c.voice_echo_cancellation = Some(on);
            if let Err(e) = c.save(&self.inner.paths.settings_file()) {
                tracing::warn!("the echo cancellation setting was not saved: {e}");
            }
        }
        self.inner.voice.control(control)
    }

    /// `voice_devices`: the audio devices and the chosen ones.
    pub async fn voice_devices(&self) -> AudioDevices {
        let c = self.config();
        crate::voice::devices(c.voice_input, c.voice_output).await
    }

    /// `voice_set_devices`: chooses the microphone and output (`None` = the system's
    /// default), saved in the settings; while voice is on, a changed device is switched
    /// at once without leaving the call (a failed one is tried again with the new choice).
    pub async fn voice_set_devices(
        &self,
        input: Option<String>,
        output: Option<String>,
    ) -> Result<AudioDevices> {
        for (name, v) in [("input", &input), ("output", &output)] {
            if v.as_ref().is_some_and(|v| v.is_empty() || v.len() > 512) {
                return Err(DesktopError::InvalidArgument {
                    name: name.into(),
                    reason: "a device id is 1 to 512 characters".into(),
                });
            }
        }
        {
            let mut c = lock(&self.inner.config);
            c.voice_input = input.clone();
            c.voice_output = output.clone();
            c.save(&self.inner.paths.settings_file())?;
        }
        self.inner.voice.use_devices(input, output);
        Ok(self.voice_devices().await)
    }
}
