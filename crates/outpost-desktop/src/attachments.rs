//! Files the user gives the assistant: dropped on the window or picked (a path), or pasted
//! (bytes and a name). Each is checked before anything is read for sending: the policy's
//! rules no answer lifts (the built-in secrets list, denied folders) on its real path, or
//! the list's file-name rules when there is no path; then the size limit
//! ([`MAX_ATTACHMENT_BYTES`]). What passes is *staged*: shown to the user exactly as it
//! will be sent (name, type, size, SHA-256, the image itself) and sent with the next
//! message, or removed. The session sends it (outpost-core: an Attachment message or a
//! LiveKit byte stream); the history keeps what describes it, and the bytes of small
//! images.

use std::io::Read as _;
use std::path::Path;
use std::sync::Mutex;

use outpost_protocol::{MAX_ATTACHMENT_BYTES, MAX_FILE_NAME_BYTES, sha256_hex};
use outpost_store::MAX_ATTACHMENT_DATA;

use crate::contract::AttachmentView;
use crate::error::{DesktopError, Result};

/// A file ready to go with the next message.
#[derive(Debug, Clone)]
pub struct Staged {
    /// Its id in the UI (not sent: the session gives the attachment its own).
    pub id: String,
    /// The file's name.
    pub name: String,
    /// Its media type.
    pub mime_type: String,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
}

impl Staged {
    fn new(name: String, mime_type: String, bytes: Vec<u8>) -> Self {
        Self {
            id: nanoid::nanoid!(),
            sha256: sha256_hex(&bytes),
            name,
            mime_type,
            bytes,
        }
    }

    /// How the UI shows it: everything that is sent, and the image itself.
    pub fn view(&self) -> AttachmentView {
        AttachmentView {
            id: self.id.clone(),
            name: self.name.clone(),
            mime_type: self.mime_type.clone(),
            size: self.bytes.len() as u64,
            sha256: self.sha256.clone(),
            image: image_url(&self.mime_type, &self.bytes),
        }
    }
}

/// At most this many files wait for the next message.
pub const MAX_STAGED: usize = 10;

/// The files waiting for the next message, in the order they came.
#[derive(Debug, Default)]
pub struct StagedFiles {
    items: Mutex<Vec<Staged>>,
}

impl StagedFiles {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Staged>> {
        outpost_sync::lock(&self.items)
    }

    /// Adds one; refused when [`MAX_STAGED`] wait already.
    pub fn push(&self, s: Staged) -> Result<Vec<AttachmentView>> {
        let mut items = self.lock();
        if items.len() >= MAX_STAGED {
            return Err(DesktopError::Refused(format!(
                "At most {MAX_STAGED} files can go with one message; send these first."
            )));
        }
        items.push(s);
        Ok(items.iter().map(Staged::view).collect())
    }

    /// Removes one by id; unknown ids change nothing.
    pub fn remove(&self, id: &str) -> Vec<AttachmentView> {
        let mut items = self.lock();
        items.retain(|s| s.id != id);
        items.iter().map(Staged::view).collect()
    }

    /// What waits now.
    pub fn views(&self) -> Vec<AttachmentView> {
        self.lock().iter().map(Staged::view).collect()
    }

    /// Whether anything waits.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Takes everything (for sending).
    pub fn take(&self) -> Vec<Staged> {
        std::mem::take(&mut *self.lock())
    }

    /// Puts files back in front (a send that failed).
    pub fn restore(&self, mut files: Vec<Staged>) {
        let mut items = self.lock();
        files.append(&mut items);
        *items = files;
    }
}

/// A `data:` URL of an image (what the UI shows), `None` for other files.
pub fn image_url(mime_type: &str, bytes: &[u8]) -> Option<String> {
    use base64::Engine as _;
    mime_type.starts_with("image/").then(|| {
        format!(
            "data:{mime_type};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    })
}

/// The image the transcript keeps: only small ones, as the history does.
pub fn kept_image_url(mime_type: &str, bytes: &[u8]) -> Option<String> {
    (bytes.len() <= MAX_ATTACHMENT_DATA)
        .then(|| image_url(mime_type, bytes))
        .flatten()
}

fn too_large(name: &str, size: u64) -> DesktopError {
    DesktopError::Refused(format!(
        "{name} is {}; files up to {} can be given to the assistant.",
        human_size(size),
        human_size(MAX_ATTACHMENT_BYTES as u64)
    ))
}

/// `1.5 MB`, `820 KB`, `12 bytes`.
pub fn human_size(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f >= K * K {
        format!("{:.1} MB", f / (K * K))
    } else if f >= K {
        format!("{:.0} KB", f / K)
    } else {
        format!("{n} bytes")
    }
}

/// Reads the file at `path` for sending, once `refused` (the policy's verdict on it) said
/// nothing against it: a regular file (not a folder, device or FIFO), at most
/// [`MAX_ATTACHMENT_BYTES`]. It is opened at its real path and must still be the file that
/// path named when it was checked (same device and inode), so a swap in between is
/// refused rather than sent.
pub fn read_path(path: &Path, refused: impl FnOnce(&Path) -> Option<String>) -> Result<Staged> {
    let shown = path.display().to_string();
    let io = |action: &'static str, source: std::io::Error| DesktopError::Io {
        action,
        path: shown.clone(),
        source,
    };
    let real = std::fs::canonicalize(path).map_err(|e| io("find", e))?;
    let name = file_name(
        &real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    if let Some(why) = refused(&real) {
        return Err(DesktopError::Refused(format!(
            "Outpost will not send {name}: {why}."
        )));
    }
    let before = std::fs::symlink_metadata(&real).map_err(|e| io("read", e))?;
    if !before.is_file() {
        return Err(DesktopError::Refused(format!(
            "{name} is not a regular file (a folder, a device or a pipe cannot be sent)."
        )));
    }
    if before.len() > MAX_ATTACHMENT_BYTES as u64 {
        return Err(too_large(&name, before.len()));
    }
    let file = std::fs::File::open(&real).map_err(|e| io("open", e))?;
    let opened = file.metadata().map_err(|e| io("read", e))?;
    if !same_file(&before, &opened) {
        return Err(DesktopError::Refused(format!(
            "{name} changed while Outpost checked it; nothing was read."
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(opened.len()).unwrap_or(0));
    file.take(MAX_ATTACHMENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io("read", e))?;
    if bytes.len() > MAX_ATTACHMENT_BYTES {
        return Err(too_large(&name, bytes.len() as u64));
    }
    let mime = mime_type(&name, &bytes, None);
    Ok(Staged::new(name, mime, bytes))
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    a.dev() == b.dev() && a.ino() == b.ino() && b.is_file()
}

#[cfg(not(unix))]
fn same_file(_a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    b.is_file()
}

/// A pasted file (bytes and the name the page gave), once `refused` (the secrets list's
/// name rules) said nothing against its name; `data` is standard base64.
pub fn from_paste(
    name: &str,
    mime_hint: Option<&str>,
    data: &str,
    refused: impl FnOnce(&str) -> Option<String>,
) -> Result<Staged> {
    use base64::Engine as _;
    let name = file_name(name);
    if let Some(why) = refused(&name) {
        return Err(DesktopError::Refused(format!(
            "Outpost will not send {name}: {why}."
        )));
    }
    // Base64 is 4/3 the size: refuse before decoding what is over the limit anyway.
    if data.len() / 4 * 3 > MAX_ATTACHMENT_BYTES + 3 {
        return Err(too_large(&name, (data.len() / 4 * 3) as u64));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| DesktopError::invalid("data", format!("not standard base64: {e}")))?;
    if bytes.len() > MAX_ATTACHMENT_BYTES {
        return Err(too_large(&name, bytes.len() as u64));
    }
    let mime = mime_type(&name, &bytes, mime_hint);
    Ok(Staged::new(name, mime, bytes))
}

/// A name the protocol accepts: the last component only, no control characters, at most
/// [`MAX_FILE_NAME_BYTES`] bytes (cut at a character boundary), `file` when nothing is
/// left.
pub fn file_name(raw: &str) -> String {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let mut name: String = last.chars().filter(|c| !c.is_control()).collect();
    if name.len() > MAX_FILE_NAME_BYTES {
        let mut end = MAX_FILE_NAME_BYTES;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    let name = name.trim().to_owned();
    if name.is_empty() || name == "." || name == ".." {
        "file".to_owned()
    } else {
        name
    }
}

/// The media type: an image recognised by its first bytes (PNG, JPEG, GIF, WebP) whatever
/// its name says; else the page's hint when it is a plain `type/subtype`; else by the
/// name's extension; else `application/octet-stream`.
pub fn mime_type(name: &str, bytes: &[u8], hint: Option<&str>) -> String {
    if let Some(m) = sniff_image(bytes) {
        return m.to_owned();
    }
    let plain = |m: &str| {
        m.len() <= 100
            && m.split_once('/').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && m.bytes()
                        .all(|c| c.is_ascii_alphanumeric() || b"/.+-_".contains(&c))
            })
    };
    // An image type the bytes do not bear out is not believed.
    if let Some(h) = hint.filter(|h| plain(h) && !h.starts_with("image/")) {
        return h.to_owned();
    }
    let ext = Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let by_ext = match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "json" => "application/json",
        "pdf" => "application/pdf",
        "html" | "htm" => "text/html",
        "xml" => "application/xml",
        "toml" => "application/toml",
        "yaml" | "yml" => "application/yaml",
        "rs" | "py" | "js" | "ts" | "sh" | "c" | "h" | "go" | "java" => "text/plain",
        _ => "application/octet-stream",
    };
    by_ext.to_owned()
}

fn sniff_image(b: &[u8]) -> Option<&'static str> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn a_picked_file_is_read_whole_with_its_hash_and_type() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("shot.bin");
        std::fs::write(&p, PNG).unwrap();
        let s = read_path(&p, |_| None).unwrap();
        assert_eq!(s.name, "shot.bin");
        assert_eq!(s.mime_type, "image/png", "the bytes say what it is");
        assert_eq!(s.bytes, PNG);
        assert_eq!(s.sha256, sha256_hex(PNG));
        let v = s.view();
        assert!(
            v.image
                .unwrap()
                .starts_with("data:image/png;base64,iVBORw0KGgo")
        );
    }

    #[test]
    fn the_policy_folders_devices_and_the_size_limit_refuse_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("id_rsa");
        std::fs::write(&key, "secret").unwrap();
        let err = read_path(&key, |p| {
            assert!(p.is_absolute(), "judged on the real path");
            Some("files named like 'id_rsa' are on the built-in secrets list".into())
        })
        .unwrap_err();
        assert_eq!(err.code(), "attachment_refused");
        assert_eq!(
            err.to_string(),
            "Outpost will not send id_rsa: files named like 'id_rsa' are on the built-in \
             secrets list."
        );
        let err = read_path(dir.path(), |_| None).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let err = read_path(Path::new("/dev/null"), |_| None).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let big = dir.path().join("big.log");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_ATTACHMENT_BYTES as u64 + 1).unwrap();
        let err = read_path(&big, |_| None).unwrap_err();
        assert!(err.to_string().contains("files up to 8.0 MB"), "{err}");
        let err = read_path(&dir.path().join("missing.txt"), |_| None).unwrap_err();
        assert!(err.to_string().contains("missing.txt"), "{err}");
    }

    #[test]
    fn a_pasted_file_is_judged_by_its_name_and_typed_by_its_bytes() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
        let s = from_paste("../../clip.png", Some("image/png"), &b64, |_| None).unwrap();
        assert_eq!(s.name, "clip.png", "no folders");
        assert_eq!(s.mime_type, "image/png");
        // A file type the bytes do not bear out is not believed.
        let s = from_paste("fake.png", Some("image/png"), "aGk=", |_| None).unwrap();
        assert_eq!(s.mime_type, "application/octet-stream");
        let err = from_paste(".env", None, "aGk=", |n| {
            (n == ".env").then(|| "files named like '.env' are on the built-in secrets list".into())
        })
        .unwrap_err();
        assert!(
            err.to_string().starts_with("Outpost will not send .env"),
            "{err}"
        );
        assert_eq!(
            from_paste("x", None, "not base64!", |_| None)
                .unwrap_err()
                .code(),
            "invalid_argument"
        );
        assert_eq!(file_name("a\u{7}b\\c/d.txt"), "d.txt");
        assert_eq!(file_name(".."), "file");
        assert_eq!(file_name(&"é".repeat(200)).len(), 254);
    }

    #[test]
    fn staged_files_are_bounded_and_restored_in_order() {
        let staged = StagedFiles::default();
        for i in 0..MAX_STAGED {
            staged
                .push(Staged::new(
                    format!("{i}.txt"),
                    "text/plain".into(),
                    vec![1],
                ))
                .unwrap();
        }
        let err = staged
            .push(Staged::new("x".into(), "text/plain".into(), vec![]))
            .unwrap_err();
        assert_eq!(err.code(), "attachment_refused");
        let taken = staged.take();
        assert!(staged.is_empty());
        staged
            .push(Staged::new("new.txt".into(), "text/plain".into(), vec![]))
            .unwrap();
        staged.restore(taken);
        let names: Vec<String> = staged.views().into_iter().map(|v| v.name).collect();
        assert_eq!(names.first().map(String::as_str), Some("0.txt"));
        assert_eq!(names.last().map(String::as_str), Some("new.txt"));
        let id = staged.views()[0].id.clone();
        assert_eq!(staged.remove(&id).len(), MAX_STAGED);
    }
}
