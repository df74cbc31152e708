//! AWS Secrets Manager: the database credentials and the sources JSON, fetched at cold start
//! (docs/architecture.md, "Configuration and secrets"); the receiver re-reads the sources secret after a signature matched
//! none of a source's secrets, at most once a minute (`crate::sources_refresh`). The template
//! passes ARNs, never values.
//!
//! The database secret is RDS-shaped (`username`, `password`, and optionally `host`, `port`,
//! `dbname`): an RDS-managed master secret holds only the first two, so `HOOKLEDGER_DB_HOST`,
//! `HOOKLEDGER_DB_PORT` and `HOOKLEDGER_DB_NAME` ([`DbEndpoint`]) override or supply the rest,
//! e.g. to point a function at an RDS Proxy endpoint. The connection string built from it always
//! says `sslmode=require`, and `crate::db::tls_connector` verifies the server's chain and host
//! name against the RDS CAs compiled into the binary (`crate::rds_ca::RDS_CA_BUNDLE`), or
//! against `HOOKLEDGER_DB_CA_FILE` instead (`system`: the system roots, for an RDS Proxy).
//!
//! The endpoint, region and credentials come from the standard AWS chain; tests point it at a
//! local emulator with `AWS_ENDPOINT_URL_SECRETS_MANAGER`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_sdk_secretsmanager::Client;
use secrecy::SecretString;
use serde_json::Value;

/// The SDK's error for a `GetSecretValue` call.
pub type GetSecretValueSdkError = aws_sdk_secretsmanager::error::SdkError<
    aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError,
>;

/// Why a secret could not be used. The messages name the ARN, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// Secrets Manager refused or could not be reached (retryable: at the next cold start, or
    /// the sources' next re-read).
    #[error("cannot read secret {arn}")]
    Fetch {
        /// The secret's ARN or name.
        arn: String,
        /// The SDK's error: the service's code and message, or the transport's failure; a
        /// refusal never carries the secret's value. Boxed: the SDK's error is large.
        #[source]
        source: Box<GetSecretValueSdkError>,
    },
    /// The secret has no `SecretString` (a binary secret; fatal until the secret is fixed).
    #[error("secret {0} has no SecretString")]
    NotAString(String),
    /// The database secret is not RDS-shaped JSON (fatal until the secret is fixed).
    #[error("secret {arn} is not an RDS-style secret: {problem}")]
    NotRds {
        /// The secret's ARN or name.
        arn: String,
        /// What is missing or wrong (a field name, never a value).
        problem: String,
    },
}

/// A Secrets Manager client built once per execution environment.
#[derive(Debug, Clone)]
pub struct Secrets {
    client: Client,
    /// `GetSecretValue` calls made through this client and its clones.
    reads: Arc<AtomicU64>,
}

impl Secrets {
    /// A client configured from the environment (region, credentials, endpoint overrides).
    pub async fn from_env() -> Self {
        let config = crate::aws::load().await;
        Self {
            client: Client::new(&config),
            reads: Arc::default(),
        }
    }

    /// How many `GetSecretValue` calls this client (and its clones) has made, failed ones
    /// included: what a refresh flood would cost.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The current `SecretString` of `arn`.
    ///
    /// # Errors
    /// [`SecretsError::Fetch`] when the call fails, [`SecretsError::NotAString`] for a binary
    /// secret.
    pub async fn secret_string(&self, arn: &str) -> Result<SecretString, SecretsError> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let output = self
            .client
            .get_secret_value()
            .secret_id(arn)
            .send()
            .await
            .map_err(|e| SecretsError::Fetch {
                arn: arn.to_owned(),
                source: Box::new(e),
            })?;
        output
            .secret_string
            .map(SecretString::from)
            .ok_or_else(|| SecretsError::NotAString(arn.to_owned()))
    }

    /// The database connection string from an RDS-style secret of `arn`, the secret's own
    /// `host`/`port`/`dbname` only; see [`rds_connection_string`].
    ///
    /// # Errors
    /// As [`Secrets::secret_string`] and [`rds_connection_string`].
    pub async fn database_url(&self, arn: &str) -> Result<SecretString, SecretsError> {
        self.database_url_with(arn, &DbEndpoint::default()).await
    }

    /// The database connection string from an RDS-style secret of `arn`, with `endpoint`'s
    /// fields in place of the secret's (`HOOKLEDGER_DB_HOST`/`PORT`/`NAME`); see
    /// [`rds_connection_string_with`].
    ///
    /// # Errors
    /// As [`Secrets::secret_string`] and [`rds_connection_string_with`].
    pub async fn database_url_with(
        &self,
        arn: &str,
        endpoint: &DbEndpoint,
    ) -> Result<SecretString, SecretsError> {
        use secrecy::ExposeSecret;
        let json = self.secret_string(arn).await?;
        rds_connection_string_with(arn, json.expose_secret(), endpoint)
    }
}

/// Where to connect, overriding or supplying an RDS-style secret's `host`, `port` and `dbname`
/// (from `HOOKLEDGER_DB_HOST`, `HOOKLEDGER_DB_PORT`, `HOOKLEDGER_DB_NAME`; validated by
/// `crate::config`). `None` keeps the secret's field; the default overrides nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbEndpoint {
    /// Host name or IP address (e.g. an RDS Proxy endpoint); also the name the server's
    /// certificate must carry.
    pub host: Option<String>,
    /// TCP port, 1 to 65535.
    pub port: Option<u16>,
    /// Database name.
    pub dbname: Option<String>,
}

impl DbEndpoint {
    /// Whether any field is set.
    pub fn is_empty(&self) -> bool {
        self.host.is_none() && self.port.is_none() && self.dbname.is_none()
    }
}

/// Turns an RDS-style secret (`{"username", "password", "host", "port", "dbname"}`, as RDS and
/// its rotation functions write it; `port` a number or a string, `dbname` defaulting to
/// `postgres`) into a key-value connection string with `sslmode=require`:
/// `host='..' port=5432 user='..' password='..' dbname='..' sslmode=require`.
/// [`rds_connection_string_with`] with no overrides.
///
/// # Errors
/// [`SecretsError::NotRds`] when the JSON does not parse or a required field is missing.
pub fn rds_connection_string(arn: &str, json: &str) -> Result<SecretString, SecretsError> {
    rds_connection_string_with(arn, json, &DbEndpoint::default())
}

/// Like [`rds_connection_string`], with `endpoint`'s `host`, `port` and `dbname` in place of
/// the secret's: a secret holding only `username` and `password` (an RDS-managed master
/// secret) works when `endpoint` supplies the host. `port` defaults to 5432, `dbname` to
/// `postgres`.
///
/// # Errors
/// [`SecretsError::NotRds`] when the JSON does not parse, `username` or `password` is missing,
/// neither the secret nor `endpoint` names a host, or the secret's port is not 1 to 65535.
/// The message names fields, never values.
pub fn rds_connection_string_with(
    arn: &str,
    json: &str,
    endpoint: &DbEndpoint,
) -> Result<SecretString, SecretsError> {
    let problem = |problem: &str| SecretsError::NotRds {
        arn: arn.to_owned(),
        problem: problem.to_owned(),
    };
    let value: Value = serde_json::from_str(json).map_err(|_| problem("not JSON"))?;
    let field = |name: &str| -> Result<String, SecretsError> {
        match value.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            _ => Err(problem(&format!("missing {name}"))),
        }
    };
    let username = field("username")?;
    let password = field("password")?;
    let host = match &endpoint.host {
        Some(host) => host.clone(),
        None => field("host").map_err(|_| problem("missing host (or set HOOKLEDGER_DB_HOST)"))?,
    };
    let port = match (endpoint.port, value.get("port")) {
        (Some(port), _) => port,
        (None, None | Some(Value::Null)) => 5432,
        (None, Some(_)) => match field("port")?.parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => return Err(problem("port is not a number from 1 to 65535")),
        },
    };
    let dbname = match &endpoint.dbname {
        Some(dbname) => dbname.clone(),
        None => field("dbname").unwrap_or_else(|_| "postgres".to_owned()),
    };
    Ok(SecretString::from(format!(
        "host={} port={port} user={} password={} dbname={} sslmode=require",
        quote(&host),
        quote(&username),
        quote(&password),
        quote(&dbname)
    )))
}

/// libpq key-value quoting: single quotes around, `\` before `'` and `\`.
fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use std::str::FromStr;

    #[test]
    fn a_refused_read_keeps_the_sdks_error_as_its_cause_printed_once() {
        use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError;
        use aws_sdk_secretsmanager::types::error::ResourceNotFoundException;
        let refused = GetSecretValueError::ResourceNotFoundException(
            ResourceNotFoundException::builder()
                .message("Secrets Manager can't find the specified secret.")
                .build(),
        );
        let response = aws_smithy_runtime_api::http::Response::new(
            aws_smithy_runtime_api::http::StatusCode::try_from(400).unwrap(),
            aws_smithy_types::body::SdkBody::empty(),
        );
        let error = SecretsError::Fetch {
            arn: "arn:db".to_owned(),
            source: Box::new(aws_sdk_secretsmanager::error::SdkError::service_error(
                refused, response,
            )),
        };
        assert_eq!(error.to_string(), "cannot read secret arn:db");
        assert_eq!(
            crate::error_chain::error_chain(&error),
            "cannot read secret arn:db: service error: ResourceNotFoundException: Secrets \
             Manager can't find the specified secret."
        );
    }

    #[test]
    fn an_rds_secret_becomes_a_tls_connection_string_that_round_trips() {
        let json = r#"{"engine":"postgres","username":"app","password":"p'a\\ss w=rd",
                       "host":"db.example.internal","port":5432,"dbname":"ledger"}"#;
        let url = rds_connection_string("arn:db", json).unwrap();
        let config = tokio_postgres::Config::from_str(url.expose_secret()).unwrap();
        assert_eq!(config.get_user(), Some("app"));
        assert_eq!(config.get_password(), Some(&b"p'a\\ss w=rd"[..]));
        assert_eq!(config.get_dbname(), Some("ledger"));
        assert_eq!(config.get_ports(), &[5432]);
        assert_eq!(
            config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
    }

    #[test]
    fn a_string_port_and_a_missing_dbname_are_accepted() {
        let json = r#"{"username":"u","password":"p","host":"h","port":"6432"}"#;
        let url = rds_connection_string("arn:db", json).unwrap();
        let config = tokio_postgres::Config::from_str(url.expose_secret()).unwrap();
        assert_eq!(config.get_ports(), &[6432]);
        assert_eq!(config.get_dbname(), Some("postgres"));
    }

    #[test]
    fn a_malformed_rds_secret_names_the_problem_not_the_value() {
        for (json, expected) in [
            ("nope", "not JSON"),
            (r#"{"password":"hunter2","host":"h"}"#, "missing username"),
            (
                r#"{"username":"u","password":"hunter2","host":"h","port":"x1"}"#,
                "port",
            ),
            (
                r#"{"username":"u","password":"hunter2","host":"h","port":70000}"#,
                "port is not a number from 1 to 65535",
            ),
            (
                r#"{"username":"u","password":"hunter2"}"#,
                "missing host (or set HOOKLEDGER_DB_HOST)",
            ),
        ] {
            let error = rds_connection_string("arn:db", json)
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{error}");
            assert!(!error.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn an_rds_managed_secret_with_only_credentials_takes_host_port_and_name_from_the_endpoint() {
        let json = r#"{"username":"master","password":"pw"}"#;
        let endpoint = DbEndpoint {
            host: Some("proxy.proxy-abc.eu-west-1.rds.amazonaws.com".to_owned()),
            port: Some(6543),
            dbname: Some("hookledger".to_owned()),
        };
        let url = rds_connection_string_with("arn:db", json, &endpoint).unwrap();
        let config = tokio_postgres::Config::from_str(url.expose_secret()).unwrap();
        assert_eq!(
            config.get_hosts(),
            &[tokio_postgres::config::Host::Tcp(
                "proxy.proxy-abc.eu-west-1.rds.amazonaws.com".to_owned()
            )]
        );
        assert_eq!(config.get_ports(), &[6543]);
        assert_eq!(config.get_dbname(), Some("hookledger"));
        assert_eq!(config.get_user(), Some("master"));
        assert_eq!(
            config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
    }

    #[test]
    fn the_endpoint_overrides_the_secrets_own_host_port_and_name_field_by_field() {
        let json = r#"{"username":"u","password":"p","host":"instance.rds.amazonaws.com",
                       "port":5432,"dbname":"ledger"}"#;
        let only_host = DbEndpoint {
            host: Some("proxy.example".to_owned()),
            ..DbEndpoint::default()
        };
        let url = rds_connection_string_with("arn:db", json, &only_host).unwrap();
        let config = tokio_postgres::Config::from_str(url.expose_secret()).unwrap();
        assert_eq!(
            config.get_hosts(),
            &[tokio_postgres::config::Host::Tcp(
                "proxy.example".to_owned()
            )]
        );
        assert_eq!(config.get_ports(), &[5432]);
        assert_eq!(config.get_dbname(), Some("ledger"));
        let none = rds_connection_string("arn:db", json).unwrap();
        assert!(none
            .expose_secret()
            .contains("host='instance.rds.amazonaws.com'"));
    }
}
