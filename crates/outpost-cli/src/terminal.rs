//! Text from others made safe to print in a terminal. What the assistant says, what MCP
//! servers call and describe their tools, error texts, the history: any of it may hold
//! escape sequences (an OSC 52 clipboard write, a screen clear, an OSC 8 link, a cursor
//! move that forges a line), so nothing from them reaches the terminal raw.
//!
//! - [`text`]: control characters become visible stand-ins (C0 and DEL their Unicode
//!   control pictures, `␛` for ESC; C1 and the bidirectional overrides `�`); line feeds
//!   and tabs stay.
//! - [`lines`]: the same, with every line after the first indented, so text that spans
//!   lines cannot pass for a line Outpost prints (those start in the first column).
//! - [`json`]: a JSON line whose strings may hold DEL, C1 or bidirectional controls
//!   (serde_json escapes only C0): those are escaped as `\uXXXX`, which keeps the data.

use std::borrow::Cow;

/// Whether `c` is a bidirectional embedding, override or isolate (text that reads in
/// another order than it is stored).
fn bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// What to print for `c`, when it is not to be printed as itself.
fn stand_in(c: char) -> Option<char> {
    match c {
        '\n' | '\t' => None,
        '\0'..='\u{1f}' => char::from_u32(0x2400 + u32::from(c)),
        '\u{7f}' => Some('\u{2421}'),
        '\u{80}'..='\u{9f}' => Some('\u{fffd}'),
        c if bidi_control(c) => Some('\u{fffd}'),
        _ => None,
    }
}

/// `s` with every control character but line feed and tab replaced by a visible
/// stand-in.
pub(crate) fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| stand_in(c).is_some()) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().map(|c| stand_in(c).unwrap_or(c)).collect())
}

/// [`text`] with the lines after the first indented by two spaces.
pub(crate) fn lines(s: &str) -> Cow<'_, str> {
    let safe = text(s);
    if !safe.contains('\n') {
        return safe;
    }
    Cow::Owned(safe.replace('\n', "\n  "))
}

/// A JSON text with DEL, C1 and bidirectional controls escaped as `\uXXXX` (they can
/// only stand inside strings, where the escape means the same character).
pub(crate) fn json(s: &str) -> Cow<'_, str> {
    let raw = |c: char| matches!(c, '\u{7f}'..='\u{9f}') || bidi_control(c);
    if !s.chars().any(raw) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if raw(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The review's four (issue 30, finding 11), and the 8-bit forms of CSI and OSC.
    const HOSTILE: &str = "copy \u{1b}]52;c;ZXZpbA==\u{7}clear \u{1b}[2J\u{1b}[H\r\
                           * assistant is idle\n\u{1b}]8;;https://evil.example\u{1b}\\\
                           link\u{1b}]8;;\u{1b}\\ csi \u{9b}31m osc \u{9d}0;title\u{9c} \
                           rtl \u{202e}gnp.exe\u{7f}";

    fn no_terminal_controls(s: &str) {
        for c in s.chars() {
            assert!(
                c == '\n' || c == '\t' || !(c.is_control() || bidi_control(c)),
                "{c:?} in {s:?}"
            );
        }
    }

    #[test]
    fn escapes_and_control_characters_never_reach_the_terminal() {
        let safe = text(HOSTILE);
        no_terminal_controls(&safe);
        assert!(safe.contains("copy ␛]52;c;ZXZpbA==␇clear ␛[2J␛[H␍* assistant is idle\n"));
        assert!(safe.contains("csi \u{fffd}31m"));
        assert!(safe.contains("rtl \u{fffd}gnp.exe\u{2421}"));
        assert!(matches!(
            text("plain, ünïcödé and\ttabs\n"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn continuation_lines_are_indented_so_no_line_passes_for_outposts() {
        assert_eq!(
            lines("assistant: hi\n* assistant is idle\n[tool x] ok"),
            "assistant: hi\n  * assistant is idle\n  [tool x] ok"
        );
        no_terminal_controls(&lines(HOSTILE));
    }

    #[test]
    fn json_keeps_the_data_and_escapes_what_serde_leaves_raw() {
        let line = serde_json::to_string(&serde_json::json!({ "text": HOSTILE })).unwrap();
        let safe = json(&line);
        no_terminal_controls(&safe);
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["text"], HOSTILE);
    }
}
