//! Which addresses may be handed to the desktop's default handler (xdg-open, `open`,
//! ShellExecute): a link the user clicks in the assistant's text, and the `open_url`
//! tool. Only web and mail addresses, and a mail address only with the fields a message
//! is written from: mail programs take `attach=` / `attachment=` in a `mailto:` link as a
//! file to attach, so a link could send a file of the user's with a message they only
//! meant to start.

/// The `mailto:` fields a link may set (RFC 6068 names these; `body` is the text).
const MAILTO_FIELDS: &[&str] = &["to", "cc", "bcc", "subject", "body", "in-reply-to"];

/// Checks `url` (as given, surrounding whitespace allowed) may be opened: `http:`,
/// `https:` or `mailto:`, no control characters, and a `mailto:` link's fields only those
/// of a message (never a file to attach). `Err` says why not, for the person or the
/// assistant that asked.
pub fn check_link(url: &str) -> Result<(), String> {
    let url = url.trim();
    if url.chars().any(char::is_control) {
        return Err("the link holds control characters".into());
    }
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(());
    }
    if !lower.starts_with("mailto:") {
        return Err("only http, https and mailto links can be opened".into());
    }
    let Some((_, query)) = url.split_once('?') else {
        return Ok(());
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let name = percent_decoded(pair.split('=').next().unwrap_or("")).to_ascii_lowercase();
        if !MAILTO_FIELDS.contains(&name.as_str()) {
            return Err(format!(
                "a mailto link may set {}, not \"{name}\" (mail programs take some fields, \
                 such as attach, as files to send)",
                MAILTO_FIELDS.join(", ")
            ));
        }
    }
    Ok(())
}

/// `s` with its `%XX` escapes decoded (a malformed one is kept as it is; the result is
/// only compared with field names).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn web_and_plain_mail_links_open() {
        for ok in [
            "https://example.com/a?b=c",
            " http://example.com ",
            "mailto:someone@example.com",
            "MAILTO:a@b.example?subject=Hi&body=Hello%20there&cc=c@d.example",
            "mailto:?to=a@b.example&In-Reply-To=%3Cid%40x%3E",
        ] {
            assert_eq!(check_link(ok), Ok(()), "{ok}");
        }
    }

    /// Issue 30 ("also to check"): a mailto link carried `attach=` through xdg-open to the
    /// mail program, which attaches the file named.
    #[test]
    fn mail_links_that_attach_files_or_set_other_fields_are_refused() {
        for bad in [
            "mailto:a@b.example?attach=/home/u/.ssh/id_rsa",
            "mailto:a@b.example?subject=x&ATTACHMENT=file:///etc/passwd",
            "mailto:a@b.example?subject=x&att%61ch=~/.aws/credentials",
            "mailto:a@b.example?body=x&x-attach=y",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "https://example.com/\u{7}",
        ] {
            assert!(check_link(bad).is_err(), "{bad}");
        }
        assert!(
            check_link("mailto:a@b.example?attach=/x")
                .unwrap_err()
                .contains("\"attach\"")
        );
    }
}
