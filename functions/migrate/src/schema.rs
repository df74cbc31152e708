//! The database on deploy, as the migrate function does it for the CloudFormation custom
//! resource `Custom::HookledgerSchema`: apply the migrations, provision each function's login
//! role from its secret, and check the connection budget.
//!
//! The resource's properties ([`SchemaProperties`]; CloudFormation sends every scalar as a
//! string):
//!
//! ```text
//! { "Version": "3",
//!   "Logins": [{ "Role": "receiver", "SecretArn": "arn:...", "StatementTimeoutMs": "5000",
//!                "LockTimeoutMs": "2000", "IdleInTransactionTimeoutMs": "10000" }, ...],
//!   "ConnectionBudget": { "UseProxy": "false",
//!                         "Functions": [{ "Name": "receiver", "ReservedConcurrency": "10",
//!                                         "PoolSize": "1" }, ...] } }
//! ```
//!
//! Every login's secret holds at least `username` and `password` (an RDS-style secret). The
//! login becomes a LOGIN role that is a member of `hookledger_<Role>` (migration V14) and of no
//! other `hookledger_` group, with the password stored as a SCRAM-SHA-256 verifier computed
//! here (the plain password never reaches the server, nor its logs), and the given timeouts
//! (milliseconds) as role settings (`ALTER ROLE .. SET`: what RDS Proxy needs, since a
//! session `SET` pins its connection; absent ones are `RESET`).

use std::fmt::Write as _;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use shared::db::{MigrationReport, MigrationSet};

/// Why the schema could not be brought to the requested state. Every message is short and
/// names settings, roles and ARNs, never a password or a connection string; the cause (the
/// database's, Secrets Manager's) is the `source`. Each fails the CloudFormation request (the
/// deploy rolls back); the next deploy tries again.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The function's own database settings could not be read at cold start (the admin
    /// secret missing, unreadable or malformed; a bad `HOOKLEDGER_DB_*` variable): fatal until
    /// the environment or the secret is fixed.
    #[error("the migrate function's database settings: {0}")]
    Settings(String),
    /// The resource properties do not have the documented shape (fatal: the template). The
    /// cause names the field (properties hold ARNs and numbers, never a secret).
    #[error("invalid resource properties")]
    Properties(#[source] serde_json::Error),
    /// A login's secret could not be read from Secrets Manager (retryable: the next request
    /// reads it again).
    #[error("login for {role}")]
    SecretUnreadable {
        /// The function's role (`receiver`, ...).
        role: &'static str,
        /// Secrets Manager's refusal (it names the ARN, never a value).
        #[source]
        source: shared::secrets::SecretsError,
    },
    /// A login's secret lacks `username`/`password` or is not JSON (fatal: the secret).
    #[error("login for {role}: {problem}")]
    Secret {
        /// The function's role (`receiver`, ...).
        role: &'static str,
        /// What went wrong (a field name; never a value).
        problem: String,
    },
    /// A login's username is refused (not a plain identifier, reserved, or privileged).
    #[error("login for {role}: {problem}")]
    Login {
        /// The function's role.
        role: &'static str,
        /// Why.
        problem: String,
    },
    /// The migrations failed (a broken migration, a divergent history, no privilege).
    #[error(transparent)]
    Migrate(#[from] shared::db::DbError),
    /// Waiting for the schema lock (another deploy's migration) failed, e.g. its
    /// `lock_timeout` (retryable: the next deploy gets it).
    #[error("waiting for another deploy's migration")]
    SchemaLock(#[source] shared::db::PgError),
    /// A provisioning or budget statement failed.
    #[error(transparent)]
    Db(#[from] shared::db::PgError),
    /// The reserved connections exceed what the database can take.
    #[error(
        "connection budget exceeded: reserved concurrency x pool size is {reserved}, the \
         database allows {usable} (max_connections minus the reserved ones); lower the \
         reserved concurrency or pool sizes, raise max_connections, or use RDS Proxy"
    )]
    OverBudget {
        /// Sum over the functions of reserved concurrency times pool size.
        reserved: u64,
        /// Usable connections ([`usable_connections`]).
        usable: i64,
    },
}

impl From<tokio_postgres::Error> for SchemaError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Db(error.into())
    }
}

/// A function whose database login the resource provisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FunctionRole {
    /// `hookledger_receiver`.
    Receiver,
    /// `hookledger_worker`.
    Worker,
    /// `hookledger_sweeper`.
    Sweeper,
    /// `hookledger_auditor`.
    Auditor,
    /// `hookledger_replay`.
    Replay,
}

impl FunctionRole {
    /// Every function role, in the template's order.
    pub const ALL: [FunctionRole; 5] = [
        Self::Receiver,
        Self::Worker,
        Self::Sweeper,
        Self::Auditor,
        Self::Replay,
    ];

    /// The lowercase name, e.g. `receiver`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Receiver => "receiver",
            Self::Worker => "worker",
            Self::Sweeper => "sweeper",
            Self::Auditor => "auditor",
            Self::Replay => "replay",
        }
    }

    /// The NOLOGIN group role (migration V14), e.g. `hookledger_receiver`.
    pub fn group_role(self) -> &'static str {
        match self {
            Self::Receiver => "hookledger_receiver",
            Self::Worker => "hookledger_worker",
            Self::Sweeper => "hookledger_sweeper",
            Self::Auditor => "hookledger_auditor",
            Self::Replay => "hookledger_replay",
        }
    }
}

/// Every group role migration V14 creates (the five functions' and `hookledger_handlers`).
pub const GROUP_ROLES: [&str; 6] = [
    "hookledger_receiver",
    "hookledger_worker",
    "hookledger_sweeper",
    "hookledger_auditor",
    "hookledger_replay",
    "hookledger_handlers",
];

/// One entry of `Logins`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct LoginSpec {
    /// Which function's group role the login joins.
    pub role: FunctionRole,
    /// The Secrets Manager secret (ARN or name) holding `username` and `password`.
    pub secret_arn: String,
    /// `statement_timeout` for the role, milliseconds; `None` resets it.
    #[serde(default, deserialize_with = "opt_u64")]
    pub statement_timeout_ms: Option<u64>,
    /// `lock_timeout` for the role, milliseconds; `None` resets it.
    #[serde(default, deserialize_with = "opt_u64")]
    pub lock_timeout_ms: Option<u64>,
    /// `idle_in_transaction_session_timeout` for the role, milliseconds; `None` resets it.
    #[serde(default, deserialize_with = "opt_u64")]
    pub idle_in_transaction_timeout_ms: Option<u64>,
}

/// One function of `ConnectionBudget.Functions`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct FunctionBudget {
    /// The function, e.g. `receiver` (a label: reported, not checked against a list).
    pub name: String,
    /// Its reserved concurrency; 0 means unreserved (it may scale to the account's limit).
    #[serde(deserialize_with = "de_u64")]
    pub reserved_concurrency: u64,
    /// Connections per execution environment (`HOOKLEDGER_DB_POOL_SIZE`).
    #[serde(deserialize_with = "de_u64")]
    pub pool_size: u64,
}

/// `ConnectionBudget`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ConnectionBudget {
    /// Whether the functions connect through RDS Proxy (which multiplexes: no check then).
    #[serde(deserialize_with = "de_bool")]
    pub use_proxy: bool,
    /// The functions that connect.
    #[serde(default)]
    pub functions: Vec<FunctionBudget>,
}

/// The custom resource's `ResourceProperties` (`ServiceToken` and unknown keys are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SchemaProperties {
    /// Any string; changing it makes CloudFormation send an Update (re-run everything).
    #[serde(default)]
    pub version: Option<String>,
    /// The logins to provision.
    #[serde(default)]
    pub logins: Vec<LoginSpec>,
    /// The connection budget to check, if any.
    #[serde(default)]
    pub connection_budget: Option<ConnectionBudget>,
}

impl SchemaProperties {
    /// Parses `ResourceProperties`.
    ///
    /// # Errors
    /// [`SchemaError::Properties`] naming the offending field.
    pub fn from_value(value: &Value) -> Result<Self, SchemaError> {
        if value.is_null() {
            return Ok(Self::default());
        }
        Self::deserialize(value).map_err(SchemaError::Properties)
    }
}

fn scalar_string(value: Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn de_u64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let value = Value::deserialize(deserializer)?;
    scalar_string(value)
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| serde::de::Error::custom("expected a non-negative integer"))
}

fn opt_u64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    match scalar_string(value) {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => s
            .parse::<u64>()
            .map(Some)
            .map_err(|_| serde::de::Error::custom("expected a non-negative integer")),
    }
}

fn de_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    let value = Value::deserialize(deserializer)?;
    match scalar_string(value)
        .map(|s| s.to_ascii_lowercase())
        .as_deref()
    {
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        _ => Err(serde::de::Error::custom("expected \"true\" or \"false\"")),
    }
}

/// A login's credentials, read from its secret.
#[derive(Debug, Clone)]
pub struct LoginCredentials {
    /// The function's role.
    pub role: FunctionRole,
    /// The login role's name (checked by [`check_username`]).
    pub username: String,
    /// Its password.
    pub password: SecretString,
}

/// Reads `username` and `password` from a login secret's JSON.
///
/// # Errors
/// [`SchemaError::Secret`] when the JSON does not parse or lacks either field (never quoting
/// a value); [`SchemaError::Login`] when the username is refused ([`check_username`]).
pub fn credentials(role: FunctionRole, json: &str) -> Result<LoginCredentials, SchemaError> {
    let problem = |problem: &str| SchemaError::Secret {
        role: role.name(),
        problem: problem.to_owned(),
    };
    let value: Value = serde_json::from_str(json).map_err(|_| problem("secret is not JSON"))?;
    let field = |name: &str| match value.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(problem(&format!("secret has no {name}"))),
    };
    let username = field("username")?;
    let password = SecretString::from(field("password")?);
    check_username(role, &username)?;
    Ok(LoginCredentials {
        role,
        username,
        password,
    })
}

/// Refuses a username that is not a plain lowercase-or-mixed SQL identifier of at most 63
/// bytes (`[A-Za-z_][A-Za-z0-9_]*`), or that is reserved (`pg_*`, `rds*`, a `hookledger_`
/// group role, `postgres`, `public`).
///
/// # Errors
/// [`SchemaError::Login`] saying which rule.
pub fn check_username(role: FunctionRole, username: &str) -> Result<(), SchemaError> {
    let refuse = |problem: &str| {
        Err(SchemaError::Login {
            role: role.name(),
            problem: problem.to_owned(),
        })
    };
    let mut bytes = username.bytes();
    let valid = username.len() <= 63
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return refuse("username must be an identifier of [A-Za-z0-9_], at most 63 bytes");
    }
    let lower = username.to_ascii_lowercase();
    if lower.starts_with("pg_")
        || lower.starts_with("rds")
        || GROUP_ROLES.contains(&lower.as_str())
        || lower == "postgres"
        || lower == "public"
    {
        return refuse("username is reserved");
    }
    Ok(())
}

static USABLE_CONNECTIONS: &str = "\
SELECT current_setting('max_connections')::int8,
       current_setting('superuser_reserved_connections')::int8,
       current_setting('reserved_connections', true),
       current_setting('rds.rds_superuser_reserved_connections', true)";

/// The connections the functions may use: `max_connections` minus
/// `superuser_reserved_connections`, minus `reserved_connections` (PostgreSQL 16+) and RDS's
/// `rds.rds_superuser_reserved_connections` where those settings exist.
///
/// # Errors
/// [`SchemaError::Db`] when the query fails.
pub async fn usable_connections(client: &tokio_postgres::Client) -> Result<i64, SchemaError> {
    let row = client.query_one(USABLE_CONNECTIONS, &[]).await?;
    let optional = |i: usize| -> Result<i64, SchemaError> {
        let text: Option<String> = row.try_get(i)?;
        Ok(text.and_then(|t| t.trim().parse().ok()).unwrap_or(0))
    };
    let max: i64 = row.try_get(0)?;
    let superuser: i64 = row.try_get(1)?;
    Ok(max - superuser - optional(2)? - optional(3)?)
}

/// The budget's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetReport {
    /// Usable connections ([`usable_connections`]).
    pub usable: i64,
    /// Sum over reserved functions of reserved concurrency x pool size.
    pub reserved: u64,
    /// Functions with no reserved concurrency (they may scale past any budget).
    pub unreserved: Vec<String>,
    /// Whether RDS Proxy sits in between (then nothing is failed).
    pub use_proxy: bool,
}

/// Checks `budget` against `usable` connections: without a proxy, fails when the reserved
/// functions' connections exceed them; unreserved functions are only reported.
///
/// # Errors
/// [`SchemaError::OverBudget`].
pub fn check_budget(budget: &ConnectionBudget, usable: i64) -> Result<BudgetReport, SchemaError> {
    let reserved = budget
        .functions
        .iter()
        .map(|f| f.reserved_concurrency.saturating_mul(f.pool_size))
        .fold(0u64, u64::saturating_add);
    let unreserved: Vec<String> = budget
        .functions
        .iter()
        .filter(|f| f.reserved_concurrency == 0)
        .map(|f| f.name.clone())
        .collect();
    let fits = i64::try_from(reserved).is_ok_and(|r| r <= usable);
    if !budget.use_proxy && !fits {
        return Err(SchemaError::OverBudget { reserved, usable });
    }
    Ok(BudgetReport {
        usable,
        reserved,
        unreserved,
        use_proxy: budget.use_proxy,
    })
}

/// Creates or alters each login (one transaction: all or none), grants it its group role and
/// revokes any other `hookledger_` group, and sets or resets its timeouts. Returns the login
/// names in order.
///
/// # Errors
/// [`SchemaError::Login`] for a username that names the connected role or an existing
/// superuser; [`SchemaError::Db`] when a statement fails (nothing is changed then).
pub async fn provision_logins(
    client: &mut tokio_postgres::Client,
    logins: &[(LoginSpec, LoginCredentials)],
    owner: &str,
) -> Result<Vec<String>, SchemaError> {
    if logins.is_empty() {
        return Ok(Vec::new());
    }
    let tx = client.transaction().await?;
    let mut names = Vec::with_capacity(logins.len());
    for (spec, login) in logins {
        let refuse = |problem: &str| SchemaError::Login {
            role: login.role.name(),
            problem: problem.to_owned(),
        };
        // An existing role is taken over only when it is plainly a login: no attribute beyond
        // LOGIN, no membership outside the hookledger_ groups, and not another stack's (roles
        // are cluster-wide: a second stack on the same server with the same login names would
        // otherwise replace the first one's passwords).
        let existing = tx
            .query_opt(
                "SELECT r.rolsuper, r.rolname = session_user,
                        r.rolcreaterole OR r.rolcreatedb OR r.rolbypassrls OR r.rolreplication,
                        EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                                WHERE m.member = r.oid AND g.rolname <> ALL ($2::text[])),
                        shobj_description(r.oid, 'pg_authid')
                 FROM pg_roles r WHERE r.rolname = $1",
                &[&login.username, &GROUP_ROLES.as_slice()],
            )
            .await?;
        if let Some(row) = &existing {
            if row.try_get::<_, bool>(1)? {
                return Err(refuse("username is the migrating role itself"));
            }
            if row.try_get::<_, bool>(0)? {
                return Err(refuse("username is an existing superuser"));
            }
            if row.try_get::<_, bool>(2)? || row.try_get::<_, bool>(3)? {
                return Err(refuse(
                    "username names an existing role with more than a login's rights \
                     (CREATEROLE, CREATEDB, BYPASSRLS, REPLICATION or other memberships): \
                     give the function a login of its own",
                ));
            }
            let comment: Option<String> = row.try_get(4)?;
            if let Some(other) = comment
                .as_deref()
                .and_then(|c| c.strip_prefix(LOGIN_MARKER))
                .filter(|other| *other != owner)
            {
                return Err(refuse(&format!(
                    "username is already the login of another deployment ({other}); give \
                     this stack its own DatabaseLoginPrefix"
                )));
            }
        }
        // The server quotes (%I, %L) by its own rules; the password goes as a SCRAM verifier.
        let verifier =
            postgres_protocol::password::scram_sha_256(login.password.expose_secret().as_bytes());
        let verb = if existing.is_some() {
            "ALTER"
        } else {
            "CREATE"
        };
        let statement: String = tx
            .query_one(
                "SELECT format('%s ROLE %I WITH LOGIN PASSWORD %L', $1::text, $2::text, $3::text)",
                &[&verb, &login.username, &verifier],
            )
            .await?
            .try_get(0)?;
        tx.batch_execute(&statement).await?;
        // Its group, and no other hookledger_ group (a login moved from one role to another).
        let user = quote_ident(&login.username);
        let mut grants = format!("GRANT {} TO {user};\n", login.role.group_role());
        let direct = tx
            .query(
                "SELECT g.rolname FROM pg_auth_members m
                 JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles u ON u.oid = m.member
                 WHERE u.rolname = $1",
                &[&login.username],
            )
            .await?;
        for row in direct {
            let group: String = row.try_get(0)?;
            if let Some(group) = GROUP_ROLES
                .into_iter()
                .find(|g| *g == group && *g != login.role.group_role())
            {
                let _ = writeln!(grants, "REVOKE {group} FROM {user};");
            }
        }
        for (setting, value) in [
            ("statement_timeout", spec.statement_timeout_ms),
            ("lock_timeout", spec.lock_timeout_ms),
            (
                "idle_in_transaction_session_timeout",
                spec.idle_in_transaction_timeout_ms,
            ),
        ] {
            let _ = match value {
                Some(ms) => writeln!(grants, "ALTER ROLE {user} SET {setting} = {ms};"),
                None => writeln!(grants, "ALTER ROLE {user} RESET {setting};"),
            };
        }
        tx.batch_execute(&grants).await?;
        let mark: String = tx
            .query_one(
                "SELECT format('COMMENT ON ROLE %I IS %L', $1::text, $2::text)",
                &[&login.username, &format!("{LOGIN_MARKER}{owner}")],
            )
            .await?
            .try_get(0)?;
        tx.batch_execute(&mark).await?;
        names.push(login.username.clone());
    }
    tx.commit().await?;
    Ok(names)
}

/// The start of the comment the migrate function puts on each login it provisions, followed by
/// the deployment that owns it (the CloudFormation stack id).
pub const LOGIN_MARKER: &str = "hookledger login of ";

/// `"name"` with `"` doubled (SQL identifier quoting; [`check_username`] already refused any
/// character that would need it).
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// What [`apply`] did, for the custom resource's `Data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaReport {
    /// The migrations run.
    pub migrations: MigrationReport,
    /// The logins provisioned, in the properties' order.
    pub logins: Vec<String>,
    /// The budget's verdict, when one was given.
    pub budget: Option<BudgetReport>,
}

/// Applies `properties` to the database behind `client`: takes the database's schema advisory
/// lock (one deploy at a time), sets `lock_timeout` to `lock_timeout_ms` for what follows,
/// checks the budget (read-only, so an over-budget deploy changes nothing), migrates (the
/// ledger's set, then `sets`), and provisions the logins from `logins` (credentials already
/// read and checked) as `owner`'s (the stack id, recorded on each login).
///
/// # Errors
/// [`SchemaError::OverBudget`], [`SchemaError::Migrate`], and as [`provision_logins`].
pub async fn apply(
    client: &mut tokio_postgres::Client,
    properties: &SchemaProperties,
    sets: &[MigrationSet],
    logins: &[(LoginSpec, LoginCredentials)],
    owner: &str,
    lock_timeout_ms: u64,
) -> Result<SchemaReport, SchemaError> {
    // One apply at a time per database (waiting under the session's lock_timeout as it is);
    // the lock is the session's and ends with it. Then the migrations' own lock limit.
    client
        .batch_execute(shared::db::migrations::SCHEMA_LOCK)
        .await
        .map_err(|e| SchemaError::SchemaLock(e.into()))?;
    client
        .batch_execute(&format!("SET lock_timeout = {lock_timeout_ms}"))
        .await?;
    let budget = match &properties.connection_budget {
        Some(budget) => Some(check_budget(budget, usable_connections(client).await?)?),
        None => None,
    };
    let migrations = shared::db::migrate_client(client, sets).await?;
    let logins = provision_logins(client, logins, owner).await?;
    Ok(SchemaReport {
        migrations,
        logins,
        budget,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cloudformation_strings_parse_and_service_token_is_ignored() {
        let props = SchemaProperties::from_value(&json!({
            "ServiceToken": "arn:aws:lambda:...",
            "Version": "7",
            "Logins": [{"Role": "sweeper", "SecretArn": "arn:s", "LockTimeoutMs": "2000"}],
            "ConnectionBudget": {"UseProxy": "false", "Functions": [
                {"Name": "receiver", "ReservedConcurrency": "10", "PoolSize": "2"}]}
        }))
        .unwrap();
        assert_eq!(props.version.as_deref(), Some("7"));
        assert_eq!(props.logins[0].role, FunctionRole::Sweeper);
        assert_eq!(props.logins[0].lock_timeout_ms, Some(2000));
        assert_eq!(props.logins[0].statement_timeout_ms, None);
        let budget = props.connection_budget.unwrap();
        assert!(!budget.use_proxy);
        assert_eq!(budget.functions[0].reserved_concurrency, 10);
        let bad =
            SchemaProperties::from_value(&json!({"Logins": [{"Role": "dba", "SecretArn": "x"}]}));
        assert!(matches!(bad, Err(SchemaError::Properties(_))));
    }

    #[test]
    fn usernames_must_be_plain_identifiers_and_not_reserved() {
        for ok in ["receiver_login", "_x", "App1"] {
            assert!(check_username(FunctionRole::Receiver, ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1abc",
            "a-b",
            "a\"b",
            "a b",
            "pg_monitor",
            "rdsadmin",
            "hookledger_receiver",
            "postgres",
            &"x".repeat(64),
        ] {
            assert!(
                check_username(FunctionRole::Receiver, bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_budget_fails_reserved_overflow_without_a_proxy_and_reports_unreserved() {
        let budget = |use_proxy| ConnectionBudget {
            use_proxy,
            functions: vec![
                FunctionBudget {
                    name: "receiver".into(),
                    reserved_concurrency: 50,
                    pool_size: 2,
                },
                FunctionBudget {
                    name: "worker".into(),
                    reserved_concurrency: 0,
                    pool_size: 4,
                },
            ],
        };
        assert!(matches!(
            check_budget(&budget(false), 99),
            Err(SchemaError::OverBudget {
                reserved: 100,
                usable: 99
            })
        ));
        let fits = check_budget(&budget(false), 100).unwrap();
        assert_eq!(fits.unreserved, vec!["worker".to_owned()]);
        assert!(
            check_budget(&budget(true), 10).is_ok(),
            "a proxy multiplexes"
        );
    }

    #[test]
    fn a_secret_without_a_password_names_the_field_not_a_value() {
        let error = credentials(FunctionRole::Worker, r#"{"username":"w","pw":"hunter2"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("password") && !error.contains("hunter2"),
            "{error}"
        );
    }
}
