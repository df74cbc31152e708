//! The migrate function's logic: one CloudFormation request in, one answer `PUT` out, always
//! (`Custom::HookledgerSchema`, the `Schema` resource of template.yaml).
//!
//! - Create / Update: read the properties, the login secrets, connect with the admin (owner)
//!   settings, [`crate::schema::apply`]; SUCCESS with `Data`, or FAILED with a short `Reason`.
//!   A database ahead of this build (a rollback runs the old binary on the new schema) is
//!   SUCCESS, with `Data.DatabaseAhead = "true"`.
//! - Delete: SUCCESS without connecting: the database and its data are kept.
//! - The work runs in its own task, so a panic becomes FAILED, and is abandoned `margin` before
//!   the invocation's deadline (FAILED "timed out ..."), leaving time for the answer.
//! - The answer is retried ([`crate::custom_resource::send`]); if it cannot be delivered the
//!   invocation fails (Lambda's log has why; CloudFormation times out).
//! - The `ResponseURL` must be CloudFormation's pre-signed S3 URL
//!   ([`crate::custom_resource::check_response_url`]), checked before anything else, and no
//!   redirect is followed: an invoker that is not CloudFormation gets no work and no answer.

use std::time::{Duration, SystemTime};

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

use shared::config::DatabaseSettings;
use shared::db::MigrationSet;

use crate::custom_resource::{
    self, check_response_url, Request, RequestType, Response, ResponseUrls, Status,
};
use crate::schema::{
    credentials, LoginCredentials, LoginSpec, SchemaError, SchemaProperties, SchemaReport,
};

/// The physical id of the schema resource: the same on every answer, so an Update never makes
/// CloudFormation delete "the old" schema.
pub const PHYSICAL_RESOURCE_ID: &str = "hookledger-schema";

/// How long before the invocation's deadline the migrate function stops waiting on the
/// database and answers FAILED instead, by default.
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(15);

/// Why an invocation could not be answered: the invocation fails (Lambda's log has why) and
/// CloudFormation waits for the resource's timeout. Not retried here: [`crate::custom_resource::send`]
/// already retried the answer.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The event is not a custom resource request with a `ResponseURL`: nothing to answer.
    #[error(transparent)]
    BadRequest(#[from] custom_resource::BadRequest),
    /// The `ResponseURL` is not CloudFormation's ([`check_response_url`]): nothing was done
    /// and nothing is answered (an invoker that is not CloudFormation gets nothing; were it
    /// CloudFormation, the stack would wait for the resource's timeout).
    #[error(transparent)]
    ResponseUrl(#[from] custom_resource::UrlRefused),
    /// The answer could not be delivered.
    #[error(transparent)]
    Send(#[from] custom_resource::SendError),
}

/// Everything one invocation needs, built once per execution environment.
#[derive(Debug, Clone)]
pub struct SchemaResource {
    /// The admin (owner) connection settings, or why they could not be read at cold start:
    /// then every Create and Update answers FAILED with that reason (and Delete SUCCESS), so
    /// a wrong admin secret fails the deploy at once instead of leaving CloudFormation waiting.
    /// The reason is the message as sent (`shared::startup::config_failure`'s words: the
    /// configuration error's causes may quote a value, so only some are spelled out), kept as
    /// text since every request answers it again.
    pub database: Result<DatabaseSettings, String>,
    /// Where the login secrets are read (`None`: a request with logins fails).
    pub secrets: Option<shared::secrets::Secrets>,
    /// The migration sets after the ledger's (`handlers::migrations()`).
    pub sets: Vec<MigrationSet>,
    /// The client that `PUT`s the answer; it follows no redirect (a presigned S3 URL answers
    /// the `PUT` itself).
    pub http: reqwest::Client,
    /// Which `ResponseURL`s are answered: [`ResponseUrls::CloudFormation`] from
    /// [`SchemaResource::new`]; a test pointing at a local fake S3 sets it in code.
    pub response_urls: ResponseUrls,
    /// How long before the deadline to give up on the database.
    pub margin: Duration,
}

impl SchemaResource {
    /// A resource handler over `database` and `sets`, with the default margin.
    ///
    /// # Errors
    /// reqwest's error when the HTTP client cannot be built (its TLS back end; fatal).
    pub fn new(
        database: Result<DatabaseSettings, String>,
        secrets: Option<shared::secrets::Secrets>,
        sets: Vec<MigrationSet>,
    ) -> Result<Self, reqwest::Error> {
        let http = shared::https::client_builder().build()?;
        Ok(Self {
            database,
            secrets,
            sets,
            http,
            response_urls: ResponseUrls::CloudFormation,
            margin: DEFAULT_MARGIN,
        })
    }

    /// Handles one invocation `event` due by `deadline`: answers CloudFormation and returns
    /// the answer sent. A `ResponseURL` that is not CloudFormation's is refused before any
    /// work ([`check_response_url`]).
    ///
    /// # Errors
    /// [`AnswerError`] when the event has no `ResponseURL` or one that is not CloudFormation's
    /// (nothing is answered), or the answer could not be delivered.
    pub async fn handle(
        &self,
        event: &Value,
        deadline: SystemTime,
    ) -> Result<Response, AnswerError> {
        let url = event.get("ResponseURL").and_then(Value::as_str);
        if let Some(Err(refused)) = url.map(|url| check_response_url(url, self.response_urls)) {
            tracing::error!(
                reason = refused.0,
                "ResponseURL refused: not CloudFormation's pre-signed S3 URL, so this invoker is \
                 not CloudFormation; nothing done and nothing answered (were it CloudFormation, \
                 the stack would wait for the resource's ServiceTimeout)"
            );
            return Err(refused.into());
        }
        let (request, outcome) = match Request::from_value(event) {
            Ok(request) => {
                let outcome = self.outcome(&request, deadline).await;
                (request, outcome)
            }
            Err(mut bad) => match bad.partial.take() {
                Some(partial) => (*partial, Err(bad.to_string())),
                None => return Err(bad.into()),
            },
        };
        let response = match outcome {
            Ok((reason, data)) => Response::to(
                &request,
                PHYSICAL_RESOURCE_ID,
                Status::Success,
                &reason,
                data,
            ),
            Err(reason) => {
                tracing::error!(%reason, request_type = ?request.request_type, "schema FAILED");
                Response::to(
                    &request,
                    PHYSICAL_RESOURCE_ID,
                    Status::Failed,
                    &reason,
                    Map::new(),
                )
            }
        };
        custom_resource::send(&self.http, &request.response_url, &response, deadline).await?;
        tracing::info!(status = ?response.status, reason = %response.reason, "schema answered");
        Ok(response)
    }

    /// The work for `request`: `Ok((reason, data))` or `Err(reason)`, redacted and bounded by
    /// the deadline minus the margin.
    async fn outcome(
        &self,
        request: &Request,
        deadline: SystemTime,
    ) -> Result<(String, Map<String, Value>), String> {
        if request.request_type == RequestType::Delete {
            return Ok((
                "deleted from the stack; the database is kept".to_owned(),
                Map::new(),
            ));
        }
        let budget = shared::invocation::remaining(deadline).saturating_sub(self.margin);
        let this = self.clone();
        let properties = request.resource_properties.clone();
        let owner = request.stack_id.clone();
        let work = tokio::spawn(async move { this.create_or_update(&properties, &owner).await });
        let abort = work.abort_handle();
        let mut known = vec![self.database.as_ref().ok().and_then(url_password)];
        let result = match tokio::time::timeout(budget, work).await {
            Ok(Ok(Ok((report, passwords)))) => {
                known.extend(passwords);
                Ok(report)
            }
            Ok(Ok(Err((error, passwords)))) => {
                known.extend(passwords);
                Err(shared::error_chain::error_chain(&error))
            }
            Ok(Err(join)) if join.is_panic() => Err("internal error (panic); see the log".into()),
            Ok(Err(join)) => Err(format!("internal error: {join}")),
            Err(_) => {
                abort.abort();
                Err(format!(
                    "timed out waiting on the database ({} s before the function's deadline)",
                    self.margin.as_secs()
                ))
            }
        };
        let known: Vec<SecretString> = known.into_iter().flatten().collect();
        match result {
            Ok(report) => Ok((redact(&summary(&report), &known), data(&report))),
            Err(reason) => Err(redact(&reason, &known)),
        }
    }

    async fn create_or_update(
        &self,
        properties: &Value,
        owner: &str,
    ) -> Result<(SchemaReport, Vec<Option<SecretString>>), (SchemaError, Vec<Option<SecretString>>)>
    {
        let database = match &self.database {
            Ok(database) => database,
            Err(reason) => return Err((SchemaError::Settings(reason.clone()), Vec::new())),
        };
        let properties = SchemaProperties::from_value(properties).map_err(|e| (e, Vec::new()))?;
        let logins = self.read_logins(&properties.logins).await;
        let logins = logins.map_err(|e| (e, Vec::new()))?;
        let passwords: Vec<Option<SecretString>> = logins
            .iter()
            .map(|(_, c)| Some(c.password.clone()))
            .collect();
        let result = async {
            let mut client = shared::db::connect(database).await?;
            // A direct session of its own (never pooled): the limits are the session's, so a
            // migration blocked behind a lock gives up after lock_timeout instead of queueing
            // the receivers' statements behind it until the deadline. The advisory lock that
            // serialises deploys waits up to the statement limit.
            client
                .batch_execute(&format!(
                    "SET statement_timeout = {st}; SET idle_in_transaction_session_timeout = {idle}; \
                     SET lock_timeout = {st}",
                    st = database.statement_timeout_ms,
                    idle = database.idle_in_transaction_timeout_ms,
                ))
                .await?;
            crate::schema::apply(&mut client, &properties, &self.sets, &logins, owner, database.lock_timeout_ms).await
        }
        .await;
        match result {
            Ok(report) => Ok((report, passwords)),
            Err(error) => Err((error, passwords)),
        }
    }

    async fn read_logins(
        &self,
        specs: &[LoginSpec],
    ) -> Result<Vec<(LoginSpec, LoginCredentials)>, SchemaError> {
        let mut logins = Vec::with_capacity(specs.len());
        for spec in specs {
            let role = spec.role.name();
            let Some(secrets) = &self.secrets else {
                return Err(SchemaError::Secret {
                    role,
                    problem: "no Secrets Manager client".to_owned(),
                });
            };
            let json = secrets
                .secret_string(&spec.secret_arn)
                .await
                .map_err(|source| SchemaError::SecretUnreadable { role, source })?;
            let login = credentials(spec.role, json.expose_secret())?;
            if let Some((_, other)) = logins
                .iter()
                .find(|(_, c): &&(LoginSpec, LoginCredentials)| c.username == login.username)
            {
                return Err(SchemaError::Login {
                    role,
                    problem: format!("username is also the {} login", other.role.name()),
                });
            }
            logins.push((spec.clone(), login));
        }
        Ok(logins)
    }
}

fn url_password(settings: &DatabaseSettings) -> Option<SecretString> {
    use std::str::FromStr;
    let config = tokio_postgres::Config::from_str(settings.url.expose_secret()).ok()?;
    let password = config.get_password()?;
    Some(SecretString::from(
        String::from_utf8_lossy(password).into_owned(),
    ))
}

/// `text` with every known secret (of at least 4 characters) replaced by `***`: a last guard,
/// the messages are built not to hold any.
fn redact(text: &str, secrets: &[SecretString]) -> String {
    let mut out = text.to_owned();
    for secret in secrets {
        let secret = secret.expose_secret();
        if secret.len() >= 4 {
            out = out.replace(secret, "***");
        }
    }
    out
}

fn summary(report: &SchemaReport) -> String {
    let migrations = &report.migrations;
    let mut text = if !migrations.ahead.is_empty() {
        format!(
            "the database is ahead of this build ({}): left as it is",
            migrations.ahead.join(", ")
        )
    } else if migrations.applied.is_empty() {
        "migrations: up to date".to_owned()
    } else {
        format!("migrations applied: {}", migrations.applied.len())
    };
    text.push_str(&format!("; logins: {}", report.logins.len()));
    if let Some(budget) = &report.budget {
        if !budget.unreserved.is_empty() {
            text.push_str(&format!(
                "; unreserved (not budgeted): {}",
                budget.unreserved.join(", ")
            ));
        }
    }
    text
}

/// `Data`: strings only (what `Fn::GetAtt` returns), lists comma-separated.
fn data(report: &SchemaReport) -> Map<String, Value> {
    let mut data = Map::new();
    let mut put = |key: &str, value: String| {
        data.insert(key.to_owned(), Value::String(value));
    };
    let migrations = &report.migrations;
    put("Applied", migrations.applied.join(","));
    put("AppliedCount", migrations.applied.len().to_string());
    put("DatabaseAhead", (!migrations.ahead.is_empty()).to_string());
    put("Ahead", migrations.ahead.join(","));
    put("Logins", report.logins.join(","));
    if let Some(budget) = &report.budget {
        put("UsableConnections", budget.usable.to_string());
        put("ReservedConnections", budget.reserved.to_string());
        put("Unreserved", budget.unreserved.join(","));
        put("UseProxy", budget.use_proxy.to_string());
    }
    data
}

/// The database settings as every function reads them (`DATABASE_URL` or
/// `HOOKLEDGER_DB_SECRET_ARN`, `HOOKLEDGER_DB_CA_FILE`, ...), without the sources: the migrate
/// function inherits `HOOKLEDGER_SOURCES_SECRET_ARN` from the stack but neither needs nor reads
/// it (its role may not), so the sources variables are hidden and a stand-in given.
///
/// # Errors
/// As [`shared::Settings::from_env`] for the database variables.
pub async fn database_settings_from_env() -> Result<DatabaseSettings, shared::config::ConfigError> {
    database_settings_from(|name| std::env::var(name).ok()).await
}

/// [`database_settings_from_env`] through `lookup` (for tests).
///
/// # Errors
/// As [`database_settings_from_env`].
pub async fn database_settings_from(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<DatabaseSettings, shared::config::ConfigError> {
    /// Signs nothing: the stand-in for the sources migrating never reads.
    const NO_SOURCES: &str = r#"[{"name": "migrate", "scheme": "github", "secrets": ["unused"]}]"#;
    let settings = shared::Settings::from_lookup_with_secrets(|name| match name {
        "HOOKLEDGER_SOURCES" => Some(NO_SOURCES.to_owned()),
        "HOOKLEDGER_SOURCES_FILE" | "HOOKLEDGER_SOURCES_SECRET_ARN" => None,
        other => lookup(other),
    })
    .await?;
    Ok(settings.database)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_replaces_every_known_secret() {
        let secrets = [SecretString::from("hunter2!".to_owned())];
        assert_eq!(redact("bad hunter2! x hunter2!", &secrets), "bad *** x ***");
    }

    #[tokio::test]
    async fn the_sources_are_neither_needed_nor_read() {
        let settings = database_settings_from(|name| match name {
            "DATABASE_URL" => Some("postgres://admin@db/ledger".to_owned()),
            // Not readable by the migrate function's role: it must not be fetched.
            "HOOKLEDGER_SOURCES_SECRET_ARN" => Some("arn:aws:secretsmanager:x:1:secret:s".into()),
            _ => None,
        })
        .await
        .unwrap();
        assert_eq!(settings.url.expose_secret(), "postgres://admin@db/ledger");
    }
}
