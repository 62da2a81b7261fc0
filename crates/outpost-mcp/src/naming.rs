//! How an MCP tool is named in Outpost's catalogue.
//!
//! `mcp__<server>__<tool>`: the prefix keeps MCP tools apart from the built-ins (no
//! built-in starts with `mcp__`), the server name (checked by
//! [`crate::config::check_server_name`]: letters, digits, `-`, `_`, no `__`) keeps servers
//! apart. The whole name uses only `[A-Za-z0-9_-]` and is at most [`MAX_TOOL_NAME`] bytes,
//! the strictest rule among the language-model APIs an assistant may forward it to
//! (within the protocol's own limit of 128 bytes). A tool name that has other characters
//! or is too long, or that already ends like a rewritten name (`_` and 8 hex digits), is
//! rewritten (other characters become `_`, the end is cut) and gets `_` plus 8 hex digits
//! of a hash of the original name. Server names have no `__` and `NAME` and `NAME_` are
//! never configured together ([`crate::config::McpConfig::check`]), so the first `__`
//! after the prefix ends the server's name: two servers' tools never share a name. Two
//! tools of one server could only by a hash collision; the host keeps the first of such
//! (`Connection::list_tools`). The host keeps the map back to the server's own name.

/// The prefix of every MCP tool's Outpost name.
pub const PREFIX: &str = "mcp__";

/// Longest Outpost tool name (OpenAI's function-name limit; Anthropic's is 128).
pub const MAX_TOOL_NAME: usize = 64;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// FNV-1a, 32 bits: stable across runs and platforms, enough to tell names apart.
fn short_hash(s: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

/// Whether `name` ends like a rewritten name does (`_` and 8 lowercase hex digits).
fn looks_rewritten(name: &str) -> bool {
    name.len() > 9
        && name.get(name.len() - 9..).is_some_and(|end| {
            end.starts_with('_')
                && end
                    .bytes()
                    .skip(1)
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// Outpost's name for `tool` of `server` (whose name is already checked). A tool name
/// that already ends like a rewritten one is rewritten too, so a tool cannot take the name
/// Outpost gave another tool of its server.
pub fn tool_name(server: &str, tool: &str) -> String {
    let head = prefix(server);
    let budget = MAX_TOOL_NAME.saturating_sub(head.len());
    let clean = !tool.is_empty()
        && tool.chars().all(allowed)
        && tool.len() <= budget
        && !looks_rewritten(tool);
    if clean {
        return format!("{head}{tool}");
    }
    let suffix = format!("_{}", short_hash(tool));
    let keep = budget.saturating_sub(suffix.len());
    let body: String = tool
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(keep)
        .collect();
    format!("{head}{body}{suffix}")
}

/// What every Outpost name of `server`'s tools starts with: `mcp__<server>__`.
pub fn prefix(server: &str) -> String {
    format!("{PREFIX}{server}__")
}

/// The tool part of `outpost_name` when it names a tool of `server` (something follows
/// the server's [`prefix`]).
pub fn tool_of<'a>(outpost_name: &'a str, server: &str) -> Option<&'a str> {
    let rest = outpost_name
        .strip_prefix(PREFIX)?
        .strip_prefix(server)?
        .strip_prefix("__")?;
    (!rest.is_empty()).then_some(rest)
}

/// The server part of an Outpost tool name, if it is an MCP tool's.
pub fn server_of(outpost_name: &str) -> Option<&str> {
    let rest = outpost_name.strip_prefix(PREFIX)?;
    let (server, _) = rest.split_once("__")?;
    Some(server)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(
            tool_name("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        assert_eq!(server_of("mcp__time__get_current_time"), Some("time"));
        assert_eq!(
            tool_of("mcp__time__get_current_time", "time"),
            Some("get_current_time")
        );
        assert_eq!(tool_of("mcp__time__get_current_time", "tim"), None);
        assert_eq!(tool_of("mcp__time__", "time"), None);
        assert_eq!(tool_of("mcp__other__x", "time"), None);
        assert_eq!(prefix("time"), "mcp__time__");
        assert_eq!(server_of("read_file"), None);
    }

    #[test]
    fn other_characters_and_long_names_get_a_hash() {
        let a = tool_name("srv", "do.thing");
        let b = tool_name("srv", "do thing");
        assert!(a.starts_with("mcp__srv__do_thing_"), "{a}");
        assert_ne!(a, b);
        let long = "x".repeat(200);
        let n = tool_name("a-very-long-server-name-32-chars", &long);
        assert!(n.len() <= MAX_TOOL_NAME, "{n}");
        assert!(n.chars().all(allowed));
        assert_ne!(
            n,
            tool_name("a-very-long-server-name-32-chars", &"x".repeat(201))
        );
        assert!(tool_name("s", "").len() > "mcp__s__".len());
    }

    /// Issue 30, finding 10: a tool cannot take the name Outpost gave another tool of its
    /// server by naming itself like the rewritten name.
    #[test]
    fn a_tool_named_like_a_rewritten_name_is_rewritten_too() {
        let rewritten = tool_name("srv", "do.thing");
        let lookalike = rewritten.strip_prefix("mcp__srv__").unwrap();
        assert_ne!(tool_name("srv", lookalike), rewritten);
        assert_eq!(tool_name("srv", "do_thing_x"), "mcp__srv__do_thing_x");
        assert_eq!(tool_name("srv", "get_sum"), "mcp__srv__get_sum");
    }
}
