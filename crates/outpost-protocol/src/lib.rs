//! Outpost's wire protocol: the typed messages the assistant (server) and the desktop app
//! (client) exchange over LiveKit, their MessagePack codec, and the validation rules of
//! docs/PROTOCOL.md.
//!
//! This is the only crate that knows MessagePack (rmp-serde); everything else deals in
//! [`Message`] values and byte buffers.
//!
//! Layout:
//! - [`types`]: one struct per message type (camelCase on the wire), with constructors for
//!   the exact error texts of seeds 000 and 001.
//! - `message`: the [`Message`] enum, numeric [`MessageType`] codes and directions.
//! - `scan`: a non-recursive structural pass over raw bytes (limits, `type`, trailing bytes).
//! - `codec`: [`encode`], [`decode`], and the JSON forms [`to_json`] / [`from_json`].
//! - `validate`: field rules shared by both directions; `limits`: every limit as a constant.
//!
//! ```
//! use outpost_protocol::{decode, encode, Execution, Message, ToolUseRequest, Map};
//! let req = ToolUseRequest {
//!     id: "toolreq_xyz789".into(),
//!     message_id: "msg_a9X8Y".into(),
//!     tool_name: "read_local_file".into(),
//!     execution: Execution::Client,
//!     parameters: Map::new(),
//!     timeout_ms: Some(5000),
//! };
//! let bytes = encode(&Message::ToolUseRequest(req.clone())).unwrap();
//! assert_eq!(decode(&bytes).unwrap(), Message::ToolUseRequest(req));
//! ```

mod codec;
mod error;
mod ids;
mod limits;
mod message;
mod open_enum;
mod scan;
pub mod types;
mod validate;

pub use codec::{decode, encode, from_json, peek_id, to_json};
pub use error::{DecodeError, EncodeError, FieldError, Result};
pub use ids::new_id;
pub use limits::*;
pub use message::{Direction, Message, MessageType};
pub use types::session::negotiate;
pub use types::*;
pub use validate::Validate;

/// A free-form value inside `parameters`, `result` or a schema.
pub use serde_json::Value;

/// A map of free-form values: the shape of `parameters` and `result`.
pub type Map = serde_json::Map<String, Value>;

/// A protocol version number.
pub type Version = u32;
