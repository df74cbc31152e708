//! Server-side counters for "database work per event": `pg_stat_statements` (statements and
//! their calls), `pg_stat_wal` (WAL bytes, records, full-page images) and
//! `pg_stat_user_tables` (heap tuples inserted/updated, HOT updates) with each table's index
//! count, read before and after a measured batch.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use tokio_postgres::Client;

/// One statement as `pg_stat_statements` reports it.
#[derive(Debug, Clone)]
pub struct Statement {
    /// Whitespace-collapsed text with `--` comments removed (statements are grouped by
    /// `queryid`; this is the first text seen).
    pub key: String,
    /// `utility` (BEGIN, SET, COMMIT, ROLLBACK, ...) or `dml` (INSERT, UPDATE, DELETE, SELECT,
    /// WITH ...).
    pub kind: &'static str,
    /// `pg_stat_statements.queryid`.
    pub id: i64,
    /// Executions.
    pub calls: i64,
    /// Rows returned or affected, summed over calls.
    pub rows: i64,
}

/// Per-table counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct TableCounts {
    /// `n_tup_ins`.
    pub ins: i64,
    /// `n_tup_upd`.
    pub upd: i64,
    /// `n_tup_hot_upd`.
    pub hot_upd: i64,
    /// `n_tup_del`.
    pub del: i64,
    /// Indexes on the table (all of them, partial ones included).
    pub indexes: i64,
}

/// Counters at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// `pg_stat_wal.wal_bytes`.
    pub wal_bytes: f64,
    /// `pg_stat_wal.wal_records`.
    pub wal_records: i64,
    /// `pg_stat_wal.wal_fpi` (full-page images).
    pub wal_fpi: i64,
    /// By table name (`public` schema, user tables).
    pub tables: BTreeMap<String, TableCounts>,
}

/// Database work per event: the difference of two snapshots divided by the events.
#[derive(Debug, Clone, Default)]
pub struct Work {
    /// Events the batch handled.
    pub events: u64,
    /// Statements per event (sum of calls / events), every statement listed in `statements`.
    pub statements: f64,
    /// Client turns per event (see `turns`).
    pub round_trips: f64,
    /// WAL bytes per event.
    pub wal_bytes: f64,
    /// WAL records per event.
    pub wal_records: f64,
    /// Full-page images per event.
    pub wal_fpi: f64,
    /// Heap tuples written per event: n_tup_ins + n_tup_upd + n_tup_del, all user tables.
    pub heap_tuples: f64,
    /// Index entries written per event (estimate): n_tup_ins x indexes + (n_tup_upd -
    /// n_tup_hot_upd) x indexes, per table, summed.
    pub index_tuples: f64,
    /// The statements: (text, kind, calls per event, rows per call, queryid).
    pub statement_list: Vec<(String, &'static str, f64, f64, i64)>,
    /// Per table: (name, inserts, updates, HOT updates, indexes), per event.
    pub table_list: Vec<(String, f64, f64, f64, i64)>,
}

/// Strips `--` comments, collapses whitespace, drops a trailing `;`.
pub fn normalise(text: &str) -> String {
    let without_comments: Vec<&str> = text
        .lines()
        .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
        .collect();
    let collapsed = without_comments
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    collapsed.trim_end_matches(';').trim().to_owned()
}

/// `text` with every string literal, number and `$n` parameter replaced by `?`.
pub fn canonical(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut prev_word = false;
    while let Some(c) = chars.next() {
        if c == '\'' {
            for d in chars.by_ref() {
                if d == '\'' {
                    break;
                }
            }
            out.push('?');
            prev_word = false;
        } else if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('?');
            prev_word = false;
        } else if c.is_ascii_digit() && !prev_word {
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('?');
        } else if (c.is_alphabetic() || c == '_') && !prev_word {
            // A whole word: the constants NULL, TRUE and FALSE are literals too (pgbench's text
            // has them as parameters once pg_stat_statements normalised it).
            let mut word = String::from(c);
            while chars
                .peek()
                .is_some_and(|d| d.is_alphanumeric() || *d == '_')
            {
                word.extend(chars.next());
            }
            if ["null", "true", "false"]
                .iter()
                .any(|k| word.eq_ignore_ascii_case(k))
            {
                out.push('?');
            } else {
                out.push_str(&word);
            }
            prev_word = false;
        } else {
            prev_word = c.is_alphanumeric() || c == '_';
            out.push(c);
        }
    }
    out
}

fn kind(key: &str) -> &'static str {
    let first = key
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_uppercase();
    match first.as_str() {
        "INSERT" | "UPDATE" | "DELETE" | "SELECT" | "WITH" | "MERGE" | "VALUES" => "dml",
        _ => "utility",
    }
}

/// Resets `pg_stat_statements` (the next [`statements`] lists only what ran since).
///
/// # Errors
/// When the extension is not loaded.
pub async fn reset_statements(client: &Client) -> Result<()> {
    client
        .batch_execute("SELECT pg_stat_statements_reset()")
        .await
        .context("pg_stat_statements_reset (is pg_stat_statements preloaded?)")
}

/// Statements since the last reset, the harness's own reads (texts mentioning `pg_stat`)
/// left out.
///
/// # Errors
/// On a database error.
pub async fn statements(client: &Client) -> Result<Vec<Statement>> {
    let rows = client
        .query(
            "SELECT query, calls, rows, queryid FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .await?;
    // Keyed by queryid (the same statement has the same id whatever its constants or comments,
    // and whether its text was stored normalised), shown by its text.
    let mut by_key: BTreeMap<i64, Statement> = BTreeMap::new();
    for row in rows {
        let text: String = row.get(0);
        if text.contains("pg_stat") {
            continue;
        }
        let key = normalise(&text);
        let id: i64 = row.get(3);
        let entry = by_key.entry(id).or_insert(Statement {
            kind: kind(&key),
            id,
            key,
            calls: 0,
            rows: 0,
        });
        entry.calls += row.get::<_, i64>(1);
        entry.rows += row.get::<_, i64>(2);
    }
    let mut list: Vec<Statement> = by_key.into_values().collect();
    list.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(list)
}

/// WAL and table counters now (stats snapshot cleared first, so the values are current as
/// of the last flush by each backend).
///
/// # Errors
/// On a database error.
pub async fn snapshot(client: &Client) -> Result<Snapshot> {
    client
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await?;
    let wal = client
        .query_one(
            "SELECT wal_bytes::float8, wal_records, wal_fpi FROM pg_stat_wal",
            &[],
        )
        .await?;
    let mut snapshot = Snapshot {
        wal_bytes: wal.get(0),
        wal_records: wal.get(1),
        wal_fpi: wal.get(2),
        tables: BTreeMap::new(),
    };
    let rows = client
        .query(
            "SELECT t.relname::text, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del, \
                    (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid) \
             FROM pg_stat_user_tables t WHERE t.schemaname = 'public'",
            &[],
        )
        .await?;
    for row in rows {
        snapshot.tables.insert(
            row.get(0),
            TableCounts {
                ins: row.get(1),
                upd: row.get(2),
                hot_upd: row.get(3),
                del: row.get(4),
                indexes: row.get(5),
            },
        );
    }
    Ok(snapshot)
}

/// The work between `before` and `after` (and `statements` since the reset), per event.
pub fn work(
    before: &Snapshot,
    after: &Snapshot,
    statements: &[Statement],
    turns: u64,
    events: u64,
) -> Work {
    let n = events.max(1) as f64;
    let mut work = Work {
        events,
        round_trips: turns as f64 / n,
        wal_bytes: (after.wal_bytes - before.wal_bytes) / n,
        wal_records: (after.wal_records - before.wal_records) as f64 / n,
        wal_fpi: (after.wal_fpi - before.wal_fpi) as f64 / n,
        ..Work::default()
    };
    for statement in statements {
        work.statements += statement.calls as f64 / n;
        work.statement_list.push((
            statement.key.clone(),
            statement.kind,
            statement.calls as f64 / n,
            statement.rows as f64 / statement.calls.max(1) as f64,
            statement.id,
        ));
    }
    for (name, a) in &after.tables {
        let b = before.tables.get(name).copied().unwrap_or_default();
        let (ins, upd, hot, del) = (
            a.ins - b.ins,
            a.upd - b.upd,
            a.hot_upd - b.hot_upd,
            a.del - b.del,
        );
        if ins == 0 && upd == 0 && del == 0 {
            continue;
        }
        work.heap_tuples += (ins + upd + del) as f64 / n;
        work.index_tuples += ((ins + upd - hot) * a.indexes) as f64 / n;
        work.table_list.push((
            name.clone(),
            ins as f64 / n,
            upd as f64 / n,
            hot as f64 / n,
            a.indexes,
        ));
    }
    work
}
