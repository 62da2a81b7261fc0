//! Turns a [`Reach`] into what the child applies to itself between fork and exec: a
//! Landlock ruleset (its file descriptor, built here in the parent with every path opened)
//! and a seccomp program, so the child only makes three system calls (`prctl`,
//! `landlock_restrict_self`, `seccomp`), allocating nothing.
//!
//! Landlock rules: read (and run) below each read grant, everything below each read-write
//! grant, nothing elsewhere; TCP bind and connect handled with no port allowed when the
//! network is off (ABI 4+); signals and abstract Unix sockets scoped to the sandbox
//! (ABI 6+). Best effort on older kernels: what they lack is told in [`Reach::limits`].
//!
//! The seccomp program answers `EPERM` to: `socket` of any family but `AF_INET`,
//! `AF_INET6` (only with the network on) and `AF_NETLINK` (so no Unix-domain socket: the
//! session bus, an SSH agent, the Docker daemon); `setsid` and `setpgid` (a server stays in
//! its process group, which Outpost kills as a whole); and the `io_uring` calls (whose
//! operations would bypass the filter). `socketpair` stays allowed (runtimes use it for
//! pipes to their own children). On x86-64 the same calls through the x32 ABI are refused
//! too, and a program of another architecture is killed (the filter checks it).

use std::collections::BTreeMap;
use std::path::PathBuf;

use landlock::{
    ABI, Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::{Access, GrantKind, Reach};

/// The newest Landlock ABI whose rights Outpost asks for (tested on it); older kernels
/// enforce what they know.
const ABI_USED: ABI = ABI::V7;

/// The Landlock level whose features work on this kernel (see [`super::Support`]), probed
/// by creating rulesets that require them.
pub(crate) fn probe_landlock() -> u8 {
    let works = |abi: ABI, net: bool, scope: bool| -> bool {
        let ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        let ruleset = match ruleset.handle_access(AccessFs::from_all(abi)) {
            Ok(r) => r,
            Err(_) => return false,
        };
        let ruleset = if net {
            match ruleset.handle_access(AccessNet::from_all(abi)) {
                Ok(r) => r,
                Err(_) => return false,
            }
        } else {
            ruleset
        };
        let ruleset = if scope {
            match ruleset.scope(Scope::from_all(abi)) {
                Ok(r) => r,
                Err(_) => return false,
            }
        } else {
            ruleset
        };
        ruleset.create().is_ok()
    };
    let levels = [
        (6, ABI::V6, true, true),
        (5, ABI::V5, true, false),
        (4, ABI::V4, true, false),
        (3, ABI::V3, false, false),
        (2, ABI::V2, false, false),
        (1, ABI::V1, false, false),
    ];
    levels
        .iter()
        .find(|(_, abi, net, scope)| works(*abi, *net, *scope))
        .map_or(0, |(level, ..)| *level)
}

/// The seccomp architecture of this build, if the filter supports it.
pub(crate) fn seccomp_arch() -> Option<TargetArch> {
    TargetArch::try_from(std::env::consts::ARCH).ok()
}

/// What the child applies to itself, and the server's private temporary folder (removed
/// when this is dropped: keep it while the server runs).
pub(crate) struct Prepared {
    ruleset: RulesetCreated,
    filter: Option<BpfProgram>,
    /// The private temporary folder.
    pub temp: tempfile::TempDir,
    /// Grants whose path does not exist (nothing to allow there).
    pub missing: Vec<PathBuf>,
}

/// Builds the ruleset and filter for `reach`, and the private temporary folder.
pub(crate) fn prepare(server: &str, reach: &Reach, seccomp: bool) -> Result<Prepared, String> {
    let temp = tempfile::Builder::new()
        .prefix(&format!("outpost-mcp-{server}-"))
        .tempdir()
        .map_err(|e| format!("cannot make its private temporary folder: {e}"))?;
    let err = |e: landlock::RulesetError| format!("cannot build its Landlock ruleset: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_USED))
        .map_err(err)?;
    if !reach.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI_USED))
            .map_err(err)?;
    }
    let mut created = ruleset
        .scope(Scope::from_all(ABI_USED))
        .map_err(err)?
        .create()
        .map_err(err)?;
    let read = AccessFs::from_read(ABI_USED);
    let all = AccessFs::from_all(ABI_USED);
    let mut missing = Vec::new();
    let grants = reach
        .grants
        .iter()
        .map(|g| (g.path.clone(), g.access, g.kind))
        .chain(std::iter::once((
            temp.path().to_path_buf(),
            Access::ReadWrite,
            GrantKind::Temp,
        )));
    for (path, access, kind) in grants {
        if kind == GrantKind::Launcher && !path.exists() {
            // A launcher makes its cache on first use; it cannot make it inside the
            // sandbox (its parent, the home folder, is not writable), so it is made here.
            let _ = std::fs::create_dir_all(&path);
        }
        let Ok(meta) = std::fs::metadata(&path) else {
            missing.push(path);
            continue;
        };
        let Ok(fd) = PathFd::new(&path) else {
            missing.push(path);
            continue;
        };
        let mut rights: BitFlags<AccessFs> = match access {
            Access::Read => read,
            Access::ReadWrite => all,
        };
        if !meta.is_dir() {
            rights &= AccessFs::from_file(ABI_USED);
        }
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| format!("cannot allow {}: {e}", path.display()))?;
    }
    let filter = if seccomp {
        Some(filter(reach.network)?)
    } else {
        None
    };
    Ok(Prepared {
        ruleset: created,
        filter,
        temp,
        missing,
    })
}

/// The seccomp program (the module's doc).
fn filter(network: bool) -> Result<BpfProgram, String> {
    let arch = seccomp_arch().ok_or_else(|| {
        format!(
            "no seccomp filter for this architecture ({})",
            std::env::consts::ARCH
        )
    })?;
    let err = |e: seccompiler::BackendError| format!("cannot build its seccomp filter: {e}");
    let families: &[i32] = if network {
        &[libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK]
    } else {
        &[libc::AF_NETLINK]
    };
    let other_family = families
        .iter()
        .map(|af| {
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                u64::from(af.unsigned_abs()),
            )
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let mut calls: Vec<(i64, Vec<SeccompRule>)> = vec![
        (
            libc::SYS_socket,
            vec![SeccompRule::new(other_family).map_err(err)?],
        ),
        (libc::SYS_setsid, Vec::new()),
        (libc::SYS_setpgid, Vec::new()),
        (libc::SYS_io_uring_setup, Vec::new()),
        (libc::SYS_io_uring_enter, Vec::new()),
        (libc::SYS_io_uring_register, Vec::new()),
    ];
    if arch == TargetArch::x86_64 {
        // The same calls through the x32 ABI (numbers with bit 30 set).
        const X32: i64 = 0x4000_0000;
        let x32: Vec<(i64, Vec<SeccompRule>)> = calls
            .iter()
            .map(|(nr, rules)| (nr | X32, rules.clone()))
            .collect();
        calls.extend(x32);
    }
    let rules: BTreeMap<i64, Vec<SeccompRule>> = calls.into_iter().collect();
    let program = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )
    .map_err(err)?;
    BpfProgram::try_from(program).map_err(err)
}

impl Prepared {
    /// Has the child restrict itself, between fork and exec, after whatever `cmd` already
    /// does there. Returns the private temporary folder (keep it while the server runs).
    pub(crate) fn install(self, cmd: &mut tokio::process::Command) -> tempfile::TempDir {
        let mut ruleset = Some(self.ruleset);
        let filter = self.filter;
        // SAFETY: the closure runs in the child between fork and exec. It makes only the
        // system calls `prctl`, `landlock_restrict_self`, `close` and `seccomp`, which are
        // async-signal-safe, on a ruleset and a program built before the fork; it
        // allocates nothing on success and takes no lock.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || {
                if let Some(r) = ruleset.take() {
                    match r.restrict_self() {
                        Ok(s) if s.ruleset != RulesetStatus::NotEnforced => {}
                        Ok(_) => return Err(std::io::Error::from_raw_os_error(libc::ENOSYS)),
                        Err(_) => return Err(std::io::Error::last_os_error()),
                    }
                }
                if let Some(f) = &filter {
                    seccompiler::apply_filter(f).map_err(|_| std::io::Error::last_os_error())?;
                }
                Ok(())
            });
        }
        self.temp
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_filter_builds_for_both_network_settings() {
        if seccomp_arch().is_none() {
            return;
        }
        let off = filter(false).unwrap();
        let on = filter(true).unwrap();
        assert!(on.len() > off.len(), "{} {}", on.len(), off.len());
    }
}
