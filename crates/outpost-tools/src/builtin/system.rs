//! system_info: facts about the computer the assistant may use to phrase answers.

use outpost_policy::ToolHints;
use outpost_protocol::Map;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::tool::{Access, Prepared, Tool, ToolEnv, ToolSpec, parse_params, to_map};

/// system_info takes no parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SystemInfoParams {}

/// Result of system_info.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SystemInfoOutput {
    /// Operating system, e.g. "linux", "macos", "windows".
    pub os: String,
    /// "unix" or "windows".
    pub os_family: String,
    /// CPU architecture, e.g. "x86_64", "aarch64".
    pub arch: String,
    /// The computer's host name.
    pub hostname: String,
    /// The user's locale (BCP 47), when known.
    pub locale: Option<String>,
    /// The IANA time zone, when known.
    pub timezone: Option<String>,
    /// Local date and time with its UTC offset (RFC 3339).
    pub local_time: String,
    /// Offset from UTC, e.g. "+02:00".
    pub utc_offset: String,
}

/// system_info.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemInfo;

impl Tool for SystemInfo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<SystemInfoParams, SystemInfoOutput>(
            "system_info",
            "Report the operating system, architecture, host name, locale, time zone and \
             local time of the user's computer.",
            ToolHints::READ_ONLY,
            2_000,
        )
    }

    fn prepare(&self, params: Map, _env: &ToolEnv) -> Result<Prepared> {
        let _: SystemInfoParams = parse_params(params)?;
        Ok(Prepared {
            access: Access {
                summary: "Read the operating system, host name, locale and time".into(),
                ..Access::default()
            },
            job: Box::new(|cx| {
                cx.check()?;
                let now = jiff::Zoned::now();
                to_map(&SystemInfoOutput {
                    os: std::env::consts::OS.into(),
                    os_family: std::env::consts::FAMILY.into(),
                    arch: std::env::consts::ARCH.into(),
                    hostname: gethostname::gethostname().to_string_lossy().into_owned(),
                    locale: sys_locale::get_locale(),
                    timezone: now.time_zone().iana_name().map(str::to_owned),
                    local_time: now.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
                    utc_offset: now.strftime("%:z").to_string(),
                })
            }),
        })
    }
}
