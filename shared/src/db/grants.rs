//! The handlers role's grants: exactly the relations a handlers' migration set creates, read
//! from the set's SQL, and never another table of the database (migration V18).
//!
//! The rule (the book's `docs/reference/database-roles.md`): after each migration set other
//! than the ledger's, `hookledger_handlers` (a group of the receiver, the worker and replay) is
//! granted `SELECT, INSERT, UPDATE, DELETE` on every table, view or materialized view, and
//! `USAGE, SELECT` on every sequence, that the set's migrations name in `CREATE TABLE`,
//! `CREATE SEQUENCE`, `CREATE [MATERIALIZED] VIEW` or `ALTER ... RENAME TO` (less those a later
//! migration of the set drops), in schema `public`, that exists and belongs to the migrating
//! role (or a role it is a member of); and on the sequences those tables own (`serial`,
//! identity). A relation created another way (inside a `DO` block or a function, in another
//! schema) is not granted: its migration grants it. The ledger's own tables and the history
//! tables are never granted here. Nothing else of the schema is: another application's
//! tables, even owned by the same (master) user, stay out of the internet-facing receiver's
//! reach.

use super::DbError;

/// The ledger's tables and its history table: never a handlers' set's, whatever its SQL says
/// (`entity_version` and `ordering_tie` have their own, narrower grants: migration V14).
const LEDGER_RELATIONS: [&str; 7] = [
    "webhook_event",
    "outbox",
    "audit_run",
    "rejected_delivery",
    "entity_version",
    "ordering_tie",
    // The ledger's history table (`migrations::LEDGER_HISTORY_TABLE`; named here, not used,
    // so this module does not depend on the runner that uses it).
    "refinery_schema_history",
];

/// The names (PostgreSQL's spelling: unquoted identifiers folded to lower case) of the
/// relations in schema `public` that `migrations` (SQL texts, in the order they run) leave
/// created: named by `CREATE [UNLOGGED] TABLE`, `CREATE SEQUENCE`, `CREATE [OR REPLACE]
/// [MATERIALIZED | RECURSIVE] VIEW` (with or without `IF NOT EXISTS`, unqualified or
/// `public.`-qualified), renamed to by `ALTER TABLE | SEQUENCE | VIEW | MATERIALIZED VIEW ...
/// RENAME TO`, less those dropped by a later `DROP` of the same kinds. Temporary tables, other
/// schemas, and anything inside a string or a dollar-quoted body (a `DO` block, a function)
/// are not read. The ledger's relations and the history tables are never in it.
pub fn created_relations<'a>(migrations: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for sql in migrations {
        let tokens = tokens(sql);
        let mut i = 0;
        while i < tokens.len() {
            let (created, dropped, next) = statement_at(&tokens, i);
            for name in dropped {
                names.retain(|n| *n != name);
            }
            for name in created {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            i = next;
        }
    }
    let history = |n: &str| n.starts_with("hookledger_") && n.ends_with("_schema_history");
    names.retain(|n| !(LEDGER_RELATIONS.contains(&n.as_str()) || history(n)));
    names
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// An unquoted word, lower-cased (PostgreSQL folds unquoted identifiers).
    Word(String),
    /// A double-quoted identifier, as written.
    Quoted(String),
    /// Any other character outside strings and comments (`.`, `,`, `;`, `(`, ...).
    Punct(char),
}

/// `sql` as tokens, without comments, string literals and dollar-quoted bodies.
fn tokens(sql: &str) -> Vec<Token> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && next == Some('-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest in PostgreSQL.
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '\'' {
            // A string ('' inside is a quote); an E'' string's backslash escapes a quote.
            let escapes = matches!(out.last(), Some(Token::Word(w)) if w == "e");
            i += 1;
            while i < chars.len() {
                let quoted_quote = chars[i] == '\'' && chars.get(i + 1) == Some(&'\'');
                if (escapes && chars[i] == '\\') || quoted_quote {
                    i += 2;
                } else if chars[i] == '\'' {
                    i += 1;
                    break;
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            let mut name = String::new();
            i += 1;
            while i < chars.len() {
                if chars[i] == '"' && chars.get(i + 1) == Some(&'"') {
                    name.push('"');
                    i += 2;
                } else if chars[i] == '"' {
                    i += 1;
                    break;
                } else {
                    name.push(chars[i]);
                    i += 1;
                }
            }
            out.push(Token::Quoted(name));
        } else if c == '$' {
            // $tag$ ... $tag$ (the tag may be empty); else a lone `$`.
            let mut j = i + 1;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            if chars.get(j) == Some(&'$') && !chars.get(i + 1).is_some_and(char::is_ascii_digit) {
                let tag: String = chars[i..=j].iter().collect();
                let rest: String = chars[j + 1..].iter().collect();
                i = match rest.find(&tag) {
                    Some(end) => j + 1 + rest[..end].chars().count() + tag.chars().count(),
                    None => chars.len(),
                };
            } else {
                out.push(Token::Punct(c));
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let mut word = String::new();
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                word.push(chars[i].to_ascii_lowercase());
                i += 1;
            }
            out.push(Token::Word(word));
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

fn is_word(token: Option<&Token>, word: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w == word)
}

/// The identifier at `i` (a word or a quoted name) and the index after it.
fn identifier(tokens: &[Token], i: usize) -> Option<(String, usize)> {
    match tokens.get(i)? {
        Token::Word(w) | Token::Quoted(w) => Some((w.clone(), i + 1)),
        Token::Punct(_) => None,
    }
}

/// A relation name at `i` (`name` or `schema.name`): the name when it is in `public`, and the
/// index after it.
fn relation(tokens: &[Token], i: usize) -> Option<(Option<String>, usize)> {
    let (first, after) = identifier(tokens, i)?;
    if tokens.get(after) == Some(&Token::Punct('.')) {
        let (name, after) = identifier(tokens, after + 1)?;
        return Some(((first == "public").then_some(name), after));
    }
    Some((Some(first), after))
}

/// Skips `words` (in this order, each optional) from `i`.
fn skip_optional(tokens: &[Token], mut i: usize, words: &[&str]) -> usize {
    for word in words {
        if is_word(tokens.get(i), word) {
            i += 1;
        }
    }
    i
}

/// The statement starting at token `i` (or the single token there when it starts none this
/// reads): the names it creates and drops, and where reading resumes.
fn statement_at(tokens: &[Token], i: usize) -> (Vec<String>, Vec<String>, usize) {
    let nothing = (Vec::new(), Vec::new(), i + 1);
    if is_word(tokens.get(i), "create") {
        let mut j = skip_optional(tokens, i + 1, &["or", "replace"]);
        j = skip_optional(tokens, j, &["global", "local"]);
        if ["temp", "temporary"]
            .iter()
            .any(|w| is_word(tokens.get(j), w))
        {
            return nothing;
        }
        j = skip_optional(tokens, j, &["unlogged", "materialized", "recursive"]);
        if !["table", "sequence", "view"]
            .iter()
            .any(|w| is_word(tokens.get(j), w))
        {
            return nothing;
        }
        j = skip_optional(tokens, j + 1, &["if", "not", "exists"]);
        return match relation(tokens, j) {
            Some((Some(name), after)) => (vec![name], Vec::new(), after),
            _ => nothing,
        };
    }
    if is_word(tokens.get(i), "alter") {
        let mut j = skip_optional(tokens, i + 1, &["materialized"]);
        if !["table", "sequence", "view"]
            .iter()
            .any(|w| is_word(tokens.get(j), w))
        {
            return nothing;
        }
        j = skip_optional(tokens, j + 1, &["if", "exists"]);
        j = skip_optional(tokens, j, &["only"]);
        let Some((old, mut j)) = relation(tokens, j) else {
            return nothing;
        };
        if tokens.get(j) == Some(&Token::Punct('*')) {
            j += 1;
        }
        if is_word(tokens.get(j), "rename") && is_word(tokens.get(j + 1), "to") {
            if let (Some(old), Some((new, after))) = (old, identifier(tokens, j + 2)) {
                return (vec![new], vec![old], after);
            }
        }
        return (Vec::new(), Vec::new(), j);
    }
    if is_word(tokens.get(i), "drop") {
        let mut j = skip_optional(tokens, i + 1, &["materialized"]);
        if !["table", "sequence", "view"]
            .iter()
            .any(|w| is_word(tokens.get(j), w))
        {
            return nothing;
        }
        j = skip_optional(tokens, j + 1, &["if", "exists"]);
        let mut dropped = Vec::new();
        while let Some((name, after)) = relation(tokens, j) {
            dropped.extend(name);
            j = after;
            if tokens.get(j) != Some(&Token::Punct(',')) {
                break;
            }
            j += 1;
        }
        return (Vec::new(), dropped, j);
    }
    nothing
}

/// The relations of `names` in schema `public` that the migrating role may grant on (it owns
/// them, directly or through a role it is a member of), and the sequences those tables own
/// (`serial`, identity), each as a quoted name (`regclass` text) with its `relkind`.
const GRANTABLE: &str = "\
WITH named AS (
    SELECT c.oid, c.relkind
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relname = ANY($1::text[])
      AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
      AND pg_has_role(current_user, c.relowner, 'USAGE'))
SELECT oid::regclass::text, relkind::text FROM named
UNION
SELECT s.oid::regclass::text, 'S'
FROM named t
JOIN pg_depend d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = t.oid
                AND d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
WHERE pg_has_role(current_user, s.relowner, 'USAGE')
ORDER BY 1";

/// Whether `hookledger_handlers` exists (migration V14 creates it; a build's own tests may
/// run a ledger without it).
const HANDLERS_ROLE_EXISTS: &str = "SELECT to_regrole('hookledger_handlers') IS NOT NULL";

/// Grants `hookledger_handlers` the relations of `names` ([`created_relations`] of one set):
/// `SELECT, INSERT, UPDATE, DELETE` on tables and views, `USAGE, SELECT` on sequences (theirs
/// too). Names that do not exist in `public`, or belong to a role the migrating role cannot
/// act for, are skipped. Idempotent; nothing when the role does not exist.
///
/// # Errors
/// [`DbError::Statement`] when a lookup or a `GRANT` fails.
pub async fn grant_to_handlers(
    client: &tokio_postgres::Client,
    names: &[String],
) -> Result<(), DbError> {
    if names.is_empty() {
        return Ok(());
    }
    let exists = client
        .query_one(HANDLERS_ROLE_EXISTS, &[])
        .await
        .map_err(|e| DbError::Statement(e.into()))?;
    if !exists.get::<_, bool>(0) {
        return Ok(());
    }
    let rows = client
        .query(GRANTABLE, &[&names])
        .await
        .map_err(|e| DbError::Statement(e.into()))?;
    for row in rows {
        let name: String = row.get(0);
        let kind: String = row.get(1);
        // `name` is `regclass` output: quoted where it must be.
        let grant = if kind == "S" {
            format!("GRANT USAGE, SELECT ON SEQUENCE {name} TO hookledger_handlers")
        } else {
            format!("GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {name} TO hookledger_handlers")
        };
        client
            .batch_execute(&grant)
            .await
            .map_err(|e| DbError::Statement(e.into()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::created_relations;

    fn names(sql: &[&str]) -> Vec<String> {
        created_relations(sql.iter().copied())
    }

    #[test]
    fn tables_sequences_and_views_created_in_public_are_named() {
        let sql = "-- CREATE TABLE commented (a int);\n\
            /* CREATE TABLE /* nested */ blocked (a int); */\n\
            CREATE TABLE orders (id text, note text DEFAULT 'CREATE TABLE quoted (a int)');\n\
            create unlogged table if not exists Public.\"Line Items\" (id serial);\n\
            CREATE SEQUENCE invoice_no;\n\
            CREATE OR REPLACE VIEW open_orders AS SELECT * FROM orders;\n\
            CREATE MATERIALIZED VIEW IF NOT EXISTS totals AS SELECT 1;\n\
            CREATE TEMP TABLE scratch (a int);\n\
            CREATE TABLE other_schema.kept_out (a int);\n\
            CREATE INDEX orders_idx ON orders (id);\n\
            DO $body$ BEGIN EXECUTE 'x'; CREATE TABLE in_do (a int); END $body$;\n\
            DO $$ BEGIN CREATE TABLE in_anonymous (a int); END $$;";
        assert_eq!(
            names(&[sql]),
            [
                "orders",
                "Line Items",
                "invoice_no",
                "open_orders",
                "totals"
            ]
        );
    }

    #[test]
    fn renames_and_drops_of_later_migrations_are_followed() {
        assert_eq!(
            names(&[
                "CREATE TABLE a (x int); CREATE TABLE b (x int); CREATE TABLE c (x int);",
                "ALTER TABLE IF EXISTS ONLY a RENAME TO a2; ALTER TABLE b RENAME COLUMN x TO y;",
                "DROP TABLE IF EXISTS c, public.b CASCADE;",
            ]),
            ["a2"]
        );
    }

    #[test]
    fn the_ledgers_tables_and_history_tables_are_never_named() {
        assert_eq!(
            names(&["CREATE TABLE IF NOT EXISTS webhook_event (x int);\
                 CREATE TABLE entity_version (x int);\
                 CREATE TABLE hookledger_examples_schema_history (x int);"]),
            Vec::<String>::new()
        );
    }
}
