//! Issue 30, finding 14: the profile is the user's alone. Under umask 022 (the usual one,
//! set here for this process) the data folder was created 0755 and `outpost.sqlite3`
//! 0644, readable by every account on the machine. Now the folders Outpost makes are 0700
//! and its files 0600 (the database with its -wal and -shm, the policy, the app's
//! settings), and those an older version made readable are tightened when opened.
//! Its own test binary: the umask is the process's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use outpost_core::{Core, PolicySource, ToolsConfig};
use outpost_desktop::paths::Paths;
use outpost_desktop::settings::AppConfig;
use outpost_store::{ConversationId, NewConversation};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

fn open(paths: &Paths) -> Core {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let core = Core::open(
        Some(paths.data_dir.clone()),
        ToolsConfig {
            policy: PolicySource::File(paths.policy_file()),
            home: paths.config_dir.clone(),
            protected: Vec::new(),
        },
    )
    .unwrap();
    // A write, so SQLite makes its -wal and -shm files.
    core.store()
        .begin_conversation(NewConversation::new(
            ConversationId::from(format!("c{n}").as_str()),
            1,
        ))
        .wait()
        .unwrap();
    core
}

#[test]
fn profile_folders_are_0700_and_files_0600_under_umask_022() {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    let root = tempfile::tempdir().unwrap();
    let paths = Paths {
        config_dir: root.path().join("config/outpost"),
        data_dir: root.path().join("data/outpost"),
    };
    paths.create_private_dirs().unwrap();
    let core = open(&paths);
    AppConfig::default().save(&paths.settings_file()).unwrap();
    let db = paths.data_dir.join("outpost.sqlite3");
    let mut files = vec![
        db.clone(),
        paths.data_dir.join("outpost.sqlite3-wal"),
        paths.data_dir.join("outpost.sqlite3-shm"),
        paths.policy_file(),
        paths.settings_file(),
    ];
    for dir in [&paths.config_dir, &paths.data_dir] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    drop(core);

    // A profile an older version left readable is tightened when it is opened again.
    let old = root.path().join("old");
    let old_paths = Paths {
        config_dir: old.join("config"),
        data_dir: old.join("data"),
    };
    std::fs::create_dir_all(&old_paths.data_dir).unwrap();
    std::fs::create_dir_all(&old_paths.config_dir).unwrap();
    drop(open(&Paths {
        config_dir: root.path().join("unused"),
        data_dir: old_paths.data_dir.clone(),
    }));
    for suffix in ["", "-wal", "-shm"] {
        let f = old_paths.data_dir.join(format!("outpost.sqlite3{suffix}"));
        if f.exists() {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    std::fs::set_permissions(&old_paths.data_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        &old_paths.config_dir,
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    old_paths.create_private_dirs().unwrap();
    drop(open(&old_paths));
    files = vec![old_paths.data_dir.join("outpost.sqlite3")];
    assert_eq!(mode(&old_paths.data_dir), 0o700);
    assert_eq!(mode(&old_paths.config_dir), 0o700);
    for f in &files {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
}
