//! Rewrites a handler's deferred `INSERT ... VALUES (...)` so it can ride in the claim's own
//! statement as a data-modifying CTE that writes only when the claim won
//! (`crate::ledger::one_statement`).
//!
//! `INSERT INTO orders (a, b) VALUES ($1, $2) ON CONFLICT (a) DO NOTHING` with an offset of 9
//! becomes `INSERT INTO orders (a, b) SELECT $10, $11 FROM claimed ON CONFLICT (a) DO NOTHING`:
//! `claimed` is the claim's CTE, which returns its row only when the claim inserted it, so a
//! lost claim selects nothing and the write applies nothing. Parameter types are the handler's
//! declared ones (`Sql::types`), so moving the values from `VALUES` into a `SELECT` list changes
//! no parameter's type.
//!
//! Only one shape is rewritten, and anything the scanner is not sure of is refused (the event
//! then takes the transaction shape, which runs the statement as written):
//!
//! - the statement starts with `INSERT` (after comments);
//! - it has one top-level `VALUES` list of exactly one row, with no `DEFAULT` in it;
//! - what follows the row is nothing, `ON CONFLICT ...` or `RETURNING ...`;
//! - every `$n` is covered by the declared types (`n <= types.len()`);
//! - no top-level `;` except trailing ones;
//! - no subquery (`SELECT`, `TABLE` or `WITH` anywhere): it would read in the composed
//!   statement's snapshot, without the claim and the writes before it, and could name a table
//!   the composed statement's CTE names shadow;
//! - no `$0`, and no `E''` string continued by another segment (which keeps its escapes).
//!
//! The scanner knows PostgreSQL's lexical rules for what can hide a `$n`, a parenthesis or a
//! keyword: `'...'` strings (with `''`), `E'...'` strings (with backslash escapes), `"..."`
//! identifiers, words and dollar-quote tags (which may hold non-ASCII letters),
//! `$tag$...$tag$` dollar quotes, `--` comments (ended by a newline or carriage return) and
//! nested `/* */` comments (PostgreSQL documentation, "Lexical Structure").

/// The rewritten statement and the highest parameter number it uses (before the offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gated {
    /// The statement as a CTE body: `INSERT ... SELECT <row> FROM claimed ...`, parameters
    /// shifted by the offset.
    pub text: String,
    /// The highest `$n` the original statement uses (0 when none).
    pub max_param: usize,
}

/// A top-level lexical item the rewrite needs, with its byte range in the output text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// A keyword or identifier at parenthesis depth `depth` (0 = top level).
    Word {
        start: usize,
        end: usize,
        depth: usize,
    },
    /// `(` opening depth `depth + 1` at `at`.
    Open { at: usize, depth: usize },
    /// `)` closing back to depth `depth` at `at`.
    Close { at: usize, depth: usize },
    /// `,` at depth `depth`.
    Comma { depth: usize },
    /// `;` at depth `depth`, at `at`.
    Semicolon { at: usize, depth: usize },
}

/// Copies `sql` with every `$n` outside strings, identifiers and comments renumbered to
/// `$(n + offset)`, listing the items the rewrite looks at. `None` when the text does not scan
/// (an unterminated string, comment or quote, unbalanced parentheses).
fn scan(sql: &str, offset: usize) -> Option<(String, Vec<Item>, usize)> {
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 8);
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut max_param = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\'' => {
                // E'...' strings take backslash escapes; the E was copied as a word already.
                let escapes = out.ends_with(['E', 'e'])
                    && !out[..out.len() - 1].ends_with(|ch: char| {
                        ch.is_ascii_alphanumeric() || ch == '_' || !ch.is_ascii()
                    });
                let end = string_end(bytes, i, escapes)?;
                if escapes && continues(&sql[end..]) {
                    // A continued E'' string keeps its escapes in the next segment.
                    return None;
                }
                out.push_str(&sql[i..end]);
                i = end;
            }
            b'"' => {
                let end = quoted_identifier_end(bytes, i)?;
                out.push_str(&sql[i..end]);
                i = end;
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                let end = sql[i..].find(['\n', '\r']).map_or(bytes.len(), |at| i + at);
                out.push_str(&sql[i..end]);
                i = end;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = block_comment_end(bytes, i)?;
                out.push_str(&sql[i..end]);
                i = end;
            }
            b'$' => {
                let digits = bytes[i + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let preceded_by_word = out.ends_with(|ch: char| {
                    ch.is_ascii_alphanumeric() || ch == '_' || ch == '$' || !ch.is_ascii()
                });
                if digits > 0 && !preceded_by_word {
                    let n: usize = sql[i + 1..i + 1 + digits].parse().ok()?;
                    if n == 0 {
                        // No such parameter; shifted it would be one of the claim's.
                        return None;
                    }
                    max_param = max_param.max(n);
                    out.push('$');
                    out.push_str(&n.checked_add(offset)?.to_string());
                    i += 1 + digits;
                } else if let Some(end) = dollar_quote_end(sql, i) {
                    out.push_str(&sql[i..end]);
                    i = end;
                } else {
                    out.push('$');
                    i += 1;
                }
            }
            b'(' => {
                items.push(Item::Open {
                    at: out.len(),
                    depth,
                });
                depth += 1;
                out.push('(');
                i += 1;
            }
            b')' => {
                depth = depth.checked_sub(1)?;
                items.push(Item::Close {
                    at: out.len(),
                    depth,
                });
                out.push(')');
                i += 1;
            }
            b',' => {
                items.push(Item::Comma { depth });
                out.push(',');
                i += 1;
            }
            b';' => {
                items.push(Item::Semicolon {
                    at: out.len(),
                    depth,
                });
                out.push(';');
                i += 1;
            }
            // Identifiers may hold any non-ASCII character (PostgreSQL's lexer: bytes
            // \200-\377), so a word never ends inside a UTF-8 sequence.
            c if c.is_ascii_alphabetic() || c == b'_' || !c.is_ascii() => {
                let len = bytes[i..]
                    .iter()
                    .take_while(|b| {
                        b.is_ascii_alphanumeric() || **b == b'_' || **b == b'$' || !b.is_ascii()
                    })
                    .count();
                let start = out.len();
                out.push_str(&sql[i..i + len]);
                items.push(Item::Word {
                    start,
                    end: out.len(),
                    depth,
                });
                i += len;
            }
            _ => {
                // Any other character (UTF-8 continuation bytes included) is copied as it is.
                let ch = sql[i..].chars().next()?;
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    (depth == 0).then_some((out, items, max_param))
}

/// The end (exclusive) of the string literal starting at `start` (a `'`).
fn string_end(bytes: &[u8], start: usize, escapes: bool) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if escapes => i += 2,
            b'\'' if bytes.get(i + 1) == Some(&b'\'') => i += 2,
            b'\'' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Whether `rest` (what follows a string literal) may continue it: a `'` after nothing but
/// whitespace and `--` comments. PostgreSQL continues the string when they hold a newline
/// (its lexer's `quotecontinue`), and an `E''` string's next segment keeps the backslash
/// escapes; without a newline the text is a syntax error anyway, so `true` is safe.
fn continues(rest: &str) -> bool {
    let mut rest = rest;
    loop {
        let trimmed = rest.trim_start_matches([' ', '\t', '\n', '\r', '\x0c']);
        if let Some(comment) = trimmed.strip_prefix("--") {
            rest = comment.find(['\n', '\r']).map_or("", |at| &comment[at..]);
        } else {
            return trimmed.starts_with('\'');
        }
    }
}

/// The end (exclusive) of the quoted identifier starting at `start` (a `"`, doubled inside).
fn quoted_identifier_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            if bytes.get(i + 1) == Some(&b'"') {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// The end (exclusive) of the block comment starting at `start`, nested as PostgreSQL nests.
pub(super) fn block_comment_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The end (exclusive) of the dollar-quoted string starting at `start` (`$tag$...$tag$`, the
/// tag an identifier without `$`, or empty), or `None` when `start` does not open one.
fn dollar_quote_end(sql: &str, start: usize) -> Option<usize> {
    let rest = &sql[start + 1..];
    let tag_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || !b.is_ascii())
        .count();
    if rest.as_bytes().get(tag_len) != Some(&b'$')
        || rest.as_bytes().first().is_some_and(|b| b.is_ascii_digit())
    {
        return None;
    }
    let delimiter = &sql[start..start + tag_len + 2];
    let body = start + delimiter.len();
    sql[body..]
        .find(delimiter)
        .map(|at| body + at + delimiter.len())
}

/// The highest `$n` `sql` uses outside strings, quoted identifiers and comments (0 when none),
/// by the same lexical rules as the rewrite; `None` when the text does not scan (an
/// unterminated string, comment or quote, unbalanced parentheses, a `$0`). For checking a
/// configured statement's parameter count (`crate::sql_handler`).
pub(crate) fn highest_parameter(sql: &str) -> Option<usize> {
    scan(sql, 0).map(|(_, _, max_param)| max_param)
}

/// Rewrites `sql` (declaring `declared` parameter types) into a CTE body gated on `claimed`,
/// with its parameters shifted by `offset`; `None` when it is not the one shape this handles
/// (see the module docs).
pub(crate) fn gate(sql: &str, declared: usize, offset: usize) -> Option<Gated> {
    let (text, items, max_param) = scan(sql, offset)?;
    if max_param > declared {
        return None;
    }
    let word = |item: &Item| match *item {
        Item::Word { start, end, depth } => Some((&text[start..end], start, end, depth)),
        _ => None,
    };
    let first = items.iter().find_map(word)?;
    if !first.0.eq_ignore_ascii_case("INSERT") {
        return None;
    }
    // Trailing semicolons are dropped; any other is a second statement.
    let mut end_of_statement = text.len();
    for item in items.iter().rev() {
        if let Item::Semicolon { at, depth: 0 } = *item {
            if text[at + 1..end_of_statement].trim().is_empty() {
                end_of_statement = at;
                continue;
            }
            return None;
        }
    }
    if items
        .iter()
        .any(|i| matches!(i, Item::Semicolon { at, .. } if *at < end_of_statement))
    {
        return None;
    }
    // A subquery reads in the statement's one snapshot, where the claim and the writes before
    // it are not visible yet, and could name a table the composed statement's CTEs shadow
    // (`claimed`, `w1`, ...): the transaction shape runs it after them.
    if items.iter().any(|i| {
        word(i).is_some_and(|(w, _, _, _)| {
            ["SELECT", "TABLE", "WITH"]
                .iter()
                .any(|k| w.eq_ignore_ascii_case(k))
        })
    }) {
        return None;
    }
    let values_at = items.iter().position(|i| {
        word(i).is_some_and(|(w, _, _, depth)| depth == 0 && w.eq_ignore_ascii_case("VALUES"))
    })?;
    // A second top-level VALUES is not this shape (SELECT and WITH are refused above).
    if items[values_at + 1..].iter().any(|i| {
        word(i).is_some_and(|(w, _, _, depth)| depth == 0 && w.eq_ignore_ascii_case("VALUES"))
    }) {
        return None;
    }
    let (_, values_start, values_end, _) = word(&items[values_at])?;
    let Item::Open {
        at: open_at,
        depth: 0,
    } = *items.get(values_at + 1)?
    else {
        return None;
    };
    if !text[values_end..open_at].trim().is_empty() {
        return None;
    }
    let close = items[values_at + 2..]
        .iter()
        .position(|i| matches!(i, Item::Close { depth: 0, .. }))
        .map(|p| p + values_at + 2)?;
    let Item::Close { at: close_at, .. } = items[close] else {
        return None;
    };
    let row = &items[values_at + 2..close];
    if row.iter().any(|i| {
        word(i).is_some_and(|(w, _, _, depth)| depth == 1 && w.eq_ignore_ascii_case("DEFAULT"))
    }) {
        return None;
    }
    // After the row: nothing, ON CONFLICT ..., or RETURNING ... (a `,` would be a second row).
    let after = &items[close + 1..];
    if after.iter().any(|i| matches!(i, Item::Comma { depth: 0 })) {
        return None;
    }
    match after.iter().find_map(word) {
        None => {}
        Some((w, _, _, 0))
            if w.eq_ignore_ascii_case("ON") || w.eq_ignore_ascii_case("RETURNING") => {}
        Some(_) => return None,
    }
    let mut gated = String::with_capacity(text.len() + 24);
    gated.push_str(&text[..values_start]);
    gated.push_str("SELECT ");
    gated.push_str(&text[open_at + 1..close_at]);
    gated.push_str(" FROM claimed");
    gated.push_str(&text[close_at + 1..end_of_statement]);
    Some(Gated {
        text: gated,
        max_param,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_row_insert_selects_from_the_claim_with_its_parameters_shifted() {
        let gated = gate(
            "INSERT INTO orders (order_id, total_minor, currency, source, event_id)\n\
             VALUES ($1, $2, $3, $4, $5)\n\
             -- Another event already recorded this order: the first record stands.\n\
             ON CONFLICT (order_id) DO NOTHING",
            5,
            9,
        )
        .expect("the example handler's insert is gated");
        assert_eq!(
            gated.text,
            "INSERT INTO orders (order_id, total_minor, currency, source, event_id)\n\
             SELECT $10, $11, $12, $13, $14 FROM claimed\n\
             -- Another event already recorded this order: the first record stands.\n\
             ON CONFLICT (order_id) DO NOTHING"
        );
        assert_eq!(gated.max_param, 5);
    }

    #[test]
    fn parameters_inside_strings_identifiers_comments_and_dollar_quotes_are_left_alone() {
        let gated = gate(
            "insert into t (a, \"$1 col\", b) values ($2, 'costs $1 (or '' $3)', \
             E'\\' $1', $tag$ $1 ) $tag$ /* $1 ( /* nested $1 */ */) returning a; ",
            2,
            100,
        )
        .expect("gated");
        assert_eq!(
            gated.text,
            "insert into t (a, \"$1 col\", b) SELECT $102, 'costs $1 (or '' $3)', \
             E'\\' $1', $tag$ $1 ) $tag$ /* $1 ( /* nested $1 */ */ FROM claimed returning a"
        );
        assert_eq!(gated.max_param, 2);
    }

    #[test]
    fn every_other_shape_is_refused() {
        for (sql, declared) in [
            ("UPDATE t SET a = $1", 1),
            ("DELETE FROM t WHERE a = $1", 1),
            ("WITH x AS (SELECT 1) INSERT INTO t VALUES ($1)", 1),
            ("INSERT INTO t SELECT $1", 1),
            ("INSERT INTO t VALUES ($1), ($2)", 2),
            ("INSERT INTO t VALUES ($1, DEFAULT)", 1),
            ("INSERT INTO t VALUES ($1); DELETE FROM t", 1),
            ("INSERT INTO t VALUES ($1, $2)", 1),
            ("INSERT INTO t VALUES ('unterminated)", 0),
            ("INSERT INTO t VALUES ($1", 1),
            ("INSERT INTO t DEFAULT VALUES", 0),
            ("SELECT 1", 0),
        ] {
            assert_eq!(gate(sql, declared, 9), None, "{sql}");
        }
    }

    #[test]
    fn conflict_updates_and_expressions_in_the_row_are_kept() {
        let gated = gate(
            "INSERT INTO t (a, b) VALUES (lower($1), coalesce($2, 0) + 1) \
             ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b WHERE t.b < EXCLUDED.b",
            2,
            9,
        )
        .expect("gated");
        assert_eq!(
            gated.text,
            "INSERT INTO t (a, b) SELECT lower($10), coalesce($11, 0) + 1 FROM claimed \
             ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b WHERE t.b < EXCLUDED.b"
        );
    }
}

/// Hostile review: inputs the scanner must refuse or copy exactly.
#[cfg(test)]
mod hostile {
    use super::*;

    /// A dollar-quote tag may hold non-ASCII letters (its tag follows identifier rules:
    /// PostgreSQL documentation, "Dollar-Quoted String Constants"); a `$1` inside is text.
    #[test]
    fn a_dollar_quote_with_a_non_ascii_tag_is_copied_or_refused() {
        let sql = "INSERT INTO t (a) VALUES ($é$ $1 $é$ || $1)";
        if let Some(gated) = gate(sql, 1, 8) {
            assert!(gated.text.contains("$é$ $1 $é$"), "{}", gated.text);
        }
    }

    /// Identifiers may hold non-ASCII letters and `$`: `prié$1` is one identifier.
    #[test]
    fn an_identifier_with_a_non_ascii_letter_then_a_dollar_is_copied_or_refused() {
        let sql = "INSERT INTO t (prié$1) VALUES ($1)";
        if let Some(gated) = gate(sql, 1, 8) {
            assert!(gated.text.contains("(prié$1)"), "{}", gated.text);
        }
    }

    /// `$0` is no parameter (PostgreSQL: "there is no parameter $0"); shifted it would become
    /// one of the claim's own parameters.
    #[test]
    fn parameter_zero_is_refused() {
        assert_eq!(gate("INSERT INTO t (a) VALUES ($0)", 1, 8), None);
    }

    /// A parameter number near `usize::MAX` must be refused, not overflow when shifted.
    #[test]
    fn a_huge_parameter_number_is_refused_without_a_panic() {
        let sql = format!("INSERT INTO t (a) VALUES (${})", usize::MAX);
        let result = std::panic::catch_unwind(|| gate(&sql, 1, 8));
        assert_eq!(result.ok(), Some(None));
    }

    /// An `E''` string continued on the next line keeps taking backslash escapes (PostgreSQL
    /// documentation, "String Constants with C-Style Escapes" and the continuation rule): the
    /// `\'` in the second segment is a quote inside the string, and the `$1` after it is text.
    #[test]
    fn an_escape_string_continued_on_a_new_line_keeps_its_escapes() {
        let sql = "INSERT INTO t (a, b) VALUES (E'x'\n'\\' $1 ', $1) -- ')";
        if let Some(gated) = gate(sql, 1, 8) {
            assert!(gated.text.contains("'\\' $1 '"), "{}", gated.text);
        }
    }

    /// Held: everything else a hostile handler might write.
    #[test]
    fn held_shapes() {
        for (sql, declared) in [
            ("INSERT INTO t VALUES ($1); -- done", 1),
            (
                "INSERT INTO t VALUES ($1) ON CONFLICT (a) DO UPDATE SET a = $1, b = 2",
                1,
            ),
            ("INSERT INTO t VALUES ('VALUES (' || $1)", 1),
            ("INSERT INTO t SELECT * FROM (VALUES ($1)) v", 1),
            ("INSERT INTO t VALUES ($1) RETURNING a, b", 1),
            (
                "INSERT INTO t VALUES ($1);;  ; INSERT INTO t VALUES ($1)",
                1,
            ),
            ("INSERT INTO t VALUES ($1) /* unterminated", 1),
            ("INSERT INTO t VALUES ($1) $x$ unterminated", 1),
        ] {
            let gated = gate(sql, declared, 8);
            if let Some(g) = &gated {
                assert!(!g.text.contains("$1)"), "{sql}: {}", g.text);
                assert!(g.text.contains("FROM claimed"), "{sql}: {}", g.text);
            }
        }
        let kept = gate("INSERT INTO t (a) VALUES ($1::int8 + $1::int)", 1, 8).expect("casts");
        assert_eq!(
            kept.text,
            "INSERT INTO t (a) SELECT $9::int8 + $9::int FROM claimed"
        );
        let kept = gate("INSERT INTO t (a) VALUES ('VALUES ($1)')", 0, 8).expect("in a string");
        assert_eq!(
            kept.text,
            "INSERT INTO t (a) SELECT 'VALUES ($1)' FROM claimed"
        );
    }
}
