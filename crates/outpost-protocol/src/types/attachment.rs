//! Type 13: a file or an image the user gives the assistant, sent only to a server whose
//! welcome lists the `attachments` capability.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::FieldError;
use crate::limits::MAX_ATTACHMENT_BYTES;
use crate::validate::{self, Validate};

/// The capability (ServerWelcome `capabilities`) of a server that reads [`Attachment`]s.
pub const ATTACHMENTS_CAPABILITY: &str = "attachments";

/// Type 13: one file the user attached to a message. Client → server, sent right before
/// the UserMessage it belongs to, and only to a server that announced
/// [`ATTACHMENTS_CAPABILITY`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    /// NanoID of this attachment.
    pub id: String,
    /// The UserMessage it belongs to (sent after it).
    pub message_id: String,
    /// The file's name, without any folder.
    pub name: String,
    /// Its media type, e.g. `image/png`.
    pub mime_type: String,
    /// Its length in bytes.
    pub size: u64,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
    /// The bytes, standard base64 with padding.
    pub data: String,
}

impl Attachment {
    /// An attachment of `bytes`, its size and hash computed here.
    pub fn new(
        id: impl Into<String>,
        message_id: impl Into<String>,
        name: impl Into<String>,
        mime_type: impl Into<String>,
        bytes: &[u8],
    ) -> Self {
        Self {
            id: id.into(),
            message_id: message_id.into(),
            name: name.into(),
            mime_type: mime_type.into(),
            size: bytes.len() as u64,
            sha256: sha256_hex(bytes),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// The bytes (`data` decoded). Checked by [`Validate`]: a decoded message decodes.
    pub fn bytes(&self) -> Result<Vec<u8>, FieldError> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .map_err(|e| FieldError::new("data", format!("is not standard base64: {e}")))
    }
}

/// SHA-256 of `bytes` as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Validate for Attachment {
    fn check(&self, _values_scanned: bool) -> Result<(), FieldError> {
        validate::id("id", &self.id)?;
        validate::id("messageId", &self.message_id)?;
        validate::file_name("name", &self.name)?;
        validate::name("mimeType", &self.mime_type)?;
        if self.size > MAX_ATTACHMENT_BYTES as u64 {
            return Err(FieldError::new(
                "size",
                format!(
                    "is {} bytes; the limit is {MAX_ATTACHMENT_BYTES}",
                    self.size
                ),
            ));
        }
        let hex = self.sha256.len() == 64
            && self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex {
            return Err(FieldError::new(
                "sha256",
                "must be 64 lower-case hexadecimal digits",
            ));
        }
        // Cheap before decoding: base64 of `size` bytes has exactly this length.
        let expected = (self.size as usize).div_ceil(3) * 4;
        if self.data.len() != expected {
            return Err(FieldError::new(
                "data",
                format!(
                    "is {} characters of base64; {} bytes take {expected}",
                    self.data.len(),
                    self.size
                ),
            ));
        }
        let bytes = self.bytes()?;
        if bytes.len() as u64 != self.size {
            return Err(FieldError::new(
                "size",
                format!("says {} bytes; data holds {}", self.size, bytes.len()),
            ));
        }
        if sha256_hex(&bytes) != self.sha256 {
            return Err(FieldError::new("sha256", "does not match the data"));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn an_attachment_checks_its_size_and_hash_against_its_bytes() {
        let a = Attachment::new("a1", "m1", "dot.png", "image/png", b"\x89PNG\r\n");
        assert!(a.validate().is_ok());
        assert_eq!(a.bytes().unwrap(), b"\x89PNG\r\n");
        let mut bad = a.clone();
        bad.sha256 = sha256_hex(b"other");
        assert_eq!(bad.validate().unwrap_err().field, "sha256");
        let mut bad = a.clone();
        bad.size += 1;
        assert_eq!(bad.validate().unwrap_err().field, "data");
        let mut bad = a.clone();
        bad.name = "../etc/passwd".into();
        assert_eq!(bad.validate().unwrap_err().field, "name");
        let mut bad = a;
        bad.data = "!!!!!!!!".into();
        assert_eq!(bad.validate().unwrap_err().field, "data");
    }
}
