//! A single pass over raw MessagePack that checks structure before serde sees it.
//!
//! It is iterative (no recursion, whatever the nesting), allocates one small stack, and
//! answers the questions serde cannot answer cheaply: does the buffer hold exactly one value,
//! is it a map with string keys throughout, is it within the depth and element limits, are
//! there only JSON-like values (no binary or extension types), and what is its `type`.

use crate::error::DecodeError;
use crate::limits::{MAX_DEPTH, MAX_ELEMENTS};

/// The scan's own error: `Copy` and heap-free, so the hot path carries no drop glue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScanError {
    Incomplete,
    Malformed(&'static str),
    TooManyElements,
    TooDeep,
    Trailing(usize),
    MissingType,
}

impl From<ScanError> for DecodeError {
    fn from(e: ScanError) -> Self {
        match e {
            ScanError::Incomplete => DecodeError::Incomplete,
            ScanError::Malformed(m) => DecodeError::Malformed(m.into()),
            ScanError::TooManyElements => DecodeError::Malformed(format!(
                "the message holds more than {MAX_ELEMENTS} elements"
            )),
            ScanError::TooDeep => DecodeError::Malformed(format!(
                "maps and arrays nest deeper than {MAX_DEPTH} levels"
            )),
            ScanError::Trailing(n) => DecodeError::TrailingBytes(n),
            ScanError::MissingType => DecodeError::MissingType,
        }
    }
}

/// How thoroughly to check string values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strings {
    /// Keys only: serde rejects invalid UTF-8 in values anyway, so the fast path leaves it.
    KeysOnly,
    /// Keys and values: used after serde failed, to name invalid UTF-8 precisely.
    All,
}

/// What the scan learned about a structurally valid message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// The top-level `type`.
    pub ty: u64,
}

#[derive(Clone, Copy)]
struct Frame {
    /// Items still to read: 2 per map entry, 1 per array element.
    remaining: u64,
    is_map: bool,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ScanError> {
        let end = self.pos.checked_add(n).ok_or(ScanError::Incomplete)?;
        let s = self.buf.get(self.pos..end).ok_or(ScanError::Incomplete)?;
        self.pos = end;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> Result<u64, ScanError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }
}

/// One MessagePack item, as far as the scan cares.
enum Item<'a> {
    Str(&'a [u8]),
    UInt(u64),
    NegInt,
    OtherScalar,
    Array(u64),
    Map(u64),
}

fn read_item<'a>(c: &mut Cursor<'a>) -> Result<Item<'a>, ScanError> {
    let marker = c.take(1)?[0];
    let item = match marker {
        0x00..=0x7f => Item::UInt(marker.into()),
        0x80..=0x8f => Item::Map((marker & 0x0f).into()),
        0x90..=0x9f => Item::Array((marker & 0x0f).into()),
        0xa0..=0xbf => Item::Str(c.take((marker & 0x1f).into())?),
        0xc0 | 0xc2 | 0xc3 => Item::OtherScalar,
        0xc1 => return Err(ScanError::Malformed("reserved marker byte 0xc1")),
        0xc4..=0xc6 => {
            return Err(ScanError::Malformed(
                "binary values are not allowed; send bytes as base64 strings",
            ));
        }
        0xc7..=0xc9 | 0xd4..=0xd8 => {
            return Err(ScanError::Malformed("extension values are not allowed"));
        }
        0xca => {
            c.take(4)?;
            Item::OtherScalar
        }
        0xcb => {
            c.take(8)?;
            Item::OtherScalar
        }
        0xcc => Item::UInt(c.be(1)?),
        0xcd => Item::UInt(c.be(2)?),
        0xce => Item::UInt(c.be(4)?),
        0xcf => Item::UInt(c.be(8)?),
        0xd0..=0xd3 => {
            let width = 1usize << (marker - 0xd0);
            let raw = c.be(width)?;
            let sign_bit = 1u64 << (width * 8 - 1);
            if raw & sign_bit == 0 {
                Item::UInt(raw)
            } else {
                Item::NegInt
            }
        }
        0xd9 => {
            let n = c.be(1)?;
            Item::Str(c.take(len(n)?)?)
        }
        0xda => {
            let n = c.be(2)?;
            Item::Str(c.take(len(n)?)?)
        }
        0xdb => {
            let n = c.be(4)?;
            Item::Str(c.take(len(n)?)?)
        }
        0xdc => Item::Array(c.be(2)?),
        0xdd => Item::Array(c.be(4)?),
        0xde => Item::Map(c.be(2)?),
        0xdf => Item::Map(c.be(4)?),
        0xe0..=0xff => Item::NegInt,
    };
    Ok(item)
}

fn len(n: u64) -> Result<usize, ScanError> {
    usize::try_from(n).map_err(|_| ScanError::Incomplete)
}

fn check_count(n: u64, per_entry: u64, elements: &mut u64) -> Result<u64, ScanError> {
    let items = n.saturating_mul(per_entry);
    *elements = elements.saturating_add(items);
    if *elements > MAX_ELEMENTS as u64 {
        return Err(ScanError::TooManyElements);
    }
    Ok(items)
}

/// Checks `buf` holds exactly one well-formed message map and returns its `type`.
pub(crate) fn scan(buf: &[u8], strings: Strings) -> Result<Scanned, ScanError> {
    let mut c = Cursor { buf, pos: 0 };
    let mut elements: u64 = 1;
    let top = match read_item(&mut c)? {
        Item::Map(n) => check_count(n, 2, &mut elements)?,
        _ => return Err(ScanError::Malformed("a message must be a MessagePack map")),
    };
    // Nesting is bounded, so the stack is a fixed array: the scan never allocates.
    let mut stack = [Frame {
        remaining: 0,
        is_map: false,
    }; MAX_DEPTH];
    stack[0] = Frame {
        remaining: top,
        is_map: true,
    };
    let mut depth = 1;
    let mut ty: Option<u64> = None;
    // Set while the next item is the value of the top-level `type` key.
    let mut type_value_next = false;

    while depth > 0 {
        let frame = &mut stack[depth - 1];
        if frame.remaining == 0 {
            depth -= 1;
            continue;
        }
        let is_key = frame.is_map && frame.remaining % 2 == 0;
        frame.remaining -= 1;
        let at_top = depth == 1;
        let item = read_item(&mut c)?;
        if is_key {
            let Item::Str(key) = item else {
                return Err(ScanError::Malformed("map keys must be strings"));
            };
            // Struct-field keys with invalid UTF-8 would be skipped as unknown fields by serde,
            // so keys are always checked.
            if !key.is_ascii() && std::str::from_utf8(key).is_err() {
                return Err(ScanError::Malformed("invalid UTF-8 in a map key"));
            }
            if at_top && key == b"type" {
                if ty.is_some() {
                    return Err(ScanError::Malformed("the `type` key appears twice"));
                }
                type_value_next = true;
            }
            continue;
        }
        if type_value_next {
            type_value_next = false;
            match item {
                Item::UInt(t) if t > 0 => ty = Some(t),
                _ => return Err(ScanError::Malformed("`type` must be a positive integer")),
            }
            continue;
        }
        match item {
            Item::Str(s) => {
                if strings == Strings::All && std::str::from_utf8(s).is_err() {
                    return Err(ScanError::Malformed("invalid UTF-8 in a string"));
                }
            }
            Item::Array(n) | Item::Map(n) => {
                let is_map = matches!(item, Item::Map(_));
                let items = check_count(n, if is_map { 2 } else { 1 }, &mut elements)?;
                if depth >= MAX_DEPTH {
                    return Err(ScanError::TooDeep);
                }
                stack[depth] = Frame {
                    remaining: items,
                    is_map,
                };
                depth += 1;
            }
            Item::UInt(_) | Item::NegInt | Item::OtherScalar => {}
        }
    }

    if c.pos != buf.len() {
        return Err(ScanError::Trailing(buf.len() - c.pos));
    }
    ty.map(|ty| Scanned { ty }).ok_or(ScanError::MissingType)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn scan_all(buf: &[u8]) -> Result<Scanned, DecodeError> {
        scan(buf, Strings::All).map_err(DecodeError::from)
    }

    #[test]
    fn minimal_map_with_type() {
        // {"type": 6}
        let buf = [0x81, 0xa4, b't', b'y', b'p', b'e', 0x06];
        assert_eq!(scan_all(&buf), Ok(Scanned { ty: 6 }));
    }

    #[test]
    fn every_prefix_of_a_valid_message_is_incomplete() {
        let buf = [
            0x82, 0xa4, b't', b'y', b'p', b'e', 0x06, 0xa1, b'a', 0x91, 0xc3,
        ];
        assert!(scan_all(&buf).is_ok());
        for cut in 0..buf.len() {
            assert_eq!(
                scan_all(&buf[..cut]),
                Err(DecodeError::Incomplete),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn huge_declared_lengths_fail_without_allocating() {
        // map32 declaring 4 billion entries
        let buf = [0xdf, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(scan_all(&buf), Err(DecodeError::Malformed(_))));
        // str32 declaring 4 GiB inside a map
        let buf = [0x81, 0xa1, b'a', 0xdb, 0xff, 0xff, 0xff, 0xff, b'x'];
        assert_eq!(scan_all(&buf), Err(DecodeError::Incomplete));
    }

    #[test]
    fn nesting_is_bounded_without_recursion() {
        let mut buf = vec![0x82, 0xa4, b't', b'y', b'p', b'e', 0x06, 0xa1, b'p'];
        buf.extend(std::iter::repeat_n(0x91, 1_000_000));
        buf.push(0xc0);
        let err = scan_all(&buf).unwrap_err();
        assert!(
            matches!(err, DecodeError::Malformed(ref m) if m.contains("deeper")),
            "{err}"
        );
    }

    #[test]
    fn non_string_keys_and_binary_are_rejected() {
        let buf = [0x81, 0x01, 0x02];
        assert!(matches!(scan_all(&buf), Err(DecodeError::Malformed(_))));
        let buf = [
            0x82, 0xa4, b't', b'y', b'p', b'e', 0x06, 0xa1, b'b', 0xc4, 0x01, 0x00,
        ];
        assert!(matches!(scan_all(&buf), Err(DecodeError::Malformed(_))));
    }

    #[test]
    fn type_must_be_present_unique_and_positive() {
        assert_eq!(scan_all(&[0x80]), Err(DecodeError::MissingType));
        let dup = [
            0x82, 0xa4, b't', b'y', b'p', b'e', 0x06, 0xa4, b't', b'y', b'p', b'e', 0x07,
        ];
        assert!(matches!(scan_all(&dup), Err(DecodeError::Malformed(_))));
        let neg = [0x81, 0xa4, b't', b'y', b'p', b'e', 0xff];
        assert!(matches!(scan_all(&neg), Err(DecodeError::Malformed(_))));
        let text = [0x81, 0xa4, b't', b'y', b'p', b'e', 0xa1, b'6'];
        assert!(matches!(scan_all(&text), Err(DecodeError::Malformed(_))));
    }

    #[test]
    fn trailing_bytes_are_counted() {
        let buf = [0x81, 0xa4, b't', b'y', b'p', b'e', 0x06, 0x00, 0x00];
        assert_eq!(scan_all(&buf), Err(DecodeError::TrailingBytes(2)));
    }
}
