//! What a server may touch, for the pane: its sandbox as it runs or would start, and a
//! draft's sandbox settings.

use super::*;

/// What `name` may touch: as it runs in `host`'s session, else as it would start under
/// `opts` now. `None` for an HTTP server.
pub fn sandbox_of(
    name: &str,
    cfg: &ServerConfig,
    host: Option<&McpHost>,
    opts: &outpost_mcp::SandboxOptions,
) -> Option<McpSandboxInfo> {
    if !matches!(cfg.transport, Transport::Stdio { .. }) {
        return None;
    }
    let live = host
        .and_then(|h| h.snapshot().get(name).cloned())
        .filter(|st| matches!(st.status, ServerStatus::Running | ServerStatus::Starting))
        .and_then(|st| st.reach);
    let reach = live.or_else(|| cfg.planned_reach(name, opts).map(Arc::new))?;
    Some(sandbox_info(&reach))
}

/// The contract's form of a [`Reach`](outpost_mcp::Reach): the system's own places are
/// summed up, not listed.
pub fn sandbox_info(r: &outpost_mcp::Reach) -> McpSandboxInfo {
    use outpost_mcp::sandbox::{Access, GrantKind, ReachState};
    let (state, why) = match &r.state {
        ReachState::Sandboxed => (McpSandboxState::Sandboxed, None),
        ReachState::Unsandboxed { why } => (McpSandboxState::Unsandboxed, Some(why.clone())),
        ReachState::Refused { why } => (McpSandboxState::Refused, Some(why.clone())),
    };
    let grants = r
        .own_grants()
        .filter_map(|g| {
            let kind = match g.kind {
                GrantKind::Program => McpGrantKind::Program,
                GrantKind::Launcher => McpGrantKind::Launcher,
                GrantKind::WorkingFolder => McpGrantKind::WorkingFolder,
                GrantKind::AllowedFolder => McpGrantKind::AllowedFolder,
                GrantKind::Extra => McpGrantKind::Extra,
                _ => return None,
            };
            Some(McpSandboxGrant {
                path: g.path.display().to_string(),
                access: match g.access {
                    Access::Read => McpAccess::Read,
                    Access::ReadWrite => McpAccess::ReadWrite,
                },
                kind,
                why: g.why.clone(),
            })
        })
        .collect();
    McpSandboxInfo {
        state,
        summary: r.summary(),
        why,
        grants,
        network: r.network,
        network_why: r.network_why.clone(),
        left_out: r.left_out.clone(),
        limits: r.limits.clone(),
    }
}

/// A draft's sandbox settings, checked.
pub(super) fn draft_sandbox(d: &McpServerDraft) -> Result<outpost_mcp::Sandbox> {
    use outpost_mcp::sandbox::{FolderAccess, SandboxMode};
    let sandbox = outpost_mcp::Sandbox {
        mode: match d.sandbox {
            McpSandboxMode::On => SandboxMode::On,
            McpSandboxMode::IfAvailable => SandboxMode::IfAvailable,
            McpSandboxMode::Off => SandboxMode::Off,
        },
        network: match d.network {
            McpNetwork::Auto => None,
            McpNetwork::On => Some(true),
            McpNetwork::Off => Some(false),
        },
        folders: match d.folders {
            McpFolderAccess::ReadWrite => FolderAccess::ReadWrite,
            McpFolderAccess::Read => FolderAccess::Read,
            McpFolderAccess::None => FolderAccess::None,
        },
        read: d.read.iter().map(|p| PathBuf::from(p.trim())).collect(),
        write: d.write.iter().map(|p| PathBuf::from(p.trim())).collect(),
    };
    sandbox
        .check()
        .map_err(|e| DesktopError::invalid("sandbox", e))?;
    Ok(sandbox)
}

/// A server's sandbox settings as the draft carries them (defaults for HTTP).
pub(super) fn sandbox_fields(d: &mut McpServerDraft, sandbox: Option<&outpost_mcp::Sandbox>) {
    use outpost_mcp::sandbox::{FolderAccess, SandboxMode};
    let Some(s) = sandbox else {
        return;
    };
    d.sandbox = match s.mode {
        SandboxMode::On => McpSandboxMode::On,
        SandboxMode::IfAvailable => McpSandboxMode::IfAvailable,
        SandboxMode::Off => McpSandboxMode::Off,
    };
    d.network = match s.network {
        None => McpNetwork::Auto,
        Some(true) => McpNetwork::On,
        Some(false) => McpNetwork::Off,
    };
    d.folders = match s.folders {
        FolderAccess::ReadWrite => McpFolderAccess::ReadWrite,
        FolderAccess::Read => McpFolderAccess::Read,
        FolderAccess::None => McpFolderAccess::None,
    };
    d.read = s.read.iter().map(|p| p.display().to_string()).collect();
    d.write = s.write.iter().map(|p| p.display().to_string()).collect();
}
