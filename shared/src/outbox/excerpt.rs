//! Bounded, printable excerpts of what a target answered, for a failed message's `last_error`.

use super::MAX_EXCERPT_BYTES;

/// Marker appended when an excerpt was cut.
const CUT: &str = "...";

/// At most [`MAX_EXCERPT_BYTES`] bytes of valid UTF-8 showing the start of `bytes`: invalid
/// UTF-8 becomes U+FFFD, control characters (C0, DEL, C1, and the Unicode line and paragraph
/// separators) are escaped as `\n`, `\u{1b}`, ... so a log line stays one line, and a cut
/// excerpt ends in `...` (the whole, marker included, within the bound; never a partial
/// character or a partial escape).
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    // Each input byte yields at least one output byte: reading past the bound (plus one
    // character, to know whether there is more) cannot change the result.
    let window = &bytes[..bytes.len().min(MAX_EXCERPT_BYTES + 4)];
    let text = String::from_utf8_lossy(window);
    let mut out = String::new();
    // Length of `out` at the last piece boundary that leaves room for the marker.
    let mut keep = 0;
    let mut cut = window.len() < bytes.len();
    for c in text.chars() {
        let piece: String = if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
            c.escape_default().collect()
        } else {
            c.into()
        };
        if out.len() + piece.len() > MAX_EXCERPT_BYTES {
            cut = true;
            break;
        }
        out.push_str(&piece);
        if out.len() + CUT.len() <= MAX_EXCERPT_BYTES {
            keep = out.len();
        }
    }
    if cut {
        // Whole pieces only: never a partial character or a partial escape.
        out.truncate(keep);
        out.push_str(CUT);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_answer_is_kept_whole() {
        assert_eq!(excerpt(b"{\"error\":\"bad\"}"), "{\"error\":\"bad\"}");
        assert_eq!(excerpt(b""), "");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(excerpt(b"a\nb\r\x1b[31m\x7f"), "a\\nb\\r\\u{1b}[31m\\u{7f}");
        assert_eq!(excerpt("x\u{2028}y\u{85}".as_bytes()), "x\\u{2028}y\\u{85}");
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(excerpt(b"ok \xff\xfe end"), "ok \u{fffd}\u{fffd} end");
    }

    #[test]
    fn a_long_answer_is_cut_within_the_bound_on_a_character_boundary() {
        for (unit, len) in [("a", 1), ("\u{e9}", 2), ("\u{2603}", 3), ("\u{1f600}", 4)] {
            let body = unit.repeat(10_000);
            let cut = excerpt(body.as_bytes());
            assert!(cut.len() <= MAX_EXCERPT_BYTES, "{unit}: {}", cut.len());
            assert!(cut.ends_with(CUT), "{unit}");
            let kept = cut.strip_suffix(CUT).unwrap();
            assert!(kept.chars().all(|c| c.to_string() == unit), "{unit}");
            assert!(
                kept.len() + CUT.len() > MAX_EXCERPT_BYTES - len,
                "{unit}: too short"
            );
        }
        // Exactly the bound: no marker.
        let exact = "a".repeat(MAX_EXCERPT_BYTES);
        assert_eq!(excerpt(exact.as_bytes()), exact);
        assert!(excerpt("a".repeat(MAX_EXCERPT_BYTES + 1).as_bytes()).ends_with(CUT));
    }

    #[test]
    fn a_cut_never_leaves_half_an_escape() {
        for offset in 0..12 {
            let body = format!(
                "{}{}",
                "a".repeat(MAX_EXCERPT_BYTES - offset),
                "\x1b".repeat(50)
            );
            let cut = excerpt(body.as_bytes());
            assert!(cut.len() <= MAX_EXCERPT_BYTES);
            let kept = cut.strip_suffix(CUT).unwrap();
            let after = kept.trim_start_matches('a');
            assert!(
                after.is_empty() || after.split_inclusive('}').all(|e| e == "\\u{1b}"),
                "offset {offset}: {after:?}"
            );
        }
    }

    #[test]
    fn a_huge_answer_reads_only_a_bounded_window() {
        let body = vec![b'x'; 10 * 1024 * 1024];
        let cut = excerpt(&body);
        assert!(cut.len() <= MAX_EXCERPT_BYTES && cut.ends_with(CUT));
    }
}
