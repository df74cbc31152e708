//! The receive path (docs/architecture.md, "The receive path"): from a delivery's source name,
//! headers and raw body to the reply, with every outcome decided here and logged once. Bodies
//! are byte for byte what is sent (the book's table in `docs/reference/answers.md`, "What the
//! receiver answers", lists the same):
//!
//! | case | status | body |
//! |---|---|---|
//! | unknown source | 404 | `{"error":"unknown source"}` |
//! | body over the source's limit | 413 | `{"error":"body too large"}` |
//! | bad, missing or stale signature | 401 | `{"error":<fixed reason>}` |
//! | unreadable body, missing event id | 400 | `{"error":<reason>}` |
//! | Slack `url_verification` | 200 | `{"challenge":...}` |
//! | new event, inline | 200 (or the handler's 2xx) | the handler's body |
//! | new event, deferred | 202 | `{"accepted":true,"duplicate":false}` |
//! | completed duplicate, same payload identity | the stored status | the stored body, verbatim; `Idempotent-Replayed: true` |
//! | duplicate, deferred | 202 | `{"accepted":true,"duplicate":true}`; `Idempotent-Replayed: true` |
//! | same event id, different payload | 409 | `{"error":"event id reused with a different body"}` |
//! | duplicate still in flight | 409 | `{"error":"event is being processed"}`; `Retry-After: 5` |
//! | handler failure, retryable | 500 | `{"error":"internal error"}` (claim rolled back) |
//! | handler failure, fatal (inline) | 200 | `{"error": "the event cannot be processed; it is kept for an operator", "status": "dead"}` (stored as JSONB, so spaced); the event is kept `dead` with its payload and error, and every retry gets the same answer |
//! | database unavailable | 503 | `{"error":"service unavailable"}` |
//! | database work past the client deadline | 503 | `{"error":"service unavailable"}`; `Retry-After: 5` |
//!
//! Nothing is written for any 4xx, and a 5xx leaves no row behind, so the provider's retry
//! starts clean. An inline event whose commit queued outbox messages rings the worker's doorbell
//! after the commit (as a deferred accept does), so they are forwarded at once. A fatal handler error (the payload can never be processed) rolls back the
//! handler's writes and keeps the event as `dead`: the provider stops retrying (a 2xx, so it
//! does not disable the endpoint either), the operator is told by the `handler_fatal` metric and
//! an error log line, and re-drives it once the cause is fixed.
//!
//! A delivery's database work (a pooled connection, the claim, the handler, the commit) runs
//! under the client-side deadline `DatabaseSettings::client_deadline` (the statement timeout
//! plus 1 s by default): on a network that stopped answering (a failover, a dead NAT entry) no
//! server-side limit can fire, so past the deadline the delivery answers 503 with
//! `Retry-After` and the connection is closed, never handed out again. Nothing answered 2xx
//! is then lost: the claim commits with the effect or not at all, and a commit whose reply
//! was lost is a completed event the retry gets replayed.

use std::time::Instant;

use crate::db::Pool;
use http::HeaderMap;

use std::time::SystemTime;

use crate::config::{Mode, Settings, SourceConfig};
use crate::doorbell::Doorbell;
use crate::ledger::one_statement::Decided;
use crate::ledger::{self, Accept, Claim, Expiry, NewEvent};
use crate::sources_refresh::LiveSources;
use crate::telemetry::{MetricName, UNKNOWN_SOURCE};
use crate::{
    apply::{apply, fatal_body, ApplyError, FATAL_STATUS},
    effect::Event,
    handler::Registry,
};
use hookledger_verify::extract::{extract, Extracted};

/// Seconds a provider is asked to wait before retrying an in-flight duplicate.
pub const RETRY_AFTER_SECS: u32 = 5;

/// What the receiver answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// JSON body text.
    pub body: String,
    /// Set on a replayed (cached) response: send `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// Seconds for a `Retry-After` header, when set.
    pub retry_after: Option<u32>,
    /// What happened, for the log and tests: `processed`, `ignored`, `replayed`, `dead`
    /// (a fatal handler error, kept for an operator), `digest_mismatch`,
    /// `in_flight`, `unknown_source`, `too_large`, `bad_request`, `unauthorized`,
    /// `handler_failed`, `unavailable`, `internal_error`.
    pub outcome: &'static str,
}

impl Reply {
    fn error(status: u16, outcome: &'static str, reason: &str) -> Self {
        Self {
            status,
            body: serde_json::json!({ "error": reason }).to_string(),
            replayed: false,
            retry_after: None,
            outcome,
        }
    }
}

/// Everything the receive path needs, built once per execution environment.
#[derive(Debug, Clone)]
pub struct Receiver {
    /// The configured sources, refreshable after a failed verification (see
    /// [`crate::sources_refresh`]).
    pub sources: LiveSources,
    /// The connection pool.
    pub pool: Pool,
    /// Handlers by `(source, event_type)`.
    pub handlers: Registry,
    /// Rings the worker after a deferred accept (off unless configured).
    pub doorbell: Doorbell,
    /// The client-side deadline on a delivery's database work
    /// (`DatabaseSettings::client_deadline`).
    pub deadline: std::time::Duration,
}

/// Log fields gathered along the path; written once per delivery.
struct Trace<'a> {
    source: &'a str,
    event_id: Option<String>,
    event_type: Option<String>,
    key_index: Option<usize>,
    detail: Option<String>,
}

impl Receiver {
    /// A receiver over `settings`' sources running `handlers` (the registry the user owns:
    /// `handlers::registry(&settings.sources)` in the functions).
    pub fn new(settings: &Settings, pool: Pool, handlers: Registry) -> Self {
        Self {
            handlers,
            sources: LiveSources::fixed(settings.sources.clone()),
            pool,
            doorbell: Doorbell::off(),
            deadline: settings.database.client_deadline(),
        }
    }

    /// The same receiver ringing `doorbell` after deferred accepts.
    pub fn with_doorbell(mut self, doorbell: Doorbell) -> Self {
        self.doorbell = doorbell;
        self
    }

    /// Receives one delivery for `source`: verify, identify, claim, apply, answer. `now` is
    /// the current time in unix seconds (injected so tests can sign at fixed times). Never
    /// fails: every outcome is a [`Reply`], and one JSON log line records it (source,
    /// event_id, outcome, status, latency_ms; never the body or a signature).
    pub async fn receive(&self, source: &str, headers: &HeaderMap, body: &[u8], now: i64) -> Reply {
        let started = Instant::now();
        let mut trace = Trace {
            source,
            event_id: None,
            event_type: None,
            key_index: None,
            detail: None,
        };
        let reply = self.decide(&mut trace, source, headers, body, now).await;
        let elapsed = started.elapsed();
        // Microsecond resolution is plenty for a log line.
        let latency_ms = (elapsed.as_secs_f64() * 1e6).round() / 1e3;
        let event_id = trace.event_id.as_deref().unwrap_or("");
        let event_type = trace.event_type.as_deref().unwrap_or("");
        let (error, warn) = (
            reply.status >= 500 || reply.outcome == "digest_mismatch",
            reply.status >= 400,
        );
        // One stdout line per delivery: the log line carries the delivery's metrics (an EMF
        // document, `telemetry::LogLines`) when the functions' subscriber writes it, the line
        // is not filtered out and the source is configured (an unknown source's metric counts
        // under a fixed dimension value the line, which logs the name sent, does not carry).
        let enabled = if error {
            tracing::enabled!(tracing::Level::ERROR)
        } else if warn {
            tracing::enabled!(tracing::Level::WARN)
        } else {
            tracing::enabled!(tracing::Level::INFO)
        };
        let in_line = enabled
            && crate::telemetry::delivery_metrics_in_log_line()
            && self.sources.get(source).is_some();
        let (deliveries, delivery_latency) = if in_line {
            (Some(1u64), Some(crate::telemetry::whole_ms(elapsed)))
        } else {
            (None, None)
        };
        if error {
            tracing::error!(
                source = trace.source,
                event_id,
                event_type,
                outcome = reply.outcome,
                status = reply.status,
                latency_ms,
                error = trace.detail.as_deref().unwrap_or(""),
                deliveries,
                delivery_latency,
                "delivery"
            );
        } else if warn {
            tracing::warn!(
                source = trace.source,
                event_id,
                event_type,
                outcome = reply.outcome,
                status = reply.status,
                latency_ms,
                reason = trace.detail.as_deref().unwrap_or(""),
                deliveries,
                delivery_latency,
                "delivery"
            );
        } else {
            tracing::info!(
                source = trace.source,
                event_id,
                event_type,
                outcome = reply.outcome,
                status = reply.status,
                latency_ms,
                key_index = trace.key_index,
                deliveries,
                delivery_latency,
                "delivery"
            );
        }
        if in_line {
            crate::telemetry::delivery_metrics_logged(source, reply.outcome, elapsed);
        } else {
            self.count_delivery(source, reply.outcome, elapsed);
        }
        reply
    }

    /// The per-delivery metrics (`deliveries`, `delivery_latency` by source and outcome), with
    /// an unconfigured source counted as [`UNKNOWN_SOURCE`]: the path segment is the sender's
    /// choice, and every distinct dimension value would be a new custom metric.
    fn count_delivery(&self, source: &str, outcome: &str, latency: std::time::Duration) {
        let source = if self.sources.get(source).is_some() {
            source
        } else {
            UNKNOWN_SOURCE
        };
        crate::telemetry::emit_delivery(source, outcome, latency);
    }

    /// Refuses a delivery the transport could not read (e.g. a body flagged base64 that does
    /// not decode), with `{"error": reason}`, logging the delivery line like [`Self::receive`].
    pub fn refuse(&self, source: &str, status: u16, outcome: &'static str, reason: &str) -> Reply {
        let reply = Reply::error(status, outcome, reason);
        tracing::warn!(
            source,
            event_id = "",
            event_type = "",
            outcome,
            status,
            latency_ms = 0.0,
            reason,
            "delivery"
        );
        self.count_delivery(source, outcome, std::time::Duration::ZERO);
        reply
    }

    async fn decide(
        &self,
        trace: &mut Trace<'_>,
        source: &str,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Reply {
        let Some(mut config) = self.sources.get(source) else {
            return Reply::error(404, "unknown_source", "unknown source");
        };
        if body.len() > config.max_body_bytes {
            trace.detail = Some(format!(
                "{} bytes over the limit of {}",
                body.len(),
                config.max_body_bytes
            ));
            return Reply::error(413, "too_large", "body too large");
        }
        // The signature is checked before the body is parsed at all.
        let verified = match config.verifier.verify(headers, body, now) {
            // A secret rotated since the sources were read: re-read them (rate-limited) and
            // verify once more.
            Err(error) => match self
                .sources
                .reverify(source, &config, &error, headers, body, now)
                .await
            {
                Some((fresh, verified)) => {
                    config = fresh;
                    Ok(verified)
                }
                None => Err(error),
            },
            verified => verified,
        };
        match verified {
            Ok(verified) => trace.key_index = Some(verified.key_index),
            Err(error) => {
                trace.detail = Some(format!("{error:?}"));
                crate::telemetry::count(MetricName::SignatureFailed, source, 1);
                return Reply::error(401, "unauthorized", error.reason());
            }
        }
        self.process(trace, &config, headers, body, false).await
    }

    /// Receives one event the replay fetched from `config`'s provider API with its credential
    /// (`crate::replay`): the same path as a verified delivery from here on (identify, claim,
    /// apply or accept), with the row marked `replayed_at`, and a key already in the ledger a
    /// duplicate whatever its bytes (outcome `duplicate`). `body` is the event object as the
    /// API returned it. With `dry_run` nothing is written: the outcome is `new` when the key
    /// is absent (or past retention) and `duplicate` otherwise. Logs one `replay` line
    /// (source, event_id, outcome, status; never the body).
    ///
    /// Outcomes: `processed`, `ignored`, `dead` (inline), `accepted` (deferred), `new`
    /// (dry run), `duplicate`; the 4xx and 5xx outcomes of [`Self::receive`] for an event that
    /// cannot be identified or a database that fails.
    pub async fn replay(&self, config: &SourceConfig, body: &[u8], dry_run: bool) -> Reply {
        let mut trace = Trace {
            source: &config.name,
            event_id: None,
            event_type: None,
            key_index: None,
            detail: None,
        };
        let reply = if body.len() > config.max_body_bytes {
            // The source's limit holds for replayed events as for deliveries.
            trace.detail = Some(format!(
                "{} bytes over the limit of {}",
                body.len(),
                config.max_body_bytes
            ));
            Reply::error(413, "too_large", "body too large")
        } else if dry_run {
            self.peek(&mut trace, config, body).await
        } else {
            self.process(&mut trace, config, &HeaderMap::new(), body, true)
                .await
        };
        let event_id = trace.event_id.as_deref().unwrap_or("");
        let event_type = trace.event_type.as_deref().unwrap_or("");
        let error = trace.detail.as_deref().unwrap_or("");
        if reply.status >= 400 {
            tracing::error!(
                source = trace.source,
                event_id,
                event_type,
                outcome = reply.outcome,
                status = reply.status,
                dry_run,
                error,
                "replay"
            );
        } else {
            tracing::info!(
                source = trace.source,
                event_id,
                event_type,
                outcome = reply.outcome,
                status = reply.status,
                dry_run,
                replayed = true,
                "replay"
            );
        }
        reply
    }

    /// A dry run of [`Self::replay`]: identify the event and read its key, write nothing.
    async fn peek(&self, trace: &mut Trace<'_>, config: &SourceConfig, body: &[u8]) -> Reply {
        let headers = HeaderMap::new();
        let (meta, _) = match identify(trace, config, &headers, body) {
            Ok(identified) => identified,
            Err(reply) => return reply,
        };
        let conn = match self.pool.get().await {
            Ok(conn) => conn,
            Err(error) => {
                trace.detail = Some(crate::db::describe_pool(&error));
                return Reply::error(503, "unavailable", "service unavailable");
            }
        };
        let expiry = Expiry {
            retention: config.retention.retention,
            now: SystemTime::now(),
        };
        match ledger::lookup(&conn, &config.name, &meta.event_id).await {
            Ok(Some(row)) if !row.is_expired(&expiry) => dry_run_reply("duplicate"),
            Ok(_) => dry_run_reply("new"),
            Err(error) => {
                trace.detail = Some(error.to_string());
                Reply::error(503, "unavailable", "service unavailable")
            }
        }
    }

    /// Everything after the signature: identify the event, claim it (inline) or accept it
    /// (deferred), and answer.
    async fn process(
        &self,
        trace: &mut Trace<'_>,
        config: &SourceConfig,
        headers: &HeaderMap,
        body: &[u8],
        replayed: bool,
    ) -> Reply {
        let source = config.name.as_str();
        let (meta, hashes) = match identify(trace, config, headers, body) {
            Ok(identified) => identified,
            Err(reply) => return reply,
        };
        // A replayed duplicate is not a delivery: shadow mode does not process it again.
        let shadow = config.shadow && !replayed;
        let event = Event {
            source,
            event_id: &meta.event_id,
            event_type: &meta.event_type,
            body,
            document: &meta.document,
        };
        let new_event = NewEvent {
            source,
            event_id: &meta.event_id,
            event_type: &meta.event_type,
            digest: &hashes.digest,
            identity: &hashes.identity,
            payload: config.store_payload.then_some(body),
            replayed,
        };
        // A key past the source's retention counts as absent, swept or not.
        let expiry = Expiry {
            retention: config.retention.retention,
            now: SystemTime::now(),
        };
        // Past the deadline the connection is closed, never returned to the pool.
        let decided = crate::db::deadline::within(
            self.deadline,
            self.connection(),
            async |conn: &ledger::Connection| match config.mode {
                Mode::Inline => {
                    self.claim_and_apply(conn, config, &event, &new_event, &expiry, shadow)
                        .await
                }
                Mode::Deferred => {
                    self.accept(conn, config, &event, &new_event, &expiry, shadow)
                        .await
                }
            },
        )
        .await
        .unwrap_or_else(|exceeded| Err(Failed::Deadline(exceeded.to_string())));
        let decided = match decided {
            Ok((reply, ring)) => {
                if ring {
                    self.ring(&event).await;
                }
                Ok(reply)
            }
            Err(failed) => Err(failed),
        };
        match decided {
            Ok(reply) => {
                if reply.outcome == "digest_mismatch" {
                    trace.detail =
                        Some("stored payload identity differs from this body's".to_owned());
                    crate::telemetry::count(MetricName::DigestMismatch, source, 1);
                }
                reply
            }
            Err(Failed::Unavailable(detail)) => {
                trace.detail = Some(detail);
                Reply::error(503, "unavailable", "service unavailable")
            }
            Err(Failed::Deadline(detail)) => {
                trace.detail = Some(detail);
                let mut reply = Reply::error(503, "unavailable", "service unavailable");
                reply.retry_after = Some(RETRY_AFTER_SECS);
                reply
            }
            Err(Failed::Apply(error)) => {
                trace.detail = Some(error.chain());
                if error.is_unavailable() {
                    Reply::error(503, "unavailable", "service unavailable")
                } else if matches!(error, ApplyError::Retryable(_)) {
                    Reply::error(500, "handler_failed", "internal error")
                } else {
                    Reply::error(500, "internal_error", "internal error")
                }
            }
        }
    }

    /// Inline mode on `conn`: the reply, and whether to ring the worker once `conn` is back
    /// in the pool (the commit queued outbox messages).
    async fn claim_and_apply(
        &self,
        conn: &ledger::Connection,
        config: &SourceConfig,
        event: &Event<'_>,
        new_event: &NewEvent<'_>,
        expiry: &Expiry,
        shadow: bool,
    ) -> Result<(Reply, bool), Failed> {
        let claim = match self
            .one_statement(conn, config, event, new_event, expiry)
            .await?
        {
            Some(Ok(reply)) => return Ok((reply, false)),
            Some(Err(lost)) => lost,
            None => ledger::claim(conn, new_event, expiry).await?,
        };
        // Moved whole into the match (a binding left partly moved would be dropped, borrowing
        // `conn`, at the end of the function).
        let tx = match std::convert::identity(claim) {
            Claim::Won(tx) => tx,
            Claim::DigestMismatch => {
                return Ok((
                    Reply::error(
                        409,
                        "digest_mismatch",
                        "event id reused with a different body",
                    ),
                    false,
                ))
            }
            // Shadow mode: enforcement would skip this duplicate; process it anyway, but answer
            // what enforcement answers (a shadow run's failure is only logged: shadow mode must
            // not turn duplicates into 5xx in front of a live endpoint).
            Claim::Completed(stored) if shadow => {
                self.shadow_run(conn, config, event).await;
                return Ok((replayed(stored, "shadow_duplicate"), false));
            }
            Claim::InFlight if shadow => {
                self.shadow_run(conn, config, event).await;
                return Ok((in_flight(), false));
            }
            Claim::Completed(stored) => return Ok((replayed(stored, "replayed"), false)),
            Claim::InFlight => return Ok((in_flight(), false)),
            // Replay: the event is in the ledger already, whatever its status or bytes.
            Claim::Known(_) => return Ok((dry_run_reply("duplicate"), false)),
        };
        // Boxed: the handler's and the completion's futures are large, and this one sits inside
        // every delivery's (and every replayed page's) future.
        match Box::pin(apply(&self.handlers, config, tx, event)).await {
            // Committed outbox messages: the worker forwards them now rather than at its next
            // schedule tick.
            Ok(applied) => Ok((
                Reply {
                    status: applied.response.status,
                    body: applied.response.body,
                    replayed: false,
                    retry_after: None,
                    outcome: applied.outcome.as_str(),
                },
                applied.queued > 0,
            )),
            Err(ApplyError::Fatal(error)) => Ok((
                self.keep_dead(conn, new_event, &error, expiry).await?,
                false,
            )),
            Err(error) => Err(Failed::Apply(error)),
        }
    }

    /// The one-statement shape (`ledger::one_statement`), when the event can take it: the reply
    /// of a won claim, the lost claim's outcome for the transaction shape's answers (a completed
    /// duplicate, in flight, a digest mismatch), or `None` to take the transaction shape.
    async fn one_statement(
        &self,
        conn: &ledger::Connection,
        config: &SourceConfig,
        event: &Event<'_>,
        new_event: &NewEvent<'_>,
        expiry: &Expiry,
    ) -> Result<Option<Result<Reply, Claim<'static>>>, Failed> {
        if new_event.replayed {
            return Ok(None);
        }
        let Some((plan, outcome)) = crate::apply::plan(&self.handlers, config, conn, event).await
        else {
            return Ok(None);
        };
        Ok(
            match ledger::one_statement::claim_and_complete(conn, new_event, &plan, expiry).await? {
                Decided::Won(response) => Some(Ok(Reply {
                    status: response.status,
                    body: response.body,
                    replayed: false,
                    retry_after: None,
                    outcome: outcome.as_str(),
                })),
                Decided::Completed(stored) => Some(Err(Claim::Completed(stored))),
                Decided::DigestMismatch => Some(Err(Claim::DigestMismatch)),
                Decided::InFlight => Some(Err(Claim::InFlight)),
                Decided::Undecided => None,
            },
        )
    }

    /// An inline handler failed fatally: the claim's transaction is rolled back; keep the event
    /// `dead` with its payload and error, tell the operator, and answer the provider a 2xx.
    async fn keep_dead(
        &self,
        conn: &ledger::Connection,
        new_event: &NewEvent<'_>,
        error: &crate::effect::HandlerError,
        expiry: &Expiry,
    ) -> Result<Reply, Failed> {
        let chain = error.chain();
        tracing::error!(
            source = new_event.source,
            event_id = new_event.event_id,
            event_type = new_event.event_type,
            metric = "handler_fatal",
            error = chain.as_str(),
            "handler failed fatally: the event is kept dead for an operator to fix and re-drive"
        );
        crate::telemetry::count(MetricName::HandlerFatal, new_event.source, 1);
        let body = fatal_body();
        match ledger::record_dead(conn, new_event, &chain, FATAL_STATUS, &body, expiry).await? {
            Some(stored) => Ok(Reply {
                status: stored.status,
                body: stored.body,
                replayed: false,
                retry_after: None,
                outcome: "dead",
            }),
            // Another delivery claimed the event after our rollback: answer as a duplicate.
            None => Ok(in_flight()),
        }
    }

    /// Deferred mode: store durably on `conn` and answer 202; `true` alongside the reply
    /// rings the worker once `conn` is back in the pool.
    async fn accept(
        &self,
        conn: &ledger::Connection,
        config: &SourceConfig,
        event: &Event<'_>,
        new_event: &NewEvent<'_>,
        expiry: &Expiry,
        shadow: bool,
    ) -> Result<(Reply, bool), Failed> {
        let accepted = ledger::accept(conn, new_event, expiry).await?;
        Ok(match accepted {
            Accept::Accepted => (accepted_reply(false, "accepted"), true),
            Accept::Duplicate(_) if shadow => {
                // The answer is what enforcement gives (the event is durable either way).
                self.shadow_run(conn, config, event).await;
                (accepted_reply(true, "shadow_duplicate"), false)
            }
            Accept::Duplicate(_) => (accepted_reply(true, "duplicate"), false),
            Accept::DigestMismatch => (
                Reply::error(
                    409,
                    "digest_mismatch",
                    "event id reused with a different body",
                ),
                false,
            ),
            Accept::InFlight => (in_flight(), false),
        })
    }

    /// Rings the worker after a commit it has work from (a deferred accept, or inline outbox
    /// messages): best effort, since the worker's schedule drains whatever is due anyway.
    async fn ring(&self, event: &Event<'_>) {
        // Boxed: the SDK's invoke future is large, and this sits inside every delivery's future.
        let ring = Box::pin(self.doorbell.ring(event.source, event.event_id));
        if let Err(error) = ring.await {
            tracing::warn!(
                source = event.source,
                event_id = event.event_id,
                %error,
                "doorbell failed; the worker's schedule will drain the event"
            );
            crate::telemetry::count(MetricName::DoorbellFailed, event.source, 1);
        }
    }

    /// Shadow mode: run the handler for a duplicate in its own transaction, leaving the ledger
    /// alone, and count what enforcement would have skipped. Its outbox messages were queued by
    /// the first run under the same keys, so it queues none. A failure is logged, never
    /// answered.
    async fn shadow_run(
        &self,
        conn: &ledger::Connection,
        config: &SourceConfig,
        event: &Event<'_>,
    ) {
        match Box::pin(apply(
            &self.handlers,
            config,
            ledger::begin_shadow(conn),
            event,
        ))
        .await
        {
            Ok(_) => {
                tracing::warn!(
                    source = event.source,
                    event_id = event.event_id,
                    metric = "shadow_duplicate",
                    "shadow mode processed a duplicate that enforcement would skip"
                );
                crate::telemetry::count(MetricName::ShadowDuplicate, event.source, 1);
            }
            Err(error) => tracing::warn!(
                source = event.source,
                event_id = event.event_id,
                error = error.chain(),
                "shadow processing of a duplicate failed"
            ),
        }
    }

    async fn connection(&self) -> Result<ledger::Connection, Failed> {
        self.pool.get().await.map_err(|e| {
            Failed::Unavailable(format!(
                "no database connection: {}",
                crate::db::describe_pool(&e)
            ))
        })
    }
}

/// Why a delivery could not be decided: the 5xx cases.
#[derive(Debug)]
enum Failed {
    /// No connection, or the database is unavailable: 503.
    Unavailable(String),
    /// The database work outlived the client deadline: 503 with `Retry-After`.
    Deadline(String),
    /// Applying the event failed (handler or ledger).
    Apply(ApplyError),
}

impl From<ledger::LedgerError> for Failed {
    fn from(error: ledger::LedgerError) -> Self {
        Failed::Apply(ApplyError::Ledger(error))
    }
}

/// A stored response sent again, with `Idempotent-Replayed: true`.
fn replayed(stored: ledger::StoredResponse, outcome: &'static str) -> Reply {
    Reply {
        status: stored.status,
        body: stored.body,
        replayed: true,
        retry_after: None,
        outcome,
    }
}

fn in_flight() -> Reply {
    let mut reply = Reply::error(409, "in_flight", "event is being processed");
    reply.retry_after = Some(RETRY_AFTER_SECS);
    reply
}

/// Deferred mode's acknowledgement: `202 {"accepted": true, "duplicate": ..}`.
fn accepted_reply(duplicate: bool, outcome: &'static str) -> Reply {
    Reply {
        status: 202,
        body: serde_json::json!({ "accepted": true, "duplicate": duplicate }).to_string(),
        replayed: duplicate,
        retry_after: None,
        outcome,
    }
}

/// Reads the event id, type and payload hashes from a verified body: the event, or the reply
/// that ends the delivery here (a Slack challenge, or a 4xx/5xx for a body that cannot be
/// identified). Fills `trace`'s event id and type.
#[allow(clippy::result_large_err)]
fn identify<'b>(
    trace: &mut Trace<'_>,
    config: &SourceConfig,
    headers: &'b HeaderMap,
    body: &'b [u8],
) -> Result<
    (
        hookledger_verify::extract::EventMeta<'b>,
        hookledger_verify::identity::PayloadHashes,
    ),
    Reply,
> {
    let meta = match extract(config.scheme, config.verifier.generic(), headers, body) {
        Ok(Extracted::Event(meta)) => meta,
        Ok(Extracted::Challenge(challenge)) => {
            // Slack's url_verification handshake: signed, answered, not an event.
            return Err(Reply {
                status: 200,
                body: serde_json::json!({ "challenge": challenge }).to_string(),
                replayed: false,
                retry_after: None,
                outcome: "challenge",
            });
        }
        // A generic source without an event id rule: start-up validation should have
        // refused it, so it is our fault (5xx, the provider retries), not the sender's.
        Err(error @ hookledger_verify::extract::ExtractError::NoRule) => {
            trace.detail = Some(error.to_string());
            return Err(Reply::error(500, "internal_error", "internal error"));
        }
        Err(error) => {
            trace.detail = Some(error.to_string());
            return Err(Reply::error(400, "bad_request", error.reason()));
        }
    };
    trace.event_id = Some(meta.event_id.clone().into_owned());
    trace.event_type = Some(meta.event_type.clone().into_owned());
    // The full-body digest (audit) and the payload identity (what a retry must match:
    // Stripe re-renders `pending_webhooks` at each attempt), in one pass when they agree.
    match hookledger_verify::identity::payload_hashes(config.scheme, body) {
        Ok(hashes) => Ok((meta, hashes)),
        Err(error) => {
            trace.detail = Some(error.to_string());
            Err(Reply::error(400, "bad_request", error.reason()))
        }
    }
}

/// What replay records for an event it did not write: `200 {"duplicate": ...}` with the
/// outcome `new` (a dry run's absent key) or `duplicate`.
fn dry_run_reply(outcome: &'static str) -> Reply {
    Reply {
        status: 200,
        body: serde_json::json!({ "duplicate": outcome == "duplicate" }).to_string(),
        replayed: false,
        retry_after: None,
        outcome,
    }
}
