//! [`DatabaseSettings`]: the connection, its TLS trust, the pool, the server-side limits and the
//! client-side deadline.

use std::path::PathBuf;

use secrecy::SecretString;

/// Database connection settings.
#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// The PostgreSQL URL; `sslmode=require` (or `prefer`, the default) negotiates TLS.
    pub url: SecretString,
    /// PEM file of the CA certificates to trust, instead of the system roots and of the
    /// compiled-in RDS CAs ([`DatabaseSettings::bundled_rds_ca`] is ignored); the value
    /// `system` ([`crate::db::SYSTEM_ROOTS`]) trusts the system roots instead, as libpq's
    /// `sslrootcert=system` does.
    pub ca_file: Option<PathBuf>,
    /// Trust the RDS CAs compiled into the binary (`crate::rds_ca::RDS_CA_BUNDLE`), instead of
    /// the system roots, when no [`DatabaseSettings::ca_file`] is given. `true` for a connection
    /// configured from `HOOKLEDGER_DB_SECRET_ARN`, `false` for `DATABASE_URL` (its CA is the
    /// user's to give) and from [`DatabaseSettings::with_url`].
    pub bundled_rds_ca: bool,
    /// Connections per execution environment (Lambda runs one delivery at a time per
    /// environment, so one is used; the rest serve local runs and tests).
    pub pool_size: usize,
    /// `statement_timeout`, milliseconds.
    pub statement_timeout_ms: u64,
    /// `lock_timeout`, milliseconds: bounds how long a duplicate waits on an in-flight claim.
    pub lock_timeout_ms: u64,
    /// `idle_in_transaction_session_timeout`, milliseconds.
    pub idle_in_transaction_timeout_ms: u64,
    /// Prepare each statement once per connection and reuse it by name (`true`, the default for
    /// a direct connection). `false` sends every statement unnamed with its parameter types
    /// (one round trip, nothing left on the server): required behind pgbouncer in transaction
    /// mode, and what keeps RDS Proxy sessions unpinned.
    pub statement_cache: bool,
    /// Send the three limits as `SET LOCAL` with every `BEGIN` (`true`, the default). `false`
    /// sends a bare `BEGIN`: for RDS Proxy, which pins a PostgreSQL session on any `SET`; the
    /// limits must then be set on the database role instead (`ALTER ROLE .. SET lock_timeout
    /// = ..`), see the book's `docs/operations/pooler.md`.
    pub transaction_limits: bool,
    /// The receiver's client-side deadline on a delivery's database work, milliseconds
    /// (`HOOKLEDGER_DB_CLIENT_DEADLINE_MS`); `None`: [`DatabaseSettings::client_deadline`]'s
    /// default.
    pub client_deadline_ms: Option<u64>,
}

/// What [`DatabaseSettings::client_deadline`] adds to the statement timeout by default,
/// milliseconds: a statement the server cancels at its timeout still gets its error back.
pub const CLIENT_DEADLINE_MARGIN_MS: u64 = 1_000;

/// The largest `statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout`
/// PostgreSQL accepts, milliseconds (`INT_MAX`; PostgreSQL docs, "Client Connection Defaults").
pub const POSTGRES_MAX_TIMEOUT_MS: u64 = i32::MAX as u64;

impl DatabaseSettings {
    /// How long the receiver waits for a delivery's database work (a pooled connection, the
    /// claim, the handler, the commit) before answering 503 with `Retry-After` and closing
    /// the connection: [`DatabaseSettings::client_deadline_ms`], else the statement timeout
    /// plus [`CLIENT_DEADLINE_MARGIN_MS`] (6 s with the defaults, inside the receiver's 10 s
    /// Lambda timeout). `statement_timeout` is enforced by the server and cannot fire when the
    /// network to it stops answering; this deadline is the client's own.
    pub fn client_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.client_deadline_ms.unwrap_or(
                self.statement_timeout_ms
                    .saturating_add(CLIENT_DEADLINE_MARGIN_MS),
            ),
        )
    }

    /// Settings for `url` with every other field at its default.
    pub fn with_url(url: impl Into<String>) -> Self {
        Self {
            url: SecretString::from(url.into()),
            ca_file: None,
            bundled_rds_ca: false,
            pool_size: 4,
            statement_timeout_ms: 5_000,
            lock_timeout_ms: 2_000,
            idle_in_transaction_timeout_ms: 10_000,
            statement_cache: true,
            transaction_limits: true,
            client_deadline_ms: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{env, GOOD};
    use crate::config::Settings;

    #[test]
    fn the_client_deadline_defaults_to_the_statement_timeout_plus_a_second() {
        let settings = |vars: &[(&str, &str)]| {
            let mut all = vec![
                ("DATABASE_URL", "postgres://localhost/x"),
                ("HOOKLEDGER_SOURCES", GOOD),
            ];
            all.extend_from_slice(vars);
            Settings::from_lookup(env(&all)).unwrap().database
        };
        let ms = |d: std::time::Duration| d.as_millis();
        assert_eq!(ms(settings(&[]).client_deadline()), 6_000);
        assert_eq!(
            ms(settings(&[("HOOKLEDGER_STATEMENT_TIMEOUT_MS", "3000")]).client_deadline()),
            4_000
        );
        assert_eq!(
            ms(settings(&[("HOOKLEDGER_DB_CLIENT_DEADLINE_MS", "2500")]).client_deadline()),
            2_500
        );
    }
}
