//! PostgreSQL access: connection settings, TLS, the connection pool, and the migrations runner.
//!
//! The limits (`statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`) are
//! set per transaction with `SET LOCAL`, pipelined with `BEGIN` ([`Connection::begin`]); no
//! start-up options and no session `SET`, so connections work behind a transaction-mode pooler
//! (pgbouncer) and stay unpinned behind RDS Proxy. See [`session`] for the statement cache.
//!
//! TLS ([`tls_connector`]) is native-tls over OpenSSL (vendored: compiled in, so the binary
//! runs on any glibc) and always verifies: the server's chain must end at a trusted root and
//! its certificate must name the host the client asked for (`host`, also when `hostaddr` gives
//! the address). Trusted is one set of roots ([`tls_connector`]): the certificates of
//! `HOOKLEDGER_DB_CA_FILE` when given (`system`: the system roots), else, for a connection
//! configured from `HOOKLEDGER_DB_SECRET_ARN`, the RDS CAs compiled in
//! ([`RDS_CA_BUNDLE`](crate::rds_ca::RDS_CA_BUNDLE)), else the system roots, which native-tls
//! loads itself from what openssl-probe finds (`SSL_CERT_FILE`/`SSL_CERT_DIR`, else the
//! distribution's bundle: on Amazon Linux 2023 `/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem`,
//! on Debian `/etc/ssl/certs/ca-certificates.crt`; vendored OpenSSL's own default directory is
//! not relied on). A secret-configured connection string always says `sslmode=require`, so a
//! server without TLS is refused; with `DATABASE_URL` the URL's `sslmode` decides whether TLS is
//! required, never whether it is verified.

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod, Runtime};
use postgres_native_tls::MakeTlsConnector;
use secrecy::ExposeSecret;

use crate::config::DatabaseSettings;

mod background_tls;
pub mod deadline;
pub mod error;
pub mod grants;
pub mod migrations;
pub(crate) mod pipeline;
pub mod session;

pub use error::{describe, describe_pool, is_unavailable, NoConnection, PgError};
pub use migrations::{migrate_client, migrate_with, MigrationError, MigrationReport, MigrationSet};
pub use session::{Connection, Pool, Prepared, Session, Sql};

/// Embedded forward-only migrations from `migrations/` (refinery naming `V<n>__<verb>_<object>.sql`).
mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// How long to wait for a new connection (TCP + TLS + start-up), seconds.
pub const CONNECT_TIMEOUT_SECS: u64 = 5;

/// How long a caller waits for a free pooled connection before giving up, seconds.
pub const POOL_WAIT_SECS: u64 = 10;

/// Why the database could not be reached or prepared. Each variant's text says what failed
/// here; the cause (the client's, the pool's, refinery's) is its `source`, printed once by a
/// chain printer (`crate::error_chain::error_chain`).
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL does not parse as a PostgreSQL connection string (fatal: the configuration).
    #[error("DATABASE_URL is not a valid PostgreSQL URL")]
    Url(#[source] PgError),
    /// The CA file could not be read or parsed (fatal: the configuration).
    #[error(transparent)]
    Ca(#[from] crate::rds_ca::CaError),
    /// The TLS connector could not be built (fatal: OpenSSL's initialisation).
    #[error("cannot build the TLS connector")]
    Tls(#[from] native_tls::Error),
    /// The pool could not be built (fatal: its configuration).
    #[error("cannot build the connection pool")]
    Pool(#[from] deadpool_postgres::BuildError),
    /// Connecting failed (retryable: the database may be starting or unreachable).
    #[error("cannot connect to PostgreSQL")]
    Connect(#[source] PgError),
    /// A migration failed (fatal until the migration or the database is fixed, except a
    /// timeout: [`MigrationError`]).
    #[error("migration failed")]
    Migrate(#[from] MigrationError),
    /// A statement around the migrations (their checks, the grants) failed (retryable when
    /// [`PgError::is_unavailable`]).
    #[error("statement failed")]
    Statement(#[source] PgError),
}

impl From<refinery::Error> for DbError {
    fn from(error: refinery::Error) -> Self {
        DbError::Migrate(MigrationError::from(error))
    }
}

/// The connection configuration for `settings`: the URL, an application name and the connect
/// timeout. No start-up `options`: pgbouncer refuses them (and with `ignore_startup_parameters`
/// silently drops them); the limits travel with each transaction instead ([`Session`]).
///
/// # Errors
/// [`DbError::Url`] when the URL does not parse.
pub fn pg_config(settings: &DatabaseSettings) -> Result<tokio_postgres::Config, DbError> {
    let mut config = tokio_postgres::Config::from_str(settings.url.expose_secret())
        .map_err(|e| DbError::Url(e.into()))?;
    if config.get_application_name().is_none() {
        config.application_name("hookledger");
    }
    config.connect_timeout(Duration::from_secs(CONNECT_TIMEOUT_SECS));
    let plaintext = plaintext_hosts(&config);
    if !plaintext.is_empty() {
        tracing::warn!(
            hosts = %plaintext.join(","),
            "the database is not on loopback and TLS is not required (sslmode is not \
             require): the connection may be unencrypted; add sslmode=require to DATABASE_URL"
        );
    }
    Ok(config)
}

/// The hosts of `config` that may be reached without TLS across a network: every TCP host
/// that is not loopback (`localhost`, 127.0.0.0/8, `::1`; compared as written, no name is
/// resolved) when the `sslmode` is not `require` (the URL's default is `prefer`, which
/// falls back to plain text when the server offers no TLS, or an attacker on the path says
/// so). Unix sockets never leave the host. Empty: nothing to warn about.
pub fn plaintext_hosts(config: &tokio_postgres::Config) -> Vec<String> {
    if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        return Vec::new();
    }
    let mut hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .filter_map(|host| match host {
            tokio_postgres::config::Host::Tcp(name) if !crate::loopback::is_loopback_host(name) => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    // `hostaddr` is what is connected to (the host then names the certificate only).
    for (i, addr) in config.get_hostaddrs().iter().enumerate() {
        if crate::loopback::is_loopback_ip(*addr) {
            if let Some(tokio_postgres::config::Host::Tcp(name)) = config.get_hosts().get(i) {
                hosts.retain(|h| h != name);
            }
        } else if !hosts.contains(&addr.to_string()) {
            hosts.push(addr.to_string());
        }
    }
    hosts
}

/// The TLS connector. Trusted, as one set (issue 29; like libpq's `sslrootcert`):
/// - [`DatabaseSettings::ca_file`] when set: the certificates of that PEM file and nothing else;
///   the value [`SYSTEM_ROOTS`] (`system`) names the system roots instead;
/// - else [`RDS_CA_BUNDLE`](crate::rds_ca::RDS_CA_BUNDLE) when [`DatabaseSettings::bundled_rds_ca`]
///   (a secret-configured connection): the RDS CAs and nothing else;
/// - else the system roots: what native-tls finds through openssl-probe (`SSL_CERT_FILE` /
///   `SSL_CERT_DIR`, else the distribution's bundle such as Amazon Linux 2023's
///   `/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem` or Debian's
///   `/etc/ssl/certs/ca-certificates.crt`).
///
/// native-tls 0.2.18 parses the system roots in every connector it builds and drops them when
/// others replace them, so the build costs the same CPU either way; what replacing them saves is
/// the memory they held (about 0.8 MiB; `bench-cold`).
///
/// Verification is always on: the chain must end at a trusted root and the certificate must
/// name the host connected to (native-tls checks both; nothing here turns either off). With
/// the URL's default `sslmode=prefer` TLS is used when the server offers it; `sslmode=require`
/// (always, for a secret-configured connection) refuses a server without TLS.
///
/// # Errors
/// [`DbError::Ca`] when the CA file cannot be read or holds no certificate;
/// [`DbError::Tls`] when the connector cannot be built.
pub fn tls_connector(settings: &DatabaseSettings) -> Result<MakeTlsConnector, DbError> {
    let mut builder = native_tls::TlsConnector::builder();
    let roots = match &settings.ca_file {
        Some(path) if path.as_os_str() == SYSTEM_ROOTS => None,
        Some(path) => {
            let pem = std::fs::read(path)
                .map_err(|e| crate::rds_ca::CaError::unreadable(&path.display().to_string(), e))?;
            Some(crate::rds_ca::parse_ca_pem(
                &path.display().to_string(),
                &pem,
            )?)
        }
        None if settings.bundled_rds_ca => Some(crate::rds_ca::rds_ca_certificates()?),
        None => None,
    };
    if let Some(roots) = roots {
        builder.disable_built_in_roots(true);
        for certificate in roots {
            builder.add_root_certificate(certificate);
        }
    }
    Ok(MakeTlsConnector::new(builder.build()?))
}

/// The [`DatabaseSettings::ca_file`] (`HOOKLEDGER_DB_CA_FILE`) that trusts the system roots, as
/// libpq's `sslrootcert=system` does (PostgreSQL 16): for a secret-configured connection whose
/// server's certificate is not from the RDS CAs, such as an RDS Proxy's (Amazon Root CA 1).
pub const SYSTEM_ROOTS: &str = "system";

/// The connection pool. Connections are opened lazily, reused across invocations, and
/// checked before reuse (a closed connection is dropped and a new one opened).
///
/// # Errors
/// [`DbError`] when the URL or pool configuration is invalid. No connection is attempted
/// here, and the TLS connector ([`tls_connector`]) is built on a background thread: a CA file
/// that cannot be loaded fails each connect, with its reason, instead.
pub fn pool(settings: &DatabaseSettings) -> Result<Pool, DbError> {
    // The connector loads the system trust store: built off the cold start's path.
    let tls = background_tls::BackgroundTls::start(settings);
    let manager = Manager::from_config(
        pg_config(settings)?,
        tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let inner = deadpool_postgres::Pool::builder(manager)
        .max_size(settings.pool_size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(POOL_WAIT_SECS)))
        .create_timeout(Some(Duration::from_secs(CONNECT_TIMEOUT_SECS)))
        .build()?;
    Ok(Pool::new(inner, Session::new(settings)).with_tls(tls))
}

/// One connection outside the pool (migrations, tooling). The connection task is spawned on
/// the current Tokio runtime and ends when the client is dropped.
///
/// # Errors
/// [`DbError::Connect`] when the server cannot be reached or refuses the login.
pub async fn connect(settings: &DatabaseSettings) -> Result<tokio_postgres::Client, DbError> {
    let (client, connection) = pg_config(settings)?
        .connect(tls_connector(settings)?)
        .await
        .map_err(|e| DbError::Connect(e.into()))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(%error, "database connection closed with an error");
        }
    });
    Ok(client)
}

/// Applies every pending migration of the ledger's own set (forward-only; refinery records
/// them in `refinery_schema_history`): [`migrate_with`] with no other set. Safe to run
/// repeatedly; returns the names applied this time.
///
/// # Errors
/// As [`migrate_with`].
pub async fn migrate(settings: &DatabaseSettings) -> Result<Vec<String>, DbError> {
    migrate_with(settings, &[]).await
}

/// The embedded migrations' names and versions, e.g. `V1__create_webhook_event`.
pub fn migration_names() -> Vec<String> {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| m.to_string())
        .collect()
}

static NOW: Sql = Sql {
    text: "SELECT now()",
    types: &[],
};

/// The database's clock (`now()`): what stamps `claimed_at` and `dead_at`, so the scheduled
/// functions and the CLI judge ages against it rather than against their host's clock.
///
/// # Errors
/// `tokio_postgres::Error` when the query fails.
pub async fn now(conn: &Connection) -> Result<std::time::SystemTime, tokio_postgres::Error> {
    let statement = conn.prepare(&NOW).await?;
    let rows = conn.query(&statement, &[]).await?;
    match rows.first() {
        Some(row) => row.try_get(0),
        // SELECT now() returns one row; none would be a broken server: use the host's clock.
        None => Ok(std::time::SystemTime::now()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rds_ca::{rds_ca_certificates, RDS_CA_BUNDLE};

    /// The committed bundle's certificate count (`shared/certs/rds-global-bundle.pem`, its
    /// header says the same); a refresh that changes it updates this.
    const RDS_CA_COUNT: usize = 87;

    fn common_name(certificate: &native_tls::Certificate, issuer: bool) -> String {
        let x509 = openssl::x509::X509::from_der(&certificate.to_der().unwrap()).unwrap();
        let name = if issuer {
            x509.issuer_name()
        } else {
            x509.subject_name()
        };
        let entry = name
            .entries_by_nid(openssl::nid::Nid::COMMONNAME)
            .next()
            .unwrap();
        String::from_utf8_lossy(entry.data().as_slice()).into_owned()
    }

    #[test]
    fn the_compiled_in_rds_bundle_holds_the_unexpired_rds_root_cas() {
        let certificates = rds_ca_certificates().unwrap();
        assert_eq!(certificates.len(), RDS_CA_COUNT);
        let now = openssl::asn1::Asn1Time::days_from_now(0).unwrap();
        let mut names = Vec::new();
        for certificate in &certificates {
            let subject = common_name(certificate, false);
            assert!(
                subject.starts_with("Amazon RDS ") && subject.contains(" Root CA "),
                "{subject}"
            );
            assert_eq!(common_name(certificate, true), subject, "self-signed root");
            let x509 = openssl::x509::X509::from_der(&certificate.to_der().unwrap()).unwrap();
            assert!(x509.not_after() > now, "{subject} has expired");
            names.push(subject);
        }
        // The three key types of the current generation, for a region a deployment is likely
        // to use.
        for name in [
            "Amazon RDS us-east-1 Root CA RSA2048 G1",
            "Amazon RDS us-east-1 Root CA RSA4096 G1",
            "Amazon RDS us-east-1 Root CA ECC384 G1",
            "Amazon RDS eu-west-1 Root CA RSA2048 G1",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing");
        }
        let header = std::str::from_utf8(RDS_CA_BUNDLE).unwrap();
        assert!(
            header.contains(&format!("{RDS_CA_COUNT} certificates")),
            "the bundle's provenance header names its count"
        );
    }

    #[test]
    fn a_host_off_loopback_without_required_tls_is_warned_about() {
        let hosts = |url: &str| plaintext_hosts(&tokio_postgres::Config::from_str(url).unwrap());
        let none: Vec<String> = Vec::new();
        // The default sslmode (prefer) and disable, to another machine: warned.
        assert_eq!(hosts("postgres://u:p@db.example.com/x"), ["db.example.com"]);
        assert_eq!(
            hosts("postgres://u@10.0.0.5:5432/x?sslmode=prefer"),
            ["10.0.0.5"]
        );
        assert_eq!(
            hosts("postgres://u@db.example.com/x?sslmode=disable"),
            ["db.example.com"]
        );
        assert_eq!(
            hosts("host=db.example.com,localhost user=u"),
            ["db.example.com"]
        );
        // `hostaddr` is what is reached.
        assert_eq!(
            hosts("host=localhost hostaddr=10.0.0.5 user=u"),
            ["10.0.0.5"]
        );
        assert_eq!(hosts("host=db.example.com hostaddr=127.0.0.1 user=u"), none);
        // TLS required, loopback, a Unix socket: nothing to say.
        assert_eq!(hosts("postgres://u@db.example.com/x?sslmode=require"), none);
        assert_eq!(hosts("postgres://u:p@localhost:5433/x"), none);
        assert_eq!(hosts("postgres://u@127.0.0.1/x?sslmode=disable"), none);
        assert_eq!(hosts("postgres://u@127.0.1.1/x"), none);
        assert_eq!(hosts("postgres://u@[::1]:5432/x"), none);
        assert_eq!(hosts("host=/var/run/postgresql user=u"), none);
        assert_eq!(hosts("postgres://u@%2Ftmp/x"), none);
    }

    #[test]
    fn the_rds_bundle_is_trusted_only_by_a_secret_configured_connector_without_a_ca_file() {
        // A CA file that does not exist proves which source the connector reads: with one
        // given, the bundle is not what is loaded.
        let mut settings = DatabaseSettings::with_url("postgres://localhost/x");
        settings.bundled_rds_ca = true;
        assert!(tls_connector(&settings).is_ok());
        settings.ca_file = Some("/nonexistent/ca.pem".into());
        assert!(matches!(tls_connector(&settings), Err(DbError::Ca(_))));
        let empty =
            std::env::temp_dir().join(format!("hookledger-empty-ca-{}", std::process::id()));
        std::fs::write(&empty, "# no certificate here\n").unwrap();
        settings.ca_file = Some(empty.clone());
        let error = tls_connector(&settings).map(|_| ()).unwrap_err();
        let error = crate::error_chain::error_chain(&error);
        let _ = std::fs::remove_file(&empty);
        assert!(error.contains("no certificate found"), "{error}");
    }
}
