//! The ledgers measured on: the expired and live rows of the sweep phases and the auditor's
//! mix, each loaded with one `INSERT ... SELECT generate_series`, then `VACUUM (ANALYZE)`.

use std::time::Instant;

use anyhow::{Context, Result};

use crate::setup::Bench;

impl Bench {
    /// Loads the expired rows (`refill`: only those missing, after batches deleted some).
    /// Returns the seconds it took.
    pub async fn load_expired(&self, refill: bool) -> Result<f64> {
        let started = Instant::now();
        let sql = format!(
            "{LOAD_EXPIRED}{}",
            if refill {
                " ON CONFLICT (source, event_id) DO NOTHING"
            } else {
                ""
            }
        );
        self.admin
            .execute(&sql, &[&1i64, &self.args.expired_rows])
            .await
            .context("loading the expired rows")?;
        Ok(started.elapsed().as_secs_f64())
    }

    /// Deletes what expired rows are left and loads all of them again (a fresh ledger).
    pub async fn reload(&self) -> Result<()> {
        self.delete_unbatched().await?;
        self.vacuum_analyze().await?;
        let secs = self.load_expired(false).await?;
        step!(self, "reloaded in {secs:.1} s");
        self.vacuum_analyze().await
    }

    /// Loads the live rows ([`LOAD_LIVE`], `--live-rows` of them).
    pub async fn load_live(&self) -> Result<()> {
        self.admin
            .execute(LOAD_LIVE, &[&1i64, &self.args.live_rows])
            .await
            .context("loading the live rows")?;
        Ok(())
    }

    /// `VACUUM (ANALYZE) webhook_event`, then `CHECKPOINT`.
    pub async fn vacuum_analyze(&self) -> Result<()> {
        // Two messages: VACUUM refuses to run inside a multi-statement (implicit) transaction.
        self.admin
            .batch_execute("VACUUM (ANALYZE) webhook_event")
            .await?;
        self.admin.batch_execute("CHECKPOINT").await?;
        Ok(())
    }

    /// The auditor's ledger: `TRUNCATE`, then `rows` rows in the mix of [`LOAD_AUDIT_MIX`]
    /// (and 0.05% as many ordering ties), `VACUUM (ANALYZE)`. Returns the seconds it took.
    pub async fn load_audit_ledger(&self, rows: i64) -> Result<f64> {
        self.admin
            .batch_execute(
                "TRUNCATE webhook_event, ordering_tie; UPDATE audit_run SET last_run_at = NULL",
            )
            .await?;
        let started = Instant::now();
        self.admin
            .execute(LOAD_AUDIT_MIX, &[&rows])
            .await
            .context("loading the auditor's ledger")?;
        self.admin
            .execute(LOAD_AUDIT_TIES, &[&(rows / 2000).max(10)])
            .await?;
        self.vacuum_analyze().await?;
        self.admin
            .batch_execute("VACUUM (ANALYZE) ordering_tie")
            .await?;
        Ok(started.elapsed().as_secs_f64())
    }
}

/// The expired rows: `$1..=$2` numbered, `github`/`stripe` alternating, claimed from 60 days
/// ago to 31 days ago in insertion order, 1.0-1.8 KB payloads.
const LOAD_EXPIRED: &str = "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, payload_identity, status, attempts,
     response_status, response_body, claimed_at, completed_at)
SELECT source, 'evt_old_' || i, 'payment_intent.succeeded', digest,
       convert_to(rpad('{\"id\":\"evt_old_' || i || '\",\"object\":\"event\",\"data\":\"',
                       1000 + (i * 7919 % 800)::int, md5(i::text)), 'UTF8'),
       digest, 'completed', 1, 200, '{\"received\":true}'::jsonb, at, at + interval '40 ms'
FROM (
    SELECT i,
           CASE WHEN i % 2 = 0 THEN 'stripe' ELSE 'github' END AS source,
           sha256(int8send(i)) AS digest,
           now() - interval '60 days' + (i - $1) * (interval '29 days' / ($2 - $1 + 1)) AS at
    FROM generate_series($1::int8, $2::int8) AS i
) AS g";

/// The auditor's ledger, `$1` rows numbered from 0, four sources (by a multiplicative hash of
/// the row number, so each status class below spreads over all four):
/// - `completed`: the bulk, claimed over the last 29 days 23 hours in insertion order (a ledger
///   appended in time order, the sweeper keeping up), 1.0-1.8 KB payloads; one in 10,000
///   claimed up to 10 minutes past the 30-day retention (what accrues between two sweeps);
/// - `dead`: one in 400 (0.25%: dead letters are kept 90 days), died over the last 88 days;
/// - `claimed`: one in 5,000 (the deferred backlog), claimed 0-20 minutes ago and due since, so
///   about three quarters are stuck by the 5-minute rule (a worker that is behind);
/// - `failed`: one in 10,000, next attempt from 10 minutes ago to 50 minutes ahead;
/// - `processing`: one in 20,000, leases from 10 s expired to 110 s ahead.
const LOAD_AUDIT_MIX: &str = "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, payload_identity, status, attempts,
     last_error, response_status, response_body, claimed_at, lease_expires_at, next_attempt_at,
     completed_at, dead_at)
SELECT source, 'evt_audit_' || i, 'payment_intent.succeeded', digest,
       convert_to(rpad('{\"id\":\"evt_audit_' || i || '\",\"object\":\"event\",\"data\":\"',
                       1000 + (i * 7919 % 800)::int, md5(i::text)), 'UTF8'),
       digest, status,
       CASE status WHEN 'failed' THEN 3 WHEN 'dead' THEN 8 ELSE 1 END,
       CASE WHEN status IN ('failed', 'dead') THEN 'handler: upstream answered 503' END,
       CASE WHEN status = 'completed' THEN 200 END,
       CASE WHEN status = 'completed' THEN '{\"received\":true}'::jsonb END,
       at,
       CASE WHEN status = 'processing' THEN now() + ((i / 20000 * 397) % 120 - 10) * interval '1 s' END,
       CASE WHEN status IN ('claimed', 'processing') THEN at
            WHEN status = 'failed' THEN now() + ((i / 10000 * 397) % 3600 - 600) * interval '1 s' END,
       CASE WHEN status = 'completed' THEN at + interval '40 ms' END,
       CASE WHEN status = 'dead' THEN at + interval '2 hours' END
FROM (
    SELECT i, source, digest, status,
           CASE status
               WHEN 'completed' THEN
                   CASE WHEN i % 10000 = 1
                        THEN now() - interval '30 days' - (i % 600) * interval '1 s'
                        ELSE now() - interval '29 days 23 hours'
                             + i * (interval '29 days 23 hours' / $1::int8) END
               WHEN 'dead' THEN now() - interval '3 hours'
                                - interval '88 days' * ((i * 7919) % 1000) / 1000.0
               WHEN 'claimed' THEN now() - ((i / 5000 * 397) % 1200) * interval '1 s'
               WHEN 'failed' THEN now() - ((i / 10000 * 397) % 86400) * interval '1 s'
               ELSE now() - ((i / 20000 * 397) % 300) * interval '1 s'
           END AS at
    FROM (
        SELECT i,
               (ARRAY['stripe', 'github', 'shopify', 'stripe-deferred'])
                   [1 + (i * 2654435761 / 4096) % 4] AS source,
               sha256(int8send(i)) AS digest,
               (CASE WHEN i % 10000 = 5 THEN 'failed'
                     WHEN i % 5000 = 7 THEN 'claimed'
                     WHEN i % 20000 = 9 THEN 'processing'
                     WHEN i % 400 = 3 THEN 'dead'
                     ELSE 'completed' END)::event_status AS status
        FROM generate_series(1, $1::int8) AS i
    ) AS g
) AS h";

/// Ordering ties for the auditor's ledger: `$1` of them over the last 30 days, a few in the
/// last five minutes.
const LOAD_AUDIT_TIES: &str = "\
INSERT INTO ordering_tie (source, entity_type, entity_id, version, applied_event_id, event_id,
                          seen_at)
SELECT 'stripe', 'subscription', 'sub_' || i, 1, 'evt_a' || i, 'evt_b' || i,
       now() - interval '30 days' * i / $1::int8
FROM generate_series(0, $1::int8 - 1) AS i";

/// The live rows: claimed during the last 29 days.
const LOAD_LIVE: &str = "\
INSERT INTO webhook_event
    (source, event_id, event_type, payload_digest, payload, payload_identity, status, attempts,
     response_status, response_body, claimed_at, completed_at)
SELECT source, 'evt_recent_' || i, 'payment_intent.succeeded', digest,
       convert_to(rpad('{\"id\":\"evt_recent_' || i || '\",\"data\":\"',
                       1000 + (i * 7919 % 800)::int, md5(i::text)), 'UTF8'),
       digest, 'completed', 1, 200, '{\"received\":true}'::jsonb, at, at + interval '40 ms'
FROM (
    SELECT i,
           CASE WHEN i % 2 = 0 THEN 'stripe' ELSE 'github' END AS source,
           sha256(int8send(i)) AS digest,
           now() - interval '29 days' + (i - $1) * (interval '29 days' / ($2 - $1 + 1)) AS at
    FROM generate_series($1::int8, $2::int8) AS i
) AS g";
