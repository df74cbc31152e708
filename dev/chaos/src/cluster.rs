//! The harness's own PostgreSQL: `scripts/postgres.sh start DIR` with
//! `HOOKLEDGER_PG_DURABLE=1` (fsync, synchronous_commit and full_page_writes on: a restart
//! scenario must not lose a committed row), stopped (and its directory deleted) at the end, on
//! an error and on Ctrl-C ([`Cluster::stop`], also on drop). One fresh database per scenario
//! ([`Cluster::database`]), migrated as the tests migrate theirs (the ledger's migrations, the
//! handlers' sets with the examples), plus `chaos_effects`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use shared::config::DatabaseSettings;

/// A running throwaway cluster.
#[derive(Debug)]
pub struct Cluster {
    /// The directory `scripts/postgres.sh` owns (data in `<dir>/data`, log `<dir>/server.log`,
    /// the unix socket in `<dir>`).
    pub dir: PathBuf,
    /// `<dir>/data`, for `pg_ctl -D`.
    pub data_dir: PathBuf,
    /// The server's `bin` directory (`pg_ctl`, `psql`).
    pub bin_dir: PathBuf,
    /// `postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable`.
    pub url: String,
    /// The TCP port.
    pub port: u16,
    script: PathBuf,
    stopped: std::sync::atomic::AtomicBool,
}

/// A fresh database of the cluster.
#[derive(Debug, Clone)]
pub struct Database {
    /// Its name.
    pub name: String,
    /// Its URL (`sslmode=disable`).
    pub url: String,
}

impl Database {
    /// A new connection (its driver runs on a spawned task).
    ///
    /// # Errors
    /// The server is unreachable.
    pub async fn connect(&self) -> Result<tokio_postgres::Client> {
        connect(&self.url).await
    }
}

/// `server` (a `postgres://.../<db>?...` URL) with its database replaced by `name`.
pub fn database_url(server: &str, name: &str) -> String {
    let (base, query) = server.split_once('?').unwrap_or((server, ""));
    let base = match base.rfind('/') {
        Some(slash) if base[..slash].ends_with(|c: char| c != '/') => &base[..slash],
        _ => base,
    };
    if query.is_empty() {
        format!("{base}/{name}")
    } else {
        format!("{base}/{name}?{query}")
    }
}

/// Creates database `name` on the server at `server_url` (dropped first if it exists), runs
/// the project's migrations and the handlers' sets (examples on), then creates
/// `chaos_effects`.
///
/// # Errors
/// A statement or a migration fails.
pub async fn prepare_database(server_url: &str, name: &str) -> Result<Database> {
    let admin = connect(server_url).await?;
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await?;
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await?;
    let url = database_url(server_url, name);
    let settings = DatabaseSettings::with_url(url.clone());
    shared::db::migrate_with(&settings, &::handlers::examples::migrations())
        .await
        .context("migrating the scenario's database")?;
    let client = connect(&url).await?;
    client
        .batch_execute(crate::handlers::EFFECTS_TABLE)
        .await
        .context("creating chaos_effects")?;
    Ok(Database {
        name: name.to_owned(),
        url,
    })
}

/// Connects to `url` without TLS; the connection's driver runs on a spawned task.
///
/// # Errors
/// The server is unreachable.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting to the chaos cluster")?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

fn pg_bindir() -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    dirs.sort();
    if let Some(dir) = dirs.into_iter().rev().find(|d| d.join("pg_ctl").exists()) {
        return Ok(dir);
    }
    let out = Command::new("sh")
        .args(["-c", "command -v pg_ctl"])
        .output()
        .context("looking for pg_ctl")?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    match Path::new(&path).parent() {
        Some(dir) if !path.is_empty() => Ok(dir.to_path_buf()),
        _ => bail!("pg_ctl not found (scripts/postgres.sh install)"),
    }
}

impl Cluster {
    /// Starts a durable cluster in `dir` (created; must not exist or be empty) with
    /// `<repo>/scripts/postgres.sh`; `extra_options` is appended to the server's command
    /// line (`HOOKLEDGER_PG_OPTIONS`, e.g. `-c max_connections=400`).
    ///
    /// # Errors
    /// The script fails or prints no URL.
    pub fn start(repo: &Path, dir: &Path, extra_options: &str) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let script = repo.join("scripts/postgres.sh");
        let out = Command::new(&script)
            .arg("start")
            .arg(dir)
            .env("HOOKLEDGER_PG_DURABLE", "1")
            .env("HOOKLEDGER_PG_OPTIONS", extra_options)
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            bail!(
                "scripts/postgres.sh start failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let url = String::from_utf8_lossy(&out.stdout)
            .lines()
            .rev()
            .find(|l| l.starts_with("postgres://"))
            .map(str::to_owned)
            .context("scripts/postgres.sh printed no URL")?;
        let port = url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next())
            .and_then(|p| p.parse().ok())
            .context("no port in the cluster's URL")?;
        Ok(Self {
            data_dir: dir.join("data"),
            dir: dir.to_path_buf(),
            bin_dir: pg_bindir()?,
            url,
            port,
            script,
            stopped: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `pg_ctl`'s path.
    pub fn pg_ctl(&self) -> PathBuf {
        self.bin_dir.join("pg_ctl")
    }

    /// A command that runs `program` as the cluster's owner (`runuser -u postgres --` when
    /// this process is root, as scripts/postgres.sh does; else directly).
    pub fn as_owner(&self, program: &Path) -> Command {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    /// The URL of database `name` on this cluster.
    pub fn url_of(&self, name: &str) -> String {
        database_url(&self.url, name)
    }

    /// Creates database `name` (dropped first if it exists), runs the project's migrations
    /// and the handlers' sets (examples on), then creates `chaos_effects`.
    ///
    /// # Errors
    /// A statement or a migration fails.
    pub async fn database(&self, name: &str) -> Result<Database> {
        prepare_database(&self.url, name).await
    }

    /// Stops the cluster and deletes its directory (idempotent).
    pub fn stop(&self) {
        if self.stopped.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let _ = Command::new(&self.script)
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_database_url_swaps_only_the_database() {
        assert_eq!(
            super::database_url(
                "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
                "x"
            ),
            "postgres://postgres@127.0.0.1:5432/x?sslmode=disable"
        );
        assert_eq!(
            super::database_url("postgres://u@h:1/db", "y"),
            "postgres://u@h:1/y"
        );
    }
}
