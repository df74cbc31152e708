//! Test your handlers end to end, against a real PostgreSQL (never a mock): depend on this
//! crate from your tests (`[dev-dependencies]`), or copy this one file.
//!
//! ```text
//! let ledger = TestLedger::start(SOURCES, registry, &migrations).await?;
//! let delivery = ledger.signed("stripe", body)?;        // signed as Stripe would
//! let first = ledger.deliver(&delivery).await;           // 200, the handler's effect
//! assert_eq!(ledger.count("SELECT count(*) FROM refunds").await?, 1);
//! let again = ledger.deliver(&delivery).await;           // the provider's retry
//! assert_replayed(&first, &again);                       // the stored response, verbatim
//! ```
//!
//! - [`TestDb`]: a fresh database per test on the server named by `DATABASE_URL`, created
//!   from a template migrated once per set of migrations (`CREATE DATABASE ... TEMPLATE`: fast).
//! - [`TestLedger`]: the receive path (`shared::Receiver`) over such a database with your
//!   sources and registry; [`TestLedger::signed`] signs a body with the source's first secret,
//!   [`TestLedger::deliver`] delivers it (again and again: same bytes, same headers).
//!
//! Tests fail, never skip, without `DATABASE_URL`.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use http::{HeaderMap, HeaderName, HeaderValue};
use shared::config::DatabaseSettings;
use shared::db::MigrationSet;
use shared::handler::Registry;
use shared::{Receiver, Reply, Settings};
use tokio::sync::Mutex;

/// The server URL the tests use: `DATABASE_URL` (e.g. `postgres://postgres@127.0.0.1:5432/postgres`;
/// the role must be allowed to create databases).
///
/// # Errors
/// When `DATABASE_URL` is not set.
pub fn server_url() -> Result<String> {
    std::env::var("DATABASE_URL").map_err(|_| {
        anyhow!("DATABASE_URL is not set: run the tests with `make test` (it starts PostgreSQL)")
    })
}

/// `url` (`postgres://...`) with its database name replaced by `database`, the query kept.
///
/// # Errors
/// Never for a `postgres://` URL (the `Result` keeps callers uniform).
pub fn url_with_database(url: &str, database: &str) -> Result<String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let path_start = base[scheme_end..]
        .find('/')
        .map(|i| i + scheme_end)
        .unwrap_or(base.len());
    let mut out = format!("{}/{}", &base[..path_start], database);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

/// A fresh database for one test (left behind when the test ends: the server is throwaway).
#[derive(Debug, Clone)]
pub struct TestDb {
    /// The database's name.
    pub name: String,
    /// Its URL.
    pub url: String,
}

impl TestDb {
    /// A fresh database migrated with the ledger's migrations and then `sets` (e.g.
    /// `handlers::migrations()`), cloned from a template made once per distinct list of
    /// migrations (named by their digest, so concurrent test binaries and stale runs never mix
    /// schemas).
    ///
    /// # Errors
    /// No `DATABASE_URL`, an unreachable server, a failing migration.
    pub async fn new(sets: &[MigrationSet]) -> Result<Self> {
        let server = server_url()?;
        let template = template(&server, sets).await?;
        let name = fresh_name("hookledger_test");
        let admin = admin_connect(&server).await?;
        // Several binaries may clone the template at once; PostgreSQL refuses while another
        // session is connected to the template, which only happens during its creation.
        let mut tries = 0;
        loop {
            match admin
                .batch_execute(&format!(
                    "CREATE DATABASE \"{name}\" TEMPLATE \"{template}\""
                ))
                .await
            {
                Ok(()) => break,
                Err(_) if tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e).context("creating the test database"),
            }
        }
        Ok(Self {
            url: url_with_database(&server, &name)?,
            name,
        })
    }

    /// A fresh database with no schema at all (for testing the migrations themselves).
    ///
    /// # Errors
    /// No `DATABASE_URL`, an unreachable server.
    pub async fn empty() -> Result<Self> {
        let server = server_url()?;
        let name = fresh_name("hookledger_test_empty");
        admin_connect(&server)
            .await?
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .context("creating the empty test database")?;
        Ok(Self {
            url: url_with_database(&server, &name)?,
            name,
        })
    }

    /// Settings pointing at this database, with a pool of `pool_size` connections.
    pub fn settings(&self, pool_size: usize) -> DatabaseSettings {
        let mut settings = DatabaseSettings::with_url(self.url.clone());
        settings.pool_size = pool_size;
        settings
    }

    /// This database's URL on another server address (`server`, e.g. a pooler in front of the
    /// same PostgreSQL).
    ///
    /// # Errors
    /// As [`url_with_database`].
    pub fn url_on(&self, server: &str) -> Result<String> {
        url_with_database(server, &self.name)
    }

    /// A plain connection to this database (for assertions and setting up state).
    ///
    /// # Errors
    /// When the database cannot be reached.
    pub async fn connect(&self) -> Result<tokio_postgres::Client> {
        Ok(shared::db::connect(&self.settings(1)).await?)
    }
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

fn fresh_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

async fn admin_connect(server: &str) -> Result<tokio_postgres::Client> {
    let config = tokio_postgres::Config::from_str(server)?;
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Templates this process has made or found.
static TEMPLATES: Mutex<Option<HashSet<String>>> = Mutex::const_new(None);

/// The template database for the ledger's migrations plus `sets`, made on first use.
async fn template(server: &str, sets: &[MigrationSet]) -> Result<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    for set in std::iter::once(&MigrationSet::ledger()).chain(sets) {
        hasher.update(set.table().as_bytes());
        for migration in set.migrations() {
            hasher.update(migration.to_string().as_bytes());
            hasher.update(migration.checksum().to_le_bytes());
        }
    }
    let digest = hex::encode(hasher.finalize());
    let template = format!("hookledger_template_{}", &digest[..16]);
    let mut made = TEMPLATES.lock().await;
    if made.get_or_insert_with(HashSet::new).contains(&template) {
        return Ok(template);
    }
    make_template(server, &template, sets).await?;
    made.get_or_insert_with(HashSet::new)
        .insert(template.clone());
    Ok(template)
}

async fn make_template(server: &str, template: &str, sets: &[MigrationSet]) -> Result<()> {
    let admin = admin_connect(server).await?;
    // One creator at a time across test binaries.
    admin
        .batch_execute("SELECT pg_advisory_lock(727274)")
        .await?;
    let exists = admin
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&template])
        .await?
        .is_some();
    if !exists {
        let building = format!("{template}_building");
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS \"{building}\""))
            .await?;
        admin
            .batch_execute(&format!("CREATE DATABASE \"{building}\""))
            .await?;
        let settings = DatabaseSettings::with_url(url_with_database(server, &building)?);
        shared::db::migrate_with(&settings, sets)
            .await
            .context("migrating the template database")?;
        // Wait for the migration connection to go away before renaming.
        for _ in 0..100 {
            let others: i64 = admin
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1",
                    &[&building],
                )
                .await?
                .get(0);
            if others == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        admin
            .batch_execute(&format!(
                "ALTER DATABASE \"{building}\" RENAME TO \"{template}\""
            ))
            .await?;
    }
    admin
        .batch_execute("SELECT pg_advisory_unlock(727274)")
        .await?;
    Ok(())
}

/// A delivery as a provider sends it: the source, headers (signature included) and raw body.
/// Deliver it as often as you like: every time the same bytes.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The source name (the path segment of `/webhooks/{source}`).
    pub source: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The raw body.
    pub body: Vec<u8>,
}

impl Delivery {
    /// The same delivery with header `name` set to `value` (e.g. GitHub's `x-github-event`
    /// and `x-github-delivery`, which carry the event type and id).
    ///
    /// # Errors
    /// An invalid header name or value.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self> {
        self.headers.insert(
            HeaderName::from_str(&name.to_ascii_lowercase())?,
            HeaderValue::from_str(value)?,
        );
        Ok(self)
    }
}

/// The receive path over a fresh database: your sources, your registry, signed deliveries.
#[derive(Debug)]
pub struct TestLedger {
    /// The database (connect to it for your own assertions).
    pub db: TestDb,
    /// The receive path every delivery goes through, exactly as the receiver function's.
    pub receiver: Receiver,
    /// The settings the receiver was built from.
    pub settings: Settings,
    /// The time deliveries are signed at and received at, unix seconds (the start time).
    pub now: i64,
}

impl TestLedger {
    /// A ledger over a fresh database migrated with the ledger's migrations and `migrations`
    /// (your handlers' sets, e.g. `handlers::migrations()`), receiving for `sources_json` (the
    /// sources JSON as in `HOOKLEDGER_SOURCES`) with `registry`'s handlers.
    ///
    /// # Errors
    /// No `DATABASE_URL`, invalid sources, a failing migration.
    pub async fn start(
        sources_json: &str,
        registry: Registry,
        migrations: &[MigrationSet],
    ) -> Result<Self> {
        let db = TestDb::new(migrations).await?;
        let url = db.url.clone();
        let settings = Settings::from_lookup(|name| match name {
            "DATABASE_URL" => Some(url.clone()),
            "HOOKLEDGER_SOURCES" => Some(sources_json.to_owned()),
            _ => None,
        })
        .map_err(|e| anyhow!("the sources or settings are invalid: {e}"))?;
        let pool = shared::db::pool(&settings.database)?;
        let receiver = Receiver::new(&settings, pool, registry);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)?;
        Ok(Self {
            db,
            receiver,
            settings,
            now,
        })
    }

    /// `body` signed for `source` as its provider would at [`TestLedger::now`], with the
    /// source's first secret (`content-type: application/json`; Standard Webhooks sources get
    /// a `webhook-id` derived from the body, so the same body is the same event).
    ///
    /// # Errors
    /// `source` is not configured.
    pub fn signed(&self, source: &str, body: impl Into<Vec<u8>>) -> Result<Delivery> {
        use sha2::Digest;
        let config = self
            .settings
            .sources
            .get(source)
            .ok_or_else(|| anyhow!("no source {source:?} in the sources"))?;
        let body = body.into();
        let msg_id = format!("msg_{}", &hex::encode(sha2::Sha256::digest(&body))[..24]);
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        for (name, value) in config.verifier.sign(0, &msg_id, self.now, &body) {
            headers.insert(HeaderName::from_str(&name)?, HeaderValue::from_str(&value)?);
        }
        Ok(Delivery {
            source: source.to_owned(),
            headers,
            body,
        })
    }

    /// Delivers `delivery` through the receive path at [`TestLedger::now`]: verify, claim,
    /// run the handler, answer. Never fails: every outcome is a [`Reply`].
    pub async fn deliver(&self, delivery: &Delivery) -> Reply {
        self.receiver
            .receive(
                &delivery.source,
                &delivery.headers,
                &delivery.body,
                self.now,
            )
            .await
    }

    /// The single `bigint` a query returns, e.g. `SELECT count(*) FROM refunds`.
    ///
    /// # Errors
    /// The query fails or returns no row.
    pub async fn count(&self, sql: &str) -> Result<i64> {
        let client = self.db.connect().await?;
        Ok(client.query_one(sql, &[]).await?.try_get(0)?)
    }

    /// The ledger status of `(source, event_id)` (`completed`, `dead`, ...), if it has a row.
    ///
    /// # Errors
    /// The query fails.
    pub async fn status(&self, source: &str, event_id: &str) -> Result<Option<String>> {
        let client = self.db.connect().await?;
        let row = client
            .query_opt(
                "SELECT status::text FROM webhook_event WHERE source = $1 AND event_id = $2",
                &[&source, &event_id],
            )
            .await?;
        Ok(row.map(|r| r.get(0)))
    }
}

/// Asserts that `again` is the stored response of `first` replayed: the same status and the
/// same body byte for byte, marked replayed (`Idempotent-Replayed: true`).
///
/// # Panics
/// When it is not.
pub fn assert_replayed(first: &Reply, again: &Reply) {
    assert!(again.replayed, "not a replay: {again:?}");
    assert_eq!(again.status, first.status, "replayed status differs");
    assert_eq!(again.body, first.body, "replayed body differs");
}
