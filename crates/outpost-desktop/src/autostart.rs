//! Start at login, by the XDG autostart convention: a desktop entry in
//! `$XDG_CONFIG_HOME/autostart/` (`~/.config/autostart/`) that every freedesktop session
//! (GNOME, KDE, Xfce, …) starts at login. Off by default; the file exists only while the
//! setting is on, and says which program it starts, so removing it by hand is the same
//! as switching the setting off.

use std::path::{Path, PathBuf};

use crate::error::{DesktopError, Result};

/// The entry's file name.
pub const FILE_NAME: &str = "dev.outpost.app.desktop";

/// Where the entry lives: `$XDG_CONFIG_HOME/autostart/`, else `~/.config/autostart/`.
pub fn entry_path() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("autostart").join(FILE_NAME))
}

/// The entry for `program` (the app's executable). The app starts in the tray when "keep
/// running in the tray" is on (`--background`), else with its window.
pub fn entry(program: &Path) -> String {
    format!(
        "[Desktop Entry]\n\
         Type=Application\n\
         Name=Outpost\n\
         Comment=A desktop client for AI assistants that use local tools\n\
         Exec={} --background\n\
         Icon=outpost-app\n\
         Terminal=false\n\
         X-GNOME-Autostart-enabled=true\n\
         X-Outpost-Written-By=Settings → Desktop (switch it off there, or delete this file)\n",
        quote_exec(program)
    )
}

/// A path as one argument of a desktop entry's `Exec` (the spec's quoting: double
/// quotes, with `"`, `` ` ``, `$` and `\` escaped).
fn quote_exec(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        return s;
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        if matches!(c, '"' | '`' | '$' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Whether the entry is there (the setting's real state).
pub fn enabled(path: &Path) -> bool {
    path.is_file()
}

/// Writes (`on`) or removes the entry at `path` for `program`.
pub fn set(path: &Path, program: &Path, on: bool) -> Result<()> {
    let io = |action: &'static str, source: std::io::Error| DesktopError::Io {
        action,
        path: path.display().to_string(),
        source,
    };
    if on {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io("create the folder of", e))?;
        }
        std::fs::write(path, entry(program)).map_err(|e| io("write", e))
    } else {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("remove", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_entry_is_written_and_removed_and_quotes_its_program() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("autostart").join(FILE_NAME);
        assert!(!enabled(&path));
        set(&path, Path::new("/opt/Out post/outpost-app"), true).unwrap();
        assert!(enabled(&path));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("[Desktop Entry]\nType=Application\n"),
            "{text}"
        );
        assert!(
            text.contains("Exec=\"/opt/Out post/outpost-app\" --background\n"),
            "{text}"
        );
        set(&path, Path::new("/usr/bin/outpost-app"), true).unwrap();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("Exec=/usr/bin/outpost-app --background\n")
        );
        set(&path, Path::new("/usr/bin/outpost-app"), false).unwrap();
        assert!(!enabled(&path));
        set(&path, Path::new("/usr/bin/outpost-app"), false).unwrap();
        assert_eq!(quote_exec(Path::new("/a/$b\"c")), "\"/a/\\$b\\\"c\"");
    }
}
