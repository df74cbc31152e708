//! The auditor timed: every statement of `shared::audit::sql` (and the sweep's two it
//! reuses) and the whole `shared::audit::peek`, warm, on the auditor's ledger, with each plan.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use shared::config::AuditSettings;
use shared::db::{Connection, Sql};
use tokio_postgres::types::ToSql;

use crate::plan::plan_text;
use crate::setup::Bench;
use crate::sources::AUDIT_SOURCE_NAMES;
use crate::traffic::pct;

/// Timed runs of each auditor statement (after 3 warm-up runs).
pub const AUDIT_RUNS: usize = 20;

/// The auditor timed on one ledger.
pub struct AuditTimes {
    pub rows: i64,
    pub load_secs: f64,
    /// Rows by status, and completed past retention.
    pub mix: Vec<(String, i64)>,
    pub sizes: Vec<(String, String)>,
    pub statements: Vec<StatementTime>,
    pub peek_median_ms: f64,
    pub peek_p95_ms: f64,
    /// What the audit reported, in one line.
    pub findings: String,
}

/// One statement timed.
pub struct StatementTime {
    pub name: String,
    pub median_ms: f64,
    pub p95_ms: f64,
    /// `EXPLAIN (ANALYZE, BUFFERS)`.
    pub plan: String,
}

impl StatementTime {
    /// The plan's top node and the indexes it reads, e.g. `Limit; webhook_event_due_idx`.
    pub fn plan_summary(&self) -> String {
        let top = self
            .plan
            .lines()
            .next()
            .and_then(|l| l.split("  (").next())
            .unwrap_or("?")
            .trim()
            .to_owned();
        let mut indexes: Vec<String> = Vec::new();
        for line in self.plan.lines() {
            let Some(name) = line
                .find(" using ")
                .map(|at| &line[at + 7..])
                .or_else(|| {
                    line.find("Bitmap Index Scan on ")
                        .map(|at| &line[at + 21..])
                })
                .and_then(|rest| rest.split_whitespace().next())
            else {
                continue;
            };
            let scan = if line.contains("Index Only Scan") {
                " (index only)"
            } else if line.contains("Bitmap") {
                " (bitmap)"
            } else {
                ""
            };
            let entry = format!("`{name}`{scan}");
            if !name.is_empty() && !indexes.contains(&entry) {
                indexes.push(entry);
            }
        }
        if self.plan.contains("Seq Scan on webhook_event") {
            indexes.push("**Seq Scan on webhook_event**".to_owned());
        }
        if indexes.is_empty() {
            top
        } else {
            format!("{top}; {}", indexes.join(", "))
        }
    }

    /// The plan's `Execution Time`, milliseconds.
    pub fn execution_ms(&self) -> f64 {
        self.plan
            .lines()
            .find_map(|l| l.trim().strip_prefix("Execution Time: "))
            .and_then(|v| v.trim_end_matches(" ms").parse().ok())
            .unwrap_or(f64::NAN)
    }
}

/// `sql` with `params` on `conn` inside one transaction with custom plans (as the audit runs
/// it), rolled back: 3 warm-up runs, then [`AUDIT_RUNS`] timed ones (microseconds, sorted;
/// client round trip included).
async fn time_statement(
    conn: &Connection,
    sql: &'static Sql,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<u64>> {
    conn.begin().await?;
    conn.batch_execute("SET LOCAL plan_cache_mode = force_custom_plan")
        .await?;
    let statement = conn.prepare(sql).await?;
    let mut times = Vec::with_capacity(AUDIT_RUNS);
    for run in 0..AUDIT_RUNS + 3 {
        let started = Instant::now();
        conn.query(&statement, params).await?;
        if run >= 3 {
            times.push(started.elapsed().as_micros() as u64);
        }
    }
    conn.batch_execute("ROLLBACK").await?;
    times.sort_unstable();
    Ok(times)
}

impl Bench {
    /// The auditor's ledger ([`Bench::load_audit_ledger`]), and every statement the audit
    /// issues timed on it.
    pub async fn auditor_ledger(&self, rows: i64) -> Result<AuditTimes> {
        let load_secs = self.load_audit_ledger(rows).await?;
        step!(
            self,
            "loaded {rows} rows in {load_secs:.0} s; timing the auditor"
        );
        let mut mix = Vec::new();
        for row in self
            .admin
            .query(
                "SELECT status::text, count(*) FROM webhook_event GROUP BY 1 ORDER BY 1",
                &[],
            )
            .await?
        {
            mix.push((row.get::<_, String>(0), row.get::<_, i64>(1)));
        }
        let past: i64 = self
            .admin
            .query_one(
                "SELECT count(*) FROM webhook_event \
                 WHERE status = 'completed' AND claimed_at < now() - interval '30 days'",
                &[],
            )
            .await?
            .get(0);
        mix.push(("completed past retention".to_owned(), past));
        let sizes = self.sizes().await?;

        let conn = self.pool.get().await?;
        let settings = AuditSettings::default();
        let now = SystemTime::now();
        // Warm: the whole audit a few times.
        for _ in 0..3 {
            shared::audit::peek(&conn, &self.audit_sources, &settings, now).await?;
        }
        let mut peek = Vec::new();
        let mut last_report = None;
        for _ in 0..AUDIT_RUNS {
            let t = Instant::now();
            let report = shared::audit::peek(&conn, &self.audit_sources, &settings, now).await?;
            peek.push(t.elapsed().as_micros() as u64);
            last_report = Some(report);
        }
        peek.sort_unstable();
        let findings = last_report.map_or_else(String::new, |r| {
            let total =
                |f: fn(&shared::audit::SourceAudit) -> u64| r.sources.values().map(f).sum::<u64>();
            format!(
                "stuck_claims {}, backlog_due {}, past_retention {}, dead_letters {}, \
                 dead_letters_new {}, ordering_ties_new {} (all sources)",
                total(|a| a.stuck_claims),
                total(|a| a.backlog_due),
                total(|a| a.past_retention),
                total(|a| a.dead_letters),
                total(|a| a.dead_letters_new),
                total(|a| a.ordering_ties_new)
            )
        });

        // The parameters as `shared::audit` issues them on a first run at `now`.
        let cap = shared::audit::CAP as i64;
        let keys = shared::audit::STUCK_KEYS_LOGGED as i64;
        let pids = shared::audit::IDLE_PIDS_LOGGED as i64;
        let idle_after = settings.idle_in_transaction_after_secs as i64;
        let claimed_before = now - Duration::from_secs(settings.stuck_after_secs);
        let since = now - shared::audit::FIRST_RUN_WINDOW;
        use shared::audit::sql as q;
        let global: Vec<(&str, &'static Sql, Vec<&(dyn ToSql + Sync)>)> = vec![
            ("LOCK_RUN", &q::LOCK_RUN, vec![]),
            (
                "STUCK_SUMMARY",
                &q::STUCK_SUMMARY,
                vec![&claimed_before, &now, &cap],
            ),
            (
                "STUCK_KEYS",
                &q::STUCK_KEYS,
                vec![&claimed_before, &now, &keys],
            ),
            ("BACKLOG", &q::BACKLOG, vec![&now, &cap]),
            ("TIES_SINCE", &q::TIES_SINCE, vec![&since, &now, &cap]),
            (
                "IDLE_IN_TRANSACTION",
                &q::IDLE_IN_TRANSACTION,
                vec![&idle_after, &pids],
            ),
            (
                "sweep SOURCES_PRESENT",
                &shared::sweep::sql::SOURCES_PRESENT,
                vec![],
            ),
            ("RECORD_RUN", &q::RECORD_RUN, vec![&now]),
        ];
        let mut times = Vec::new();
        for (name, sql, params) in &global {
            let runs = time_statement(&conn, sql, params).await?;
            let plan = self.explain_analyze(sql, params).await?;
            times.push(StatementTime {
                name: (*name).to_owned(),
                median_ms: pct(&runs, 0.5),
                p95_ms: pct(&runs, 0.95),
                plan,
            });
        }
        // Per source: every source timed, the slowest (by median) reported.
        let per_source: [(&str, &'static Sql); 4] = [
            ("sweep OLDEST_KEY", &shared::sweep::sql::OLDEST_KEY),
            ("NEWEST_KEY", &q::NEWEST_KEY),
            ("PAST_RETENTION", &q::PAST_RETENTION),
            ("DEAD_LETTERS", &q::DEAD_LETTERS),
        ];
        for (name, sql) in per_source {
            let mut slowest: Option<StatementTime> = None;
            for source in AUDIT_SOURCE_NAMES {
                let retention = self.audit_sources.retention(source);
                let (completed_cutoff, dead_cutoff) =
                    (retention.completed_cutoff(now), retention.dead_cutoff(now));
                let params: Vec<&(dyn ToSql + Sync)> = match name {
                    "PAST_RETENTION" => vec![&source, &completed_cutoff, &dead_cutoff, &cap],
                    "DEAD_LETTERS" => vec![&source, &since, &now, &cap],
                    _ => vec![&source],
                };
                let runs = time_statement(&conn, sql, &params).await?;
                let median = pct(&runs, 0.5);
                if slowest.as_ref().is_none_or(|s| median > s.median_ms) {
                    slowest = Some(StatementTime {
                        name: format!("{name} (slowest source: {source})"),
                        median_ms: median,
                        p95_ms: pct(&runs, 0.95),
                        plan: self.explain_analyze(sql, &params).await?,
                    });
                }
            }
            times.extend(slowest);
        }
        Ok(AuditTimes {
            rows,
            load_secs,
            mix,
            sizes,
            statements: times,
            peek_median_ms: pct(&peek, 0.5),
            peek_p95_ms: pct(&peek, 0.95),
            findings,
        })
    }

    /// `EXPLAIN (ANALYZE, BUFFERS)` of `sql` with `params`, with custom plans as the audit
    /// runs it, rolled back.
    async fn explain_analyze(&self, sql: &Sql, params: &[&(dyn ToSql + Sync)]) -> Result<String> {
        let statement = self
            .admin
            .prepare_typed(
                &format!("EXPLAIN (ANALYZE, BUFFERS) {}", sql.text),
                sql.types,
            )
            .await?;
        self.admin
            .batch_execute("BEGIN; SET LOCAL plan_cache_mode = force_custom_plan")
            .await?;
        let rows = self.admin.query(&statement, params).await;
        self.admin.batch_execute("ROLLBACK").await?;
        Ok(plan_text(&rows?))
    }
}
