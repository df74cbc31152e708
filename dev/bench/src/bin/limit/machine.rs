//! The machine, the build, PostgreSQL and pgbench, as the Markdown table both reports start
//! with.

use std::fmt::Write as _;

/// `SHOW name` on `client`, `?` when it fails.
pub async fn show(client: &tokio_postgres::Client, name: &str) -> String {
    match client.query_one(&format!("SHOW {name}"), &[]).await {
        Ok(row) => row.get(0),
        Err(_) => "?".to_owned(),
    }
}

/// The Markdown table of the build, CPU, load average, PostgreSQL and pgbench versions and the
/// server settings that decide write cost.
pub async fn machine_md(client: &tokio_postgres::Client) -> String {
    let cpu = bench::cpu_model().unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = bench::load_average();
    let version: String = client
        .query_one("SELECT version()", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or_default();
    let pgbench = std::process::Command::new("pgbench")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let build = if cfg!(debug_assertions) {
        "**debug** (unoptimised: the in-process receiver's own time is inflated; pgbench and the server-side counts are not)"
    } else {
        "release"
    };
    let mut md = format!(
        "| | |\n|---|---|\n| bench-limit build | {build} |\n| CPU | {cores} cores, {cpu} |\n| Load average at start | {} |\n\
         | PostgreSQL | {version} |\n| pgbench | {pgbench} |\n",
        load
    );
    for name in [
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "wal_level",
        "shared_buffers",
        "max_wal_size",
        "checkpoint_timeout",
        "autovacuum",
        "shared_preload_libraries",
        "pg_stat_statements.track",
        "pg_stat_statements.track_utility",
    ] {
        let _ = writeln!(md, "| `{name}` | {} |", show(client, name).await);
    }
    md
}
