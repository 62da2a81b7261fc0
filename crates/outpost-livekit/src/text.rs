//! Text streams read as text while they arrive (interim transcripts, chat), on top of
//! the byte chunks of [`StreamReader`].
//!
//! The official SDKs cut text streams at character boundaries, but a sender is free
//! to cut anywhere, so a character split across two chunks is held back until its
//! last byte arrives; invalid UTF-8 is an error.

use crate::error::{Error, Result};
use crate::streams::{StreamInfo, StreamKind, StreamReader};

/// A text stream being received; see [`StreamReader::into_text`].
#[derive(Debug)]
pub struct TextStreamReader {
    reader: StreamReader,
    /// Bytes of a character cut by a chunk boundary.
    carry: Vec<u8>,
    done: bool,
}

impl StreamReader {
    /// Reads this stream as text (a text stream, or a byte stream holding UTF-8).
    pub fn into_text(self) -> TextStreamReader {
        TextStreamReader {
            reader: self,
            carry: Vec::new(),
            done: false,
        }
    }

    /// Whether the header announced a text stream.
    pub fn is_text(&self) -> bool {
        self.info.kind == StreamKind::Text
    }
}

impl TextStreamReader {
    /// The header: topic, attributes, stream id, sender identity, …
    pub fn info(&self) -> &StreamInfo {
        &self.reader.info
    }

    /// The text of the next chunk(s) as soon as it arrives; `None` once the stream
    /// ended normally; an error when it was cut off (see
    /// [`StreamReader::next_chunk`]) or is not valid UTF-8.
    pub async fn next_text(&mut self) -> Option<Result<String>> {
        loop {
            if self.done {
                return None;
            }
            match self.reader.next_chunk().await {
                None => {
                    self.done = true;
                    if self.carry.is_empty() {
                        return None;
                    }
                    return Some(Err(self.invalid("the stream ends inside a character")));
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Some(Ok(chunk)) => {
                    self.carry.extend_from_slice(&chunk);
                    match decode(&mut self.carry) {
                        Ok(text) if text.is_empty() => continue,
                        Ok(text) => return Some(Ok(text)),
                        Err(why) => {
                            self.done = true;
                            return Some(Err(self.invalid(&why)));
                        }
                    }
                }
            }
        }
    }

    /// Reads the rest of the stream.
    pub async fn read_all(mut self) -> Result<String> {
        let mut out = String::new();
        while let Some(piece) = self.next_text().await {
            out.push_str(&piece?);
        }
        Ok(out)
    }

    fn invalid(&self, why: &str) -> Error {
        Error::Stream {
            stream_id: self.reader.info.id.clone(),
            reason: format!("text stream is not valid UTF-8: {why}"),
        }
    }
}

/// Takes the longest valid UTF-8 prefix out of `buf`, leaving an incomplete final
/// character (at most 3 bytes) in it. Invalid bytes are an error.
fn decode(buf: &mut Vec<u8>) -> std::result::Result<String, String> {
    let valid = match std::str::from_utf8(buf) {
        Ok(_) => buf.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(e) => return Err(e.to_string()),
    };
    let rest = buf.split_off(valid);
    let text = String::from_utf8(std::mem::replace(buf, rest)).map_err(|e| e.to_string())?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn characters_cut_by_chunks_are_held_back() {
        let bytes = "a😀é".as_bytes().to_vec();
        let mut buf = bytes[..3].to_vec(); // "a" and half the emoji
        assert_eq!(decode(&mut buf).unwrap(), "a");
        assert_eq!(buf.len(), 2);
        buf.extend_from_slice(&bytes[3..6]); // the rest of the emoji and half of é
        assert_eq!(decode(&mut buf).unwrap(), "😀");
        buf.extend_from_slice(&bytes[6..]);
        assert_eq!(decode(&mut buf).unwrap(), "é");
        assert!(buf.is_empty());
        let mut bad = vec![b'a', 0xff, b'b'];
        assert!(decode(&mut bad).is_err());
    }
}
