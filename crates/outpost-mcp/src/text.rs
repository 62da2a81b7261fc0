//! Text from a server, cut to a bound.

/// Cuts `s` to at most `max` bytes on a character boundary, marking the cut.
pub(crate) fn cut(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}
