//! Field-level validation shared by decode (after parsing) and encode (before writing).

use serde::Deserializer;

use crate::error::FieldError;
use crate::limits::{
    MAX_DEPTH, MAX_ELEMENTS, MAX_FILE_NAME_BYTES, MAX_ID_BYTES, MAX_NAME_BYTES, MAX_TIMEOUT_MS,
};
use crate::{Map, Value};

/// Validation every message type implements; `Ok` means it may go on the wire.
pub trait Validate {
    /// Checks every rule of docs/PROTOCOL.md that the type system does not already enforce.
    fn validate(&self) -> Result<(), FieldError> {
        self.check(false)
    }

    /// The checks behind [`Validate::validate`]. With `values_scanned`, the depth and size
    /// limits of free-form values are skipped because the decoder's scan of the raw bytes
    /// already enforced them.
    fn check(&self, values_scanned: bool) -> Result<(), FieldError>;
}

/// An id: 1..=MAX_ID_BYTES bytes, no control characters.
pub(crate) fn id(field: &str, v: &str) -> Result<(), FieldError> {
    short_text(field, v, MAX_ID_BYTES)
}

/// A name (tool name, error code): 1..=MAX_NAME_BYTES bytes, no control characters.
pub(crate) fn name(field: &str, v: &str) -> Result<(), FieldError> {
    short_text(field, v, MAX_NAME_BYTES)
}

/// A file name: 1..=MAX_FILE_NAME_BYTES bytes, no control characters, no `/` or `\\`, not
/// `.` or `..`.
pub(crate) fn file_name(field: &str, v: &str) -> Result<(), FieldError> {
    short_text(field, v, MAX_FILE_NAME_BYTES)?;
    if v.contains(['/', '\\']) || v == "." || v == ".." {
        return Err(FieldError::new(
            field,
            format!("must be a file name without folders, got \"{v}\""),
        ));
    }
    Ok(())
}

fn short_text(field: &str, v: &str, max: usize) -> Result<(), FieldError> {
    if v.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if v.len() > max {
        return Err(FieldError::new(
            field,
            format!("is {} bytes long; the limit is {max}", v.len()),
        ));
    }
    if has_control(v.as_bytes()) {
        return Err(FieldError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

/// True if `b` (valid UTF-8) holds a control character. C0 controls and DEL are single
/// bytes; C1 controls (U+0080..=U+009F) are 0xC2 followed by 0x80..=0x9F, and 0xC2 is never a
/// continuation byte, so one pass over the bytes finds them all.
fn has_control(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c < 0x20 || c == 0x7f || (c == 0xc2 && matches!(b.get(i + 1), Some(0x80..=0x9f))) {
            return true;
        }
        i += 1;
    }
    false
}

/// A timeout in milliseconds: 1..=MAX_TIMEOUT_MS.
pub(crate) fn timeout(field: &str, v: i64) -> Result<u32, FieldError> {
    if v <= 0 {
        return Err(FieldError::new(
            field,
            format!("must be a positive number of milliseconds, got {v}"),
        ));
    }
    match u32::try_from(v) {
        Ok(ms) if ms <= MAX_TIMEOUT_MS => Ok(ms),
        _ => Err(FieldError::new(
            field,
            format!("must be at most {MAX_TIMEOUT_MS} ms (one hour), got {v}"),
        )),
    }
}

/// serde `deserialize_with` for an optional `timeoutMs`: any integer is read, then range-checked
/// so the error says what the limit is rather than "expected u32".
pub(crate) fn de_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<u32>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a positive integer number of milliseconds")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(self)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            timeout("timeoutMs", v)
                .map(Some)
                .map_err(|e| E::custom(e.reason))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            let v = i64::try_from(v).unwrap_or(i64::MAX);
            self.visit_i64(v)
        }
    }
    d.deserialize_option(V)
}

/// A free-form value (parameters, result, schema) stays within the depth and size limits.
///
/// `level` is the nesting level of `v` itself in the message (the message map is level 1, so
/// a top-level field's map is level 2). Decoding enforces the same limits on the raw bytes;
/// encoding calls this on values built in memory, which may be arbitrarily deep.
pub(crate) fn map_value(field: &str, v: &Map, level: usize) -> Result<(), FieldError> {
    if level > MAX_DEPTH {
        return Err(too_deep(field));
    }
    // Iterative walk: a value built in memory may be deeper than the stack allows.
    let mut stack: Vec<(&Value, usize)> = v.values().map(|x| (x, level + 1)).collect();
    let mut elements = v.len() * 2;
    while let Some((value, depth)) = stack.pop() {
        let is_container = match value {
            Value::Array(a) => {
                elements += a.len();
                true
            }
            Value::Object(m) => {
                elements += m.len() * 2;
                true
            }
            _ => false,
        };
        if is_container && depth > MAX_DEPTH {
            return Err(too_deep(field));
        }
        if elements > MAX_ELEMENTS {
            return Err(FieldError::new(
                field,
                format!("holds more than {MAX_ELEMENTS} elements"),
            ));
        }
        match value {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, depth + 1))),
            Value::Object(m) => stack.extend(m.values().map(|x| (x, depth + 1))),
            _ => {}
        }
    }
    Ok(())
}

fn too_deep(field: &str) -> FieldError {
    FieldError::new(
        field,
        format!("nests maps and arrays deeper than {MAX_DEPTH} levels (counting the message)"),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> Map {
        let mut v = json!(1);
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        let mut m = Map::new();
        m.insert("k".into(), v);
        m
    }

    #[test]
    fn depth_limit_is_exact() {
        // `nested(n)` is a map (level 2 as a top-level field) holding n nested arrays.
        assert!(map_value("parameters", &nested(MAX_DEPTH - 2), 2).is_ok());
        let err = map_value("parameters", &nested(MAX_DEPTH - 1), 2).unwrap_err();
        assert_eq!(err.field, "parameters");
        assert!(err.reason.contains("deeper"), "{err}");
    }

    #[test]
    fn very_deep_values_do_not_overflow_the_stack() {
        // serde_json builds and drops values recursively, so that happens on a thread with a
        // big stack; the walk itself runs on a thread with a tiny one, proving it iterates.
        let big = std::thread::Builder::new().stack_size(512 << 20);
        let outcome = big
            .spawn(|| {
                let value = nested(100_000);
                let value = std::thread::Builder::new()
                    .stack_size(64 << 10)
                    .spawn(move || {
                        let outcome = map_value("result", &value, 2).is_err();
                        (value, outcome)
                    })
                    .unwrap()
                    .join()
                    .unwrap();
                value.1
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(outcome);
    }

    #[test]
    fn short_text_rules() {
        assert!(id("id", "toolreq_abc123").is_ok());
        assert_eq!(id("id", "").unwrap_err().reason, "must not be empty");
        assert!(id("id", &"x".repeat(MAX_ID_BYTES + 1)).is_err());
        assert!(id("id", "a\nb").is_err());
        assert!(id("id", "a\u{7f}b").is_err());
        assert!(id("id", "a\u{85}b").is_err());
        assert!(id("id", "naïve-ß-€-🚆").is_ok());
    }

    #[test]
    fn timeout_range() {
        assert_eq!(timeout("timeoutMs", 5000), Ok(5000));
        assert!(timeout("timeoutMs", 0).is_err());
        assert!(timeout("timeoutMs", -1).is_err());
        assert!(timeout("timeoutMs", i64::from(MAX_TIMEOUT_MS) + 1).is_err());
        assert!(timeout("timeoutMs", i64::MAX).is_err());
    }
}
