//! What the report states about the machine, the server's settings and the ledger's size.

use anyhow::Result;

use crate::setup::Bench;

impl Bench {
    /// The machine (CPU, memory, load average) and the server's version and the settings that
    /// decide write cost, as the report's "Machine" rows.
    pub async fn machine_facts(&self) -> Result<Vec<(String, String)>> {
        let mut facts = Vec::new();
        let model = bench::cpu_model().unwrap_or_else(|| "unknown".to_owned());
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        facts.push(("CPU".to_owned(), format!("{cores} cores, {model}")));
        let mem = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        if let Some(total) = mem.lines().find(|l| l.starts_with("MemTotal")) {
            let kb: f64 = total
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            facts.push(("Memory".to_owned(), format!("{:.0} GiB", kb / 1048576.0)));
        }
        facts.push((
            "Load average at start (1, 5, 15 min)".to_owned(),
            bench::load_average(),
        ));
        let version: String = self.admin.query_one("SELECT version()", &[]).await?.get(0);
        facts.push(("PostgreSQL".to_owned(), version));
        for row in self
            .admin
            .query(
                "SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings \
                 WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', \
                 'wal_level', 'shared_buffers', 'max_wal_size', 'min_wal_size', \
                 'checkpoint_timeout', 'checkpoint_completion_target', 'wal_compression', \
                 'autovacuum', 'effective_io_concurrency', 'work_mem') ORDER BY name",
                &[],
            )
            .await?
        {
            facts.push((format!("`{}`", row.get::<_, String>(0)), row.get(1)));
        }
        Ok(facts)
    }

    /// The ledger now: rows, expired rows, table and index sizes, mean payload bytes.
    pub async fn sizes(&self) -> Result<Vec<(String, String)>> {
        let row = self
            .admin
            .query_one(
                "SELECT count(*), \
                 count(*) FILTER (WHERE claimed_at < now() - interval '30 days'), \
                 pg_size_pretty(pg_table_size('webhook_event')), \
                 pg_size_pretty(pg_indexes_size('webhook_event')), \
                 avg(octet_length(payload))::int8 \
                 FROM webhook_event",
                &[],
            )
            .await?;
        Ok(vec![
            ("Rows".to_owned(), row.get::<_, i64>(0).to_string()),
            ("Expired rows".to_owned(), row.get::<_, i64>(1).to_string()),
            ("Table (heap + TOAST)".to_owned(), row.get(2)),
            ("Indexes".to_owned(), row.get(3)),
            (
                "Mean payload bytes".to_owned(),
                row.get::<_, i64>(4).to_string(),
            ),
        ])
    }
}
