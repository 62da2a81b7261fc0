//! `outpost policy trust [FILE]`: the user confirms a policy file that was changed outside
//! Outpost to allow more than they had confirmed, so it takes effect (in this and every
//! running Outpost that follows the file). Until then the last confirmed policy stays in
//! force (outpost-policy's file gate).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::Failure;

#[derive(Debug, Args)]
pub(crate) struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
    /// The data directory holding the record of confirmed settings (default:
    /// $OUTPOST_DATA_DIR, else the platform's data dir). Use the same one as `outpost connect`.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Confirm the policy file as it is now (default: policy.toml in the config directory).
    Trust {
        /// The policy file (as given to `outpost connect --policy`).
        file: Option<PathBuf>,
    },
}

#[allow(clippy::print_stderr)]
fn note(msg: &str) {
    eprintln!("{msg}");
}

/// Runs `outpost policy ...`.
pub(crate) fn run(args: PolicyArgs) -> Result<(), Failure> {
    let data_dir = outpost_store::data_dir(args.data_dir.as_deref())
        .map_err(|e| Failure::Invalid(format!("data directory: {e}")))?;
    match args.command {
        PolicyCommand::Trust { file } => {
            let file = match file {
                Some(f) => f,
                None => outpost_mcp::config::config_dir_from_env()
                    .map_err(|e| Failure::Invalid(e.to_string()))?
                    .join("policy.toml"),
            };
            let waiting = outpost_core::confirm_policy(&file, &data_dir)
                .map_err(|e| Failure::Invalid(e.to_string()))?;
            match waiting {
                Some(what) => note(&format!("confirmed; now in force. It was: {what}")),
                None => note(&format!(
                    "{} is confirmed as it is (nothing was waiting)",
                    file.display()
                )),
            }
            Ok(())
        }
    }
}
