//! MessagePack encode and decode with validation, plus the JSON forms used by the CLI and
//! the golden vectors.
//!
//! Decoding is two passes over the bytes: [`scan`](crate::scan) checks structure and reads
//! `type` without allocating, then rmp-serde builds the typed body. Field-level error paths
//! are computed only on failure, by decoding once more with `serde_path_to_error`, so the
//! success path pays nothing for them.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{DecodeError, EncodeError, FieldError};
use crate::limits::MAX_DEPTH;
use crate::limits::MAX_MESSAGE_BYTES;
use crate::message::{Message, MessageType, with_body};
use crate::scan::{Strings, scan};
use crate::validate::Validate;
use crate::{Map, Value};

/// Decodes and validates one message from exactly the bytes given.
///
/// Never panics and never recurses without bound, whatever the input.
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(DecodeError::TooLarge {
            size: bytes.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    let scanned = scan(bytes, Strings::KeysOnly)?;
    let ty = MessageType::from_code(scanned.ty).ok_or(DecodeError::UnknownType(scanned.ty))?;
    dispatch(ty, &MsgpackInput(bytes))
}

/// Encodes a message after validating it. The `type` key comes first.
pub fn encode(msg: &Message) -> Result<Vec<u8>, EncodeError> {
    let ty = msg.message_type();
    msg.validate()
        .map_err(|error| EncodeError::Invalid { ty, error })?;
    let out = with_body!(msg, b => tagged_msgpack(ty, b))?;
    if out.len() > MAX_MESSAGE_BYTES {
        return Err(EncodeError::TooLarge {
            size: out.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    Ok(out)
}

/// Serializes the body as a map, then prepends the `type` entry to that map.
fn tagged_msgpack<T: Serialize>(ty: MessageType, body: &T) -> Result<Vec<u8>, EncodeError> {
    let serialize_err = |reason: String| EncodeError::Serialize { ty, reason };
    let mut raw = Vec::with_capacity(128);
    rmp_serde::encode::write_named(&mut raw, body).map_err(|e| serialize_err(e.to_string()))?;
    let mut rest = raw.as_slice();
    let fields = rmp::decode::read_map_len(&mut rest)
        .map_err(|e| serialize_err(format!("body is not a map: {e:?}")))?;
    let mut out = Vec::with_capacity(raw.len() + 8);
    let io = |e: std::io::Error| serialize_err(e.to_string());
    rmp::encode::write_map_len(&mut out, fields + 1).map_err(|e| io(e.into()))?;
    rmp::encode::write_str(&mut out, "type").map_err(|e| io(e.into()))?;
    rmp::encode::write_uint(&mut out, ty.code().into()).map_err(|e| io(e.into()))?;
    out.extend_from_slice(rest);
    Ok(out)
}

/// The message as a JSON object, `type` first, fields as on the wire.
pub fn to_json(msg: &Message) -> Value {
    let ty = msg.message_type();
    let body = with_body!(msg, b => serde_json::to_value(b));
    let mut out = Map::new();
    out.insert("type".into(), Value::from(ty.code()));
    // Serializing these plain data types to a JSON value cannot fail; an empty body would
    // still be caught by the golden tests.
    if let Ok(Value::Object(fields)) = body {
        out.extend(fields);
    }
    Value::Object(out)
}

/// Builds and validates a message from its JSON form (as printed by [`to_json`]).
pub fn from_json(value: &Value) -> Result<Message, DecodeError> {
    let Value::Object(map) = value else {
        return Err(DecodeError::Malformed(
            "a message must be a JSON object".into(),
        ));
    };
    let raw_ty = match map.get("type") {
        None => return Err(DecodeError::MissingType),
        Some(t) => t
            .as_u64()
            .filter(|t| *t > 0)
            .ok_or_else(|| DecodeError::Malformed("`type` must be a positive integer".into()))?,
    };
    let ty = MessageType::from_code(raw_ty).ok_or(DecodeError::UnknownType(raw_ty))?;
    dispatch(ty, &JsonInput(value))
}

/// Reads the top-level `id` (or `messageId`) of a message that failed to decode, so the
/// ErrorMessage can refer to it. Best effort: `None` when the bytes are too broken.
pub fn peek_id(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Ids {
        id: Option<Value>,
        message_id: Option<Value>,
    }
    scan(bytes, Strings::KeysOnly).ok()?;
    let ids: Ids = rmp_serde::from_slice(bytes).ok()?;
    let id = ids.id.or(ids.message_id)?;
    id.as_str()
        .filter(|s| crate::validate::id("id", s).is_ok())
        .map(str::to_owned)
}

/// A source a message body can be deserialized from.
trait Input {
    /// True when the structural scan has already checked these bytes.
    fn scanned(&self) -> bool;
    /// After a failure: a structural error the fast scan does not look for (invalid UTF-8
    /// in string values), so it is reported as such rather than as a type mismatch.
    fn strict_scan(&self) -> Option<DecodeError> {
        None
    }
    fn body<T: DeserializeOwned>(&self) -> Result<T, ()>;
    fn explain<T: DeserializeOwned>(&self) -> Option<serde_path_to_error::Error<String>>;
}

struct MsgpackInput<'a>(&'a [u8]);
struct JsonInput<'a>(&'a Value);

impl MsgpackInput<'_> {
    fn deserializer(&self) -> rmp_serde::Deserializer<rmp_serde::decode::ReadRefReader<'_, [u8]>> {
        let mut de = rmp_serde::Deserializer::from_read_ref(self.0);
        // The scan already bounded nesting; this is a second guard for rmp-serde's recursion.
        de.set_max_depth(MAX_DEPTH + 1);
        de
    }
}

impl Input for MsgpackInput<'_> {
    fn scanned(&self) -> bool {
        true
    }

    fn strict_scan(&self) -> Option<DecodeError> {
        scan(self.0, Strings::All).err().map(DecodeError::from)
    }

    fn body<T: DeserializeOwned>(&self) -> Result<T, ()> {
        T::deserialize(&mut self.deserializer()).map_err(drop)
    }

    fn explain<T: DeserializeOwned>(&self) -> Option<serde_path_to_error::Error<String>> {
        let mut de = self.deserializer();
        serde_path_to_error::deserialize::<_, T>(&mut de)
            .err()
            .map(|e| map_inner(e, |inner: rmp_serde::decode::Error| inner.to_string()))
    }
}

impl Input for JsonInput<'_> {
    fn scanned(&self) -> bool {
        false
    }

    fn body<T: DeserializeOwned>(&self) -> Result<T, ()> {
        T::deserialize(self.0).map_err(drop)
    }

    fn explain<T: DeserializeOwned>(&self) -> Option<serde_path_to_error::Error<String>> {
        serde_path_to_error::deserialize::<_, T>(self.0)
            .err()
            .map(|e| map_inner(e, |inner: serde_json::Error| inner.to_string()))
    }
}

fn map_inner<E>(
    e: serde_path_to_error::Error<E>,
    f: impl FnOnce(E) -> String,
) -> serde_path_to_error::Error<String> {
    let path = e.path().clone();
    serde_path_to_error::Error::new(path, f(e.into_inner()))
}

fn dispatch(ty: MessageType, input: &impl Input) -> Result<Message, DecodeError> {
    Ok(match ty {
        MessageType::Error => Message::Error(body(ty, input)?),
        MessageType::ClientHello => Message::ClientHello(body(ty, input)?),
        MessageType::ServerWelcome => Message::ServerWelcome(body(ty, input)?),
        MessageType::UserMessage => Message::UserMessage(body(ty, input)?),
        MessageType::AssistantMessage => Message::AssistantMessage(body(ty, input)?),
        MessageType::ToolUseRequest => Message::ToolUseRequest(body(ty, input)?),
        MessageType::ToolUseResult => Message::ToolUseResult(body(ty, input)?),
        MessageType::AssistantDelta => Message::AssistantDelta(body(ty, input)?),
        MessageType::AssistantStatus => Message::AssistantStatus(body(ty, input)?),
        MessageType::ToolUseCancel => Message::ToolUseCancel(body(ty, input)?),
        MessageType::ToolUseProgress => Message::ToolUseProgress(body(ty, input)?),
        MessageType::ToolsChanged => Message::ToolsChanged(body(ty, input)?),
        MessageType::Attachment => Message::Attachment(body(ty, input)?),
    })
}

fn body<T: DeserializeOwned + Validate>(
    ty: MessageType,
    input: &impl Input,
) -> Result<T, DecodeError> {
    match input.body::<T>() {
        Ok(v) => {
            // The scan already enforced depth and element limits on the bytes; only the
            // scalar rules remain. JSON input has had no scan, so it gets the full check.
            v.check(input.scanned())
                .map_err(|error| DecodeError::InvalidField { ty, error })?;
            Ok(v)
        }
        Err(()) => Err(match input.strict_scan() {
            Some(e) => e,
            None => match input.explain::<T>() {
                Some(e) => field_error(ty, e),
                None => DecodeError::Malformed(format!("{ty} could not be decoded")),
            },
        }),
    }
}

/// Turns a serde error with its path into MissingField or InvalidField.
fn field_error(ty: MessageType, e: serde_path_to_error::Error<String>) -> DecodeError {
    let path = e.path().to_string();
    let path = if path == "." { String::new() } else { path };
    let inner = e.into_inner();
    // serde's derive reports an absent field as "missing field `name`" at the parent's path.
    if let Some(field) = inner
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        let field = if path.is_empty() {
            field.to_owned()
        } else {
            format!("{path}.{field}")
        };
        return DecodeError::MissingField { ty, field };
    }
    DecodeError::InvalidField {
        ty,
        error: FieldError::new(
            if path.is_empty() {
                "(message)".into()
            } else {
                path
            },
            inner,
        ),
    }
}
