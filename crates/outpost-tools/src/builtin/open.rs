//! open_path and open_url: hand a file or web address to the desktop's default handler.
//! Both ask every time. The launcher is injectable so tests never start anything.
//!
//! open_path resolves the path once into a [`Resolved`] (the policy judges the real place
//! its held folder has) and, immediately before launching, checks through the held folder
//! that the folder is still at that place and the target is still the object that was
//! judged; a swap refuses the launch. The handler gets a path, not the handle, so a swap in
//! the short time between that check and the handler opening the path is not seen.

use std::ffi::OsStr;

use outpost_policy::ToolHints;
use outpost_protocol::Map;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Result, ToolError};
pub use crate::launcher::{DesktopLauncher, Launcher};
use crate::paths::Resolved;
use crate::tool::{Access, Prepared, Tool, ToolEnv, ToolSpec, parse_params, to_map};

/// The hints of both launchers: they reach into another application, so they ask every
/// time.
const LAUNCHES: ToolHints = ToolHints {
    read_only: false,
    destructive: false,
    open_world: true,
    asks_every_time: true,
};

/// Parameters of open_path.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenPathParams {
    /// The file or folder to open (absolute, or starting with `~/`).
    #[schemars(length(min = 1, max = 4096))]
    pub path: String,
}

/// Result of open_path and open_url.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Opened {
    /// What was handed to the default handler.
    pub opened: String,
}

/// open_path.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenPath;

impl Tool for OpenPath {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<OpenPathParams, Opened>(
            "open_path",
            "Open a file or folder on the user's computer with its default application. \
             The user is asked every time.",
            LAUNCHES,
            10_000,
        )
    }

    fn prepare(&self, params: Map, env: &ToolEnv) -> Result<Prepared> {
        let p: OpenPathParams = parse_params(params)?;
        let held = Resolved::resolve(&env.home, "path", &p.path)?;
        let launcher = env.launcher.clone();
        let path = held.path().to_path_buf();
        Ok(Prepared {
            access: Access {
                summary: format!("Open {} with its default application", path.display()),
                folder: Some(held.parent().to_path_buf()),
                paths: vec![path],
                force_ask: None,
            },
            // What is there is reported by the job, once the policy (and the user) allowed it.
            job: Box::new(move |cx| {
                cx.check()?;
                let target = held.path();
                // Last check, right before the launch, through the held folder.
                let meta = held.metadata()?;
                if let Some(kind) = crate::paths::odd_kind(&meta.file_type()) {
                    return Err(ToolError::refused(format!(
                        "{} is {kind}",
                        target.display()
                    )));
                }
                launcher.open(target.as_os_str()).map_err(|e| {
                    ToolError::exec(format!("Cannot open {}: {e}", target.display()))
                })?;
                to_map(&Opened {
                    opened: target.to_string_lossy().into_owned(),
                })
            }),
        })
    }
}

/// Parameters of open_url.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenUrlParams {
    /// An http, https or mailto address.
    #[schemars(length(min = 1, max = 4096))]
    pub url: String,
}

/// open_url.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenUrl;

const URL_SCHEMES: &[&str] = &["http", "https", "mailto"];

impl Tool for OpenUrl {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<OpenUrlParams, Opened>(
            "open_url",
            "Open a web address (http, https or mailto) in the user's default browser or \
             mail program. The user is asked every time.",
            LAUNCHES,
            10_000,
        )
    }

    fn prepare(&self, params: Map, env: &ToolEnv) -> Result<Prepared> {
        let p: OpenUrlParams = parse_params(params)?;
        let url = url::Url::parse(&p.url).map_err(|e| {
            ToolError::InvalidParameters(format!("url: '{}' is not a URL: {e}", p.url))
        })?;
        if !URL_SCHEMES.contains(&url.scheme()) {
            return Err(ToolError::InvalidParameters(format!(
                "url: the scheme '{}' is not allowed; use http, https or mailto",
                url.scheme()
            )));
        }
        // The same rule as a link the user clicks: no mail link that attaches a file.
        outpost_policy::check_link(url.as_str())
            .map_err(|why| ToolError::InvalidParameters(format!("url: {why}")))?;
        let launcher = env.launcher.clone();
        let target = url.to_string();
        Ok(Prepared {
            access: Access {
                summary: format!("Open {target} in your default application"),
                ..Access::default()
            },
            job: Box::new(move |cx| {
                cx.check()?;
                launcher
                    .open(OsStr::new(&target))
                    .map_err(|e| ToolError::exec(format!("Cannot open {target}: {e}")))?;
                to_map(&Opened { opened: target })
            }),
        })
    }
}
