//! Reading the process environment (the only reader of it for the functions): [`Settings`] from
//! the variables, fetching the database and sources secrets from Secrets Manager when they are
//! named, and [`ConsoleSettings`]; the variables are listed in [`crate::config`]'s docs.

use std::path::PathBuf;

use secrecy::ExposeSecret;

use super::audit::AuditSettings;
use super::compatibility::{check_compatible, check_dispatch_fits_lease};
use super::console::{ConsoleAllow, ConsoleSettings};
use super::database::{DatabaseSettings, POSTGRES_MAX_TIMEOUT_MS};
use super::error::ConfigError;
use super::settings::{Settings, SourcesOrigin, SourcesReload};
use super::sources::Sources;
use super::sweep::SweepSettings;
use super::worker::WorkerSettings;

impl Settings {
    /// Reads the settings from the process environment (see [`crate::config`]'s docs for the
    /// variables), fetching `HOOKLEDGER_DB_SECRET_ARN` and `HOOKLEDGER_SOURCES_SECRET_ARN` from
    /// Secrets Manager when they are set. Call once per cold start.
    ///
    /// # Errors
    /// Any [`ConfigError`]: no database or sources, two of them at once, a secret that cannot be
    /// fetched, an invalid source or signing secret, a malformed number.
    pub async fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup_with_secrets(|name| std::env::var(name).ok()).await
    }

    /// Like [`Settings::from_env`], reading variables through `lookup` (for tests).
    ///
    /// # Errors
    /// As [`Settings::from_env`].
    pub async fn from_lookup_with_secrets(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let set = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let db_arn = set("HOOKLEDGER_DB_SECRET_ARN");
        let sources_arn = set("HOOKLEDGER_SOURCES_SECRET_ARN");
        if db_arn.is_none() && sources_arn.is_none() {
            return Self::from_lookup(lookup);
        }
        if db_arn.is_some() && set("DATABASE_URL").is_some() {
            return Err(ConfigError::DatabaseAmbiguous);
        }
        if sources_arn.is_some()
            && (set("HOOKLEDGER_SOURCES").is_some() || set("HOOKLEDGER_SOURCES_FILE").is_some())
        {
            return Err(ConfigError::SourcesAmbiguous);
        }
        let endpoint = match &db_arn {
            Some(_) => db_endpoint(&lookup)?,
            None => crate::secrets::DbEndpoint::default(),
        };
        if db_arn.is_some() && set("HOOKLEDGER_DB_CA_FILE").is_none() {
            // The connector will trust the compiled-in RDS CAs: parse them while the secrets
            // are fetched.
            crate::rds_ca::preload_rds_ca_certificates();
        }
        let secrets = crate::secrets::Secrets::from_env().await;
        let database_url = match &db_arn {
            Some(arn) => Some(secrets.database_url_with(arn, &endpoint).await?),
            None => None,
        };
        let sources = match &sources_arn {
            Some(arn) => Some(secrets.secret_string(arn).await?),
            None => None,
        };
        let mut settings = Self::from_lookup(|name| match name {
            "DATABASE_URL" if database_url.is_some() => {
                database_url.as_ref().map(|s| s.expose_secret().to_owned())
            }
            "HOOKLEDGER_SOURCES" if sources.is_some() => {
                sources.as_ref().map(|s| s.expose_secret().to_owned())
            }
            // Used up: they are in the URL built from the secret.
            name if database_url.is_some() && DB_ENDPOINT_VARS.contains(&name) => None,
            other => lookup(other),
        })?;
        settings.database.bundled_rds_ca = db_arn.is_some();
        if let Some(arn) = sources_arn {
            settings.sources_reload.origin = SourcesOrigin::Secret(arn);
        }
        Ok(settings)
    }

    /// Like [`Settings::from_env`], reading variables through `lookup` (for tests).
    ///
    /// # Errors
    /// As [`Settings::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let url =
            lookup("DATABASE_URL")
                .filter(|url| !url.is_empty())
                .ok_or(ConfigError::Missing(
                    "DATABASE_URL (or HOOKLEDGER_DB_SECRET_ARN)",
                ))?;
        if let Some(var) = DB_ENDPOINT_VARS
            .into_iter()
            .find(|var| lookup(var).is_some_and(|v| !v.is_empty()))
        {
            return Err(ConfigError::Incompatible {
                first: "DATABASE_URL",
                second: var,
                rule: "HOOKLEDGER_DB_HOST, HOOKLEDGER_DB_PORT and HOOKLEDGER_DB_NAME complete \
                       the secret of HOOKLEDGER_DB_SECRET_ARN; with DATABASE_URL, put the host, \
                       port and database name in the URL"
                    .to_owned(),
            });
        }
        let mut sources_reload = SourcesReload::default();
        let json = match (
            lookup("HOOKLEDGER_SOURCES").filter(|v| !v.is_empty()),
            lookup("HOOKLEDGER_SOURCES_FILE").filter(|v| !v.is_empty()),
        ) {
            (Some(json), None) => json,
            (None, Some(path)) => {
                let path = PathBuf::from(path);
                let json =
                    std::fs::read_to_string(&path).map_err(|source| ConfigError::SourcesFile {
                        path: path.clone(),
                        source,
                    })?;
                sources_reload.origin = SourcesOrigin::File(path);
                json
            }
            (None, None) => {
                return Err(ConfigError::Missing(
                    "one of HOOKLEDGER_SOURCES, HOOKLEDGER_SOURCES_FILE and HOOKLEDGER_SOURCES_SECRET_ARN",
                ))
            }
            (Some(_), Some(_)) => return Err(ConfigError::SourcesAmbiguous),
        };
        let mut database = DatabaseSettings::with_url(url);
        database.ca_file = lookup("HOOKLEDGER_DB_CA_FILE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        let number = |var: &'static str, default: u64| -> Result<u64, ConfigError> {
            match lookup(var).filter(|v| !v.is_empty()) {
                None => Ok(default),
                Some(value) => match value.trim().parse::<u64>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(ConfigError::Number {
                        var,
                        expected: "a positive integer",
                        value,
                    }),
                },
            }
        };
        database.pool_size = number("HOOKLEDGER_DB_POOL_SIZE", database.pool_size as u64)? as usize;
        // PostgreSQL's limit for these settings (an `int` of milliseconds): a larger value is
        // refused by `SET` on every connection, so it is refused here, at start-up.
        let timeout = |var: &'static str, default: u64| -> Result<u64, ConfigError> {
            let value = number(var, default)?;
            if value > POSTGRES_MAX_TIMEOUT_MS {
                return Err(ConfigError::Number {
                    var,
                    expected: "at most 2147483647 (PostgreSQL's limit, milliseconds)",
                    value: value.to_string(),
                });
            }
            Ok(value)
        };
        database.statement_timeout_ms = timeout(
            "HOOKLEDGER_STATEMENT_TIMEOUT_MS",
            database.statement_timeout_ms,
        )?;
        database.lock_timeout_ms = timeout("HOOKLEDGER_LOCK_TIMEOUT_MS", database.lock_timeout_ms)?;
        database.idle_in_transaction_timeout_ms = timeout(
            "HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS",
            database.idle_in_transaction_timeout_ms,
        )?;
        let flag = |var: &'static str, default: bool| flag(&lookup, var, default);
        if lookup("HOOKLEDGER_DB_CLIENT_DEADLINE_MS").is_some_and(|v| !v.is_empty()) {
            database.client_deadline_ms = Some(number("HOOKLEDGER_DB_CLIENT_DEADLINE_MS", 0)?);
        }
        database.statement_cache = flag("HOOKLEDGER_DB_STATEMENT_CACHE", true)?;
        database.transaction_limits = flag("HOOKLEDGER_DB_TRANSACTION_LIMITS", true)?;
        let mut worker = WorkerSettings::default();
        let bounded = |var: &'static str, default: u64, max: u64| -> Result<u64, ConfigError> {
            let value = number(var, default)?;
            if value > max {
                return Err(ConfigError::Number {
                    var,
                    expected: "within its documented bound",
                    value: value.to_string(),
                });
            }
            Ok(value)
        };
        const DAY_SECS: u64 = 86_400;
        worker.lease_secs = bounded("HOOKLEDGER_LEASE_SECS", worker.lease_secs, DAY_SECS)?;
        worker.batch = bounded("HOOKLEDGER_WORKER_BATCH", worker.batch as u64, 1_000)? as i64;
        worker.margin_ms = bounded("HOOKLEDGER_WORKER_MARGIN_MS", worker.margin_ms, 900_000)?;
        worker.handler_timeout_ms = bounded(
            "HOOKLEDGER_HANDLER_TIMEOUT_MS",
            worker.handler_timeout_ms,
            900_000,
        )?;
        worker.outbox_concurrency = bounded(
            "HOOKLEDGER_OUTBOX_CONCURRENCY",
            u64::from(worker.outbox_concurrency),
            1_000,
        )? as u32;
        worker.backoff.base_secs = bounded(
            "HOOKLEDGER_BACKOFF_BASE_SECS",
            worker.backoff.base_secs,
            DAY_SECS,
        )?;
        worker.backoff.cap_secs = bounded(
            "HOOKLEDGER_BACKOFF_CAP_SECS",
            worker.backoff.cap_secs,
            30 * DAY_SECS,
        )?;
        sources_reload.min_interval = std::time::Duration::from_secs(bounded(
            "HOOKLEDGER_SOURCES_REFRESH_SECS",
            sources_reload.min_interval.as_secs(),
            DAY_SECS,
        )?);
        sources_reload.max_age = std::time::Duration::from_secs(bounded(
            "HOOKLEDGER_SOURCES_MAX_AGE_SECS",
            sources_reload.max_age.as_secs(),
            super::settings::MAX_SOURCES_MAX_AGE.as_secs(),
        )?);
        let mut sweep = SweepSettings::default();
        sweep.batch_size = bounded(
            "HOOKLEDGER_SWEEP_BATCH_SIZE",
            sweep.batch_size as u64,
            100_000,
        )? as i64;
        sweep.max_batches = bounded(
            "HOOKLEDGER_SWEEP_MAX_BATCHES",
            u64::from(sweep.max_batches),
            100_000,
        )? as u32;
        sweep.pause_ms = bounded("HOOKLEDGER_SWEEP_PAUSE_MS", sweep.pause_ms, 60_000)?;
        sweep.duty_percent = bounded("HOOKLEDGER_SWEEP_DUTY_PERCENT", sweep.duty_percent, 100)?;
        sweep.margin_ms = bounded("HOOKLEDGER_SWEEP_MARGIN_MS", sweep.margin_ms, 900_000)?;
        sweep.rejected_retention_days = bounded(
            "HOOKLEDGER_REJECTED_RETENTION_DAYS",
            u64::from(sweep.rejected_retention_days),
            u64::from(crate::retention::MAX_RETENTION_DAYS),
        )? as u32;
        let mut audit = AuditSettings::default();
        audit.stuck_after_secs = bounded(
            "HOOKLEDGER_AUDIT_STUCK_AFTER_SECS",
            audit.stuck_after_secs,
            DAY_SECS,
        )?;
        audit.idle_in_transaction_after_secs = bounded(
            "HOOKLEDGER_AUDIT_IDLE_IN_TRANSACTION_SECS",
            audit.idle_in_transaction_after_secs,
            DAY_SECS,
        )?;
        check_compatible(&database, &worker)?;
        let sources = Sources::from_json(&json)?;
        check_dispatch_fits_lease(&sources, &worker)?;
        let payload_keys = payload_keys(
            &lookup,
            bounded(
                "HOOKLEDGER_DATA_KEY_ROTATION_SECS",
                crate::privacy::keys::DEFAULT_ROTATION.as_secs(),
                DAY_SECS,
            )?,
        )?;
        if payload_keys.is_none() {
            if let Some(source) = sources.iter().find(|s| s.encrypt_payload) {
                return Err(ConfigError::Source {
                    name: source.name.clone(),
                    problem: "encrypt_payload needs a master key: set HOOKLEDGER_KMS_KEY_ID (or \
                              HOOKLEDGER_PAYLOAD_KEYS / HOOKLEDGER_PAYLOAD_KEYS_FILE locally)"
                        .to_owned(),
                });
            }
        }
        Ok(Self {
            payload_keys,
            sweep,
            audit,
            database,
            sources,
            sources_reload,
            worker,
            worker_function: lookup("HOOKLEDGER_WORKER_FUNCTION").filter(|v| !v.is_empty()),
        })
    }
}

impl ConsoleSettings {
    /// Reads its variables from the process environment, once at cold start.
    ///
    /// # Errors
    /// [`ConfigError::Missing`] without `HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN`;
    /// [`ConfigError::ConsoleOpenToAnyone`] when none of the allow rule's lists
    /// ([`ConsoleAllow`]) is given; [`ConfigError::Number`] for a `HOOKLEDGER_CONSOLE_REDRIVE`
    /// that is not a boolean.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`ConsoleSettings::from_env`], reading variables through `lookup` (for tests).
    ///
    /// # Errors
    /// As [`ConsoleSettings::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let csrf_secret_arn = lookup("HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN")
            .filter(|v| !v.trim().is_empty())
            .ok_or(ConfigError::Missing("HOOKLEDGER_CONSOLE_CSRF_SECRET_ARN"))?;
        let list = |var: &str| -> Vec<String> {
            lookup(var)
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|entry| !entry.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let allow = ConsoleAllow {
            scopes: list("HOOKLEDGER_CONSOLE_REQUIRED_SCOPES"),
            subjects: list("HOOKLEDGER_CONSOLE_ALLOWED_SUBJECTS"),
            email_domains: list("HOOKLEDGER_CONSOLE_ALLOWED_EMAIL_DOMAINS")
                .into_iter()
                .map(|domain| domain.trim_start_matches('@').to_ascii_lowercase())
                .collect(),
            groups: list("HOOKLEDGER_CONSOLE_ALLOWED_GROUPS"),
        };
        if allow.is_empty() {
            return Err(ConfigError::ConsoleOpenToAnyone);
        }
        Ok(Self {
            csrf_secret_arn,
            redrive: flag(&lookup, "HOOKLEDGER_CONSOLE_REDRIVE", false)?,
            allow,
        })
    }
}

/// A `true`/`false` variable (`on`/`off`, `1`/`0`; any case): `default` when unset or empty.
///
/// # Errors
/// [`ConfigError::Number`] for any other value.
fn flag(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: bool,
) -> Result<bool, ConfigError> {
    match lookup(var)
        .filter(|v| !v.is_empty())
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None => Ok(default),
        Some("true" | "on" | "1") => Ok(true),
        Some("false" | "off" | "0") => Ok(false),
        Some(other) => Err(ConfigError::Number {
            var,
            expected: "true or false",
            value: other.to_owned(),
        }),
    }
}

/// The variables that override or supply the database secret's `host`, `port` and `dbname`.
const DB_ENDPOINT_VARS: [&str; 3] = [
    "HOOKLEDGER_DB_HOST",
    "HOOKLEDGER_DB_PORT",
    "HOOKLEDGER_DB_NAME",
];

/// `HOOKLEDGER_DB_HOST`, `HOOKLEDGER_DB_PORT` and `HOOKLEDGER_DB_NAME`, validated (an empty
/// value is unset, as for every variable): a host or name must not be blank, nor hold
/// whitespace, a comma (libpq's host list separator) or a quote; a port is 1 to 65535.
///
/// # Errors
/// [`ConfigError::Number`] naming the variable and what was expected.
pub fn db_endpoint(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<crate::secrets::DbEndpoint, ConfigError> {
    let name = |var: &'static str| -> Result<Option<String>, ConfigError> {
        match lookup(var).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(value)
                if value.trim().is_empty()
                    || value
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control() || ",'\\\"".contains(c)) =>
            {
                Err(ConfigError::Number {
                    var,
                    expected: "a non-blank name without whitespace, commas or quotes",
                    value,
                })
            }
            Some(value) => Ok(Some(value)),
        }
    };
    let port = match lookup("HOOKLEDGER_DB_PORT").filter(|v| !v.is_empty()) {
        None => None,
        Some(value) => match value.trim().parse::<u16>() {
            Ok(port) if port > 0 => Some(port),
            _ => {
                return Err(ConfigError::Number {
                    var: "HOOKLEDGER_DB_PORT",
                    expected: "a port number from 1 to 65535",
                    value,
                })
            }
        },
    };
    Ok(crate::secrets::DbEndpoint {
        host: name("HOOKLEDGER_DB_HOST")?,
        port,
        dbname: name("HOOKLEDGER_DB_NAME")?,
    })
}

/// Payload encryption's master key from the environment: at most one of
/// `HOOKLEDGER_KMS_KEY_ID`, `HOOKLEDGER_PAYLOAD_KEYS` (the local keys' JSON) and
/// `HOOKLEDGER_PAYLOAD_KEYS_FILE`; `rotation_secs` the data keys' rotation period.
///
/// # Errors
/// [`ConfigError::Incompatible`] for two of them, [`ConfigError::PayloadKeys`] for local keys
/// that cannot be used (the message never holds key material).
fn payload_keys(
    lookup: &impl Fn(&str) -> Option<String>,
    rotation_secs: u64,
) -> Result<Option<std::sync::Arc<crate::privacy::keys::PayloadKeys>>, ConfigError> {
    use crate::privacy::keys::PayloadKeys;
    use crate::privacy::wrap::LocalKeys;
    let set = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
    let rotation = std::time::Duration::from_secs(rotation_secs);
    let keys = match (
        set("HOOKLEDGER_KMS_KEY_ID"),
        set("HOOKLEDGER_PAYLOAD_KEYS"),
        set("HOOKLEDGER_PAYLOAD_KEYS_FILE"),
    ) {
        (None, None, None) => return Ok(None),
        (Some(key_id), None, None) => PayloadKeys::kms(key_id.trim().to_owned(), rotation),
        (None, Some(json), None) => PayloadKeys::local(
            LocalKeys::from_json(&json).map_err(|error| ConfigError::PayloadKeys {
                var: "HOOKLEDGER_PAYLOAD_KEYS",
                problem: error.to_string(),
            })?,
            rotation,
        ),
        (None, None, Some(path)) => PayloadKeys::local(
            LocalKeys::from_file(std::path::Path::new(&path)).map_err(|error| {
                ConfigError::PayloadKeys {
                    var: "HOOKLEDGER_PAYLOAD_KEYS_FILE",
                    problem: error.to_string(),
                }
            })?,
            rotation,
        ),
        _ => {
            return Err(ConfigError::Incompatible {
                first: "HOOKLEDGER_KMS_KEY_ID",
                second: "HOOKLEDGER_PAYLOAD_KEYS(_FILE)",
                rule: "set one master key for payload encryption: a KMS key in AWS, local keys \
                       elsewhere"
                    .to_owned(),
            })
        }
    };
    Ok(Some(std::sync::Arc::new(keys)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{env, GOOD};

    /// Found by `make fuzz` (target `settings_env`, dev/fuzz/regressions/settings_env/): a timeout
    /// past what PostgreSQL takes overflowed the client deadline's sum (a panic in a debug
    /// build, a deadline of 999 ms in a release build); PostgreSQL refuses such a
    /// `statement_timeout` anyway (`SET` fails for every delivery).
    #[test]
    fn a_database_timeout_past_postgresqls_limit_is_refused_at_start_up() {
        for var in [
            "HOOKLEDGER_STATEMENT_TIMEOUT_MS",
            "HOOKLEDGER_LOCK_TIMEOUT_MS",
            "HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS",
        ] {
            for value in ["18446744073709551615", "2147483648"] {
                let vars = [
                    ("DATABASE_URL", "postgres://localhost/x"),
                    ("HOOKLEDGER_SOURCES", GOOD),
                    (var, value),
                ];
                match Settings::from_lookup(env(&vars)) {
                    Err(ConfigError::Number { var: named, .. }) => assert_eq!(named, var),
                    other => panic!("{var}={value}: {other:?}"),
                }
            }
        }
        // PostgreSQL's own maximum (INT_MAX milliseconds) is accepted.
        let vars = [
            ("DATABASE_URL", "postgres://localhost/x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_STATEMENT_TIMEOUT_MS", "2147483647"),
            ("HOOKLEDGER_IDLE_IN_TRANSACTION_TIMEOUT_MS", "2147483647"),
        ];
        let database = Settings::from_lookup(env(&vars)).unwrap().database;
        assert_eq!(database.client_deadline().as_millis(), 2_147_484_647);
    }

    #[test]
    fn settings_read_the_environment_and_fail_closed() {
        let settings = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://localhost/x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_LOCK_TIMEOUT_MS", "250"),
        ]))
        .unwrap();
        assert_eq!(settings.database.lock_timeout_ms, 250);
        assert_eq!(settings.database.pool_size, 4);
        assert!(!format!("{settings:?}").contains("whsec_a"));

        let missing = Settings::from_lookup(env(&[("HOOKLEDGER_SOURCES", GOOD)]));
        assert!(matches!(
            missing,
            Err(ConfigError::Missing(
                "DATABASE_URL (or HOOKLEDGER_DB_SECRET_ARN)"
            ))
        ));
        let none = Settings::from_lookup(env(&[("DATABASE_URL", "postgres://x")]));
        assert!(matches!(
            none,
            Err(ConfigError::Missing(
                "one of HOOKLEDGER_SOURCES, HOOKLEDGER_SOURCES_FILE and HOOKLEDGER_SOURCES_SECRET_ARN"
            ))
        ));
        let both = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_SOURCES_FILE", "/nonexistent"),
        ]));
        assert!(matches!(both, Err(ConfigError::SourcesAmbiguous)));
        let file = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES_FILE", "/nonexistent/sources.json"),
        ]));
        assert!(matches!(file, Err(ConfigError::SourcesFile { .. })));
        let bad_number = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_DB_POOL_SIZE", "0"),
        ]));
        assert!(matches!(bad_number, Err(ConfigError::Number { .. })));
    }

    #[test]
    fn settings_remember_where_the_sources_came_from() {
        let inline = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES", GOOD),
        ]))
        .unwrap();
        assert_eq!(inline.sources_reload, SourcesReload::default());
        assert_eq!(
            inline.sources_reload.min_interval,
            std::time::Duration::from_secs(60)
        );

        let path =
            std::env::temp_dir().join(format!("hookledger-config-{}.json", std::process::id()));
        std::fs::write(&path, GOOD).unwrap();
        let file = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://x"),
            ("HOOKLEDGER_SOURCES_FILE", path.to_str().unwrap()),
            ("HOOKLEDGER_SOURCES_REFRESH_SECS", "5"),
            ("HOOKLEDGER_SOURCES_MAX_AGE_SECS", "120"),
        ]));
        let _ = std::fs::remove_file(&path);
        let file = file.unwrap();
        assert_eq!(file.sources_reload.origin, SourcesOrigin::File(path));
        assert_eq!(
            file.sources_reload.min_interval,
            std::time::Duration::from_secs(5)
        );
        assert_eq!(
            file.sources_reload.max_age,
            std::time::Duration::from_secs(120)
        );
        assert_eq!(
            inline.sources_reload.max_age,
            std::time::Duration::from_secs(300)
        );

        for bad in ["0", "86401", "soon"] {
            let error = Settings::from_lookup(env(&[
                ("DATABASE_URL", "postgres://x"),
                ("HOOKLEDGER_SOURCES", GOOD),
                ("HOOKLEDGER_SOURCES_REFRESH_SECS", bad),
            ]));
            assert!(matches!(error, Err(ConfigError::Number { .. })), "{bad}");
        }
        for bad in ["0", "3601", "soon"] {
            let error = Settings::from_lookup(env(&[
                ("DATABASE_URL", "postgres://x"),
                ("HOOKLEDGER_SOURCES", GOOD),
                ("HOOKLEDGER_SOURCES_MAX_AGE_SECS", bad),
            ]));
            assert!(matches!(error, Err(ConfigError::Number { .. })), "{bad}");
        }
    }

    #[test]
    fn the_database_host_port_and_name_variables_are_validated() {
        let endpoint = |vars: &[(&str, &str)]| db_endpoint(env(vars));
        assert_eq!(
            endpoint(&[]).unwrap(),
            crate::secrets::DbEndpoint::default()
        );
        let full = endpoint(&[
            (
                "HOOKLEDGER_DB_HOST",
                "hookledger.proxy-abc.eu-west-1.rds.amazonaws.com",
            ),
            ("HOOKLEDGER_DB_PORT", "5432"),
            ("HOOKLEDGER_DB_NAME", "hookledger"),
        ])
        .unwrap();
        assert_eq!(
            full.host.as_deref(),
            Some("hookledger.proxy-abc.eu-west-1.rds.amazonaws.com")
        );
        assert_eq!(full.port, Some(5432));
        assert_eq!(full.dbname.as_deref(), Some("hookledger"));
        for (var, bad) in [
            ("HOOKLEDGER_DB_PORT", "0"),
            ("HOOKLEDGER_DB_PORT", "65536"),
            ("HOOKLEDGER_DB_PORT", "54x"),
            ("HOOKLEDGER_DB_HOST", "   "),
            ("HOOKLEDGER_DB_HOST", "a.example,b.example"),
            ("HOOKLEDGER_DB_HOST", "db.example sslmode=disable"),
            ("HOOKLEDGER_DB_NAME", "x' sslmode='disable"),
        ] {
            let error = endpoint(&[(var, bad)]).unwrap_err();
            assert!(
                matches!(&error, ConfigError::Number { var: v, .. } if *v == var),
                "{var}={bad:?}: {error}"
            );
            assert!(error.to_string().contains(var), "{error}");
        }
    }

    #[test]
    fn the_database_host_port_and_name_variables_are_refused_with_database_url() {
        for var in DB_ENDPOINT_VARS {
            let error = Settings::from_lookup(env(&[
                ("DATABASE_URL", "postgres://localhost/x"),
                ("HOOKLEDGER_SOURCES", GOOD),
                (var, "5432"),
            ]))
            .unwrap_err();
            assert!(
                matches!(error, ConfigError::Incompatible { first: "DATABASE_URL", second, .. } if second == var),
                "{var}: {error}"
            );
        }
        let settings = Settings::from_lookup(env(&[
            ("DATABASE_URL", "postgres://localhost/x"),
            ("HOOKLEDGER_SOURCES", GOOD),
            ("HOOKLEDGER_DB_HOST", ""),
        ]))
        .unwrap();
        assert!(
            !settings.database.bundled_rds_ca,
            "DATABASE_URL keeps the system roots only"
        );
    }
}
