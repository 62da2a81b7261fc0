//! Which input and output devices there are, and finding one by the id the user chose.
//! Ids are cpal's device ids (`host:device`, e.g. `alsa:pulse`), stable across runs, so
//! a choice can be saved in the settings.

use cpal::traits::{DeviceTrait, HostTrait};

use crate::error::{AudioError, Result};

/// One device a user can choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The id to open it by (saved in the settings).
    pub id: String,
    /// A name to show.
    pub name: String,
    /// Whether it is the system's default for its direction.
    pub is_default: bool,
}

/// The devices of both directions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Devices {
    /// Microphones (and other capture devices).
    pub inputs: Vec<DeviceInfo>,
    /// Speakers and headphones.
    pub outputs: Vec<DeviceInfo>,
}

fn id_of(d: &cpal::Device) -> Option<String> {
    d.id().ok().map(|id| id.to_string())
}

fn info(d: &cpal::Device, default: Option<&str>) -> Option<DeviceInfo> {
    let id = id_of(d)?;
    let name = d
        .description()
        .map(|desc| desc.name().to_string())
        .unwrap_or_else(|_| id.clone());
    Some(DeviceInfo {
        is_default: default == Some(id.as_str()),
        id,
        name,
    })
}

/// Lists the input and output devices of the system's default audio host.
pub fn list_devices() -> Result<Devices> {
    let host = cpal::default_host();
    let def_in = host.default_input_device().as_ref().and_then(id_of);
    let def_out = host.default_output_device().as_ref().and_then(id_of);
    let inputs = host
        .input_devices()
        .map_err(|e| AudioError::Host(format!("cannot list input devices: {e}")))?
        .filter_map(|d| info(&d, def_in.as_deref()))
        .collect();
    let outputs = host
        .output_devices()
        .map_err(|e| AudioError::Host(format!("cannot list output devices: {e}")))?
        .filter_map(|d| info(&d, def_out.as_deref()))
        .collect();
    Ok(Devices { inputs, outputs })
}

/// The device with `id`, or the default one of the direction when `id` is `None`.
pub(crate) fn find(id: Option<&str>, input: bool) -> Result<(cpal::Device, String)> {
    let host = cpal::default_host();
    let Some(id) = id else {
        let d = if input {
            host.default_input_device()
        } else {
            host.default_output_device()
        };
        return match d {
            Some(d) => {
                let name = id_of(&d).unwrap_or_else(|| "default".into());
                Ok((d, name))
            }
            None if input => Err(AudioError::NoInputDevice),
            None => Err(AudioError::NoOutputDevice),
        };
    };
    let parsed: cpal::DeviceId = id
        .parse()
        .map_err(|_| AudioError::DeviceNotFound(id.to_string()))?;
    match host.device_by_id(&parsed) {
        Some(d) if (input && d.supports_input()) || (!input && d.supports_output()) => {
            Ok((d, id.to_string()))
        }
        _ => Err(AudioError::DeviceNotFound(id.to_string())),
    }
}
