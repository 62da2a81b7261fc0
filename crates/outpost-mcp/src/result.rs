//! The one JSON shape an MCP tool result becomes (docs/MCP.md, "Result shape").
//!
//! ```json
//! { "isError": false,
//!   "text": "the text blocks joined by newlines",
//!   "content": [ {"type": "text", "text": "..."},
//!                {"type": "image", "mimeType": "image/png", "data": "<base64>"},
//!                {"type": "audio", "mimeType": "audio/wav", "data": "<base64>"},
//!                {"type": "resource_link", "uri": "...", "name": "...", ...},
//!                {"type": "resource", "uri": "...", "mimeType": "...", "text": "..."},
//!                {"type": "resource", "uri": "...", "mimeType": "...", "blob": "<base64>"} ],
//!   "structuredContent": { ... } }
//! ```
//!
//! Built from the result's wire JSON, so a content type this crate does not know is kept
//! as `{"type": "unknown", "raw": <block>}` rather than lost. `_meta` and per-block
//! `annotations` are dropped: they are hints for the server's own client UI.

use serde_json::{Map, Value};

fn copy(from: &Map<String, Value>, to: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k)
            && !v.is_null()
        {
            to.insert((*k).to_owned(), v.clone());
        }
    }
}

fn block(raw: &Value) -> Value {
    let Some(obj) = raw.as_object() else {
        return serde_json::json!({"type": "unknown", "raw": raw});
    };
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    let mut out = Map::new();
    match kind {
        "text" => copy(obj, &mut out, &["text"]),
        "image" | "audio" => copy(obj, &mut out, &["mimeType", "data"]),
        "resource_link" => copy(
            obj,
            &mut out,
            &["uri", "name", "title", "description", "mimeType", "size"],
        ),
        "resource" => {
            if let Some(res) = obj.get("resource").and_then(Value::as_object) {
                copy(res, &mut out, &["uri", "mimeType", "text", "blob"]);
            }
        }
        _ => return serde_json::json!({"type": "unknown", "raw": raw}),
    }
    out.insert("type".into(), Value::String(kind.to_owned()));
    Value::Object(out)
}

/// Maps a `tools/call` result (its wire JSON) to Outpost's shape.
pub fn map_call_result(wire: &Value) -> Map<String, Value> {
    let empty = Map::new();
    let obj = wire.as_object().unwrap_or(&empty);
    let is_error = obj.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let content: Vec<Value> = obj
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| blocks.iter().map(block).collect())
        .unwrap_or_default();
    let text = content
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Map::new();
    out.insert("isError".into(), Value::Bool(is_error));
    out.insert("text".into(), Value::String(text));
    out.insert("content".into(), Value::Array(content));
    if let Some(s) = obj.get("structuredContent") {
        out.insert("structuredContent".into(), s.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_every_content_type() {
        let wire = json!({
            "content": [
                {"type": "text", "text": "a", "annotations": {"priority": 1}},
                {"type": "image", "mimeType": "image/png", "data": "iVBO"},
                {"type": "audio", "mimeType": "audio/wav", "data": "UklG"},
                {"type": "resource_link", "uri": "file:///x", "name": "x", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "hi"}},
                {"type": "resource", "resource": {"uri": "test://b", "blob": "AAEC"}},
                {"type": "text", "text": "b"},
                {"type": "hologram", "x": 1}
            ],
            "structuredContent": {"sum": 3},
            "isError": true,
            "_meta": {"k": 1}
        });
        let m = map_call_result(&wire);
        assert_eq!(m["isError"], json!(true));
        assert_eq!(m["text"], json!("a\nb"));
        assert_eq!(m["structuredContent"], json!({"sum": 3}));
        let c = m["content"].as_array().unwrap_or(&Vec::new()).clone();
        assert_eq!(c[0], json!({"type": "text", "text": "a"}));
        assert_eq!(
            c[1],
            json!({"type": "image", "mimeType": "image/png", "data": "iVBO"})
        );
        assert_eq!(c[2]["type"], json!("audio"));
        assert_eq!(
            c[3],
            json!({"type": "resource_link", "uri": "file:///x", "name": "x", "mimeType": "text/plain"})
        );
        assert_eq!(
            c[4],
            json!({"type": "resource", "uri": "test://r", "mimeType": "text/plain", "text": "hi"})
        );
        assert_eq!(
            c[5],
            json!({"type": "resource", "uri": "test://b", "blob": "AAEC"})
        );
        assert_eq!(c[7]["type"], json!("unknown"));
        assert!(!m.contains_key("_meta"));
    }

    #[test]
    fn absent_fields_default() {
        let m = map_call_result(&json!({}));
        assert_eq!(m["isError"], json!(false));
        assert_eq!(m["content"], json!([]));
        assert!(!m.contains_key("structuredContent"));
    }
}
