//! The [`Receiver`] and a delivery's way through it: verify the signature, then (shared with
//! replay) identify the event, take the source's shape (inline or deferred) within the client
//! deadline, ring the worker when there is work, and turn a failure into its 5xx.

use std::time::{Instant, SystemTime};

use http::HeaderMap;

use super::identify::{identify, Identified};
use super::kept::Kept;
use super::log::{self, Trace};
use super::outcome::Outcome;
use super::reply::{Reply, RETRY_AFTER_SECS};
use crate::apply::ApplyError;
use crate::config::{Mode, Settings, SourceConfig};
use crate::db::Pool;
use crate::doorbell::Doorbell;
use crate::effect::Event;
use crate::handler::Registry;
use crate::ledger::{self, Expiry, NewEvent};
use crate::sources_refresh::LiveSources;
use crate::telemetry::MetricName;
use hookledger_verify::extract::EventMeta;

/// The URL a provider signed: `public_url` (the source's configured URL) followed by the query
/// of the request's `url`, or the request's `url` itself when none is configured.
pub fn signed_url(public_url: Option<&str>, url: &str) -> String {
    match public_url {
        None => url.to_owned(),
        Some(public) => match url.split_once('?') {
            Some((_, query)) => format!("{public}?{query}"),
            None => public.to_owned(),
        },
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
    /// Payload encryption's keys (`Settings::payload_keys`), for the sources with
    /// `encrypt_payload`.
    pub payload_keys: Option<std::sync::Arc<crate::privacy::keys::PayloadKeys>>,
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
            payload_keys: settings.payload_keys.clone(),
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
    /// event_id, outcome, status, latency_ms; never the body or a signature). A refused
    /// delivery (401, 404, 409 digest mismatch, 413, 400) is then counted in
    /// `rejected_delivery` ([`crate::rejected`]); any other pays nothing for it.
    pub async fn receive(&self, source: &str, headers: &HeaderMap, body: &[u8], now: i64) -> Reply {
        self.receive_at(source, "", headers, body, now).await
    }

    /// [`Self::receive`] for a request whose URL is known: `url` is the request URL as it
    /// arrived (scheme, host, path and query; `""` when unknown). A scheme that signs the URL
    /// (Twilio, Square) verifies against it, or against the source's `public_url` with the
    /// request's query when one is configured ([`signed_url`]).
    pub async fn receive_at(
        &self,
        source: &str,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Reply {
        let started = Instant::now();
        let mut trace = Trace {
            source,
            event_id: None,
            event_type: None,
            key_index: None,
            detail: None,
        };
        let reply = self
            .decide(&mut trace, source, url, headers, body, now)
            .await;
        log::delivery(&self.sources, &trace, &reply, started.elapsed());
        self.count_rejection(source, reply.outcome).await;
        reply
    }

    /// Meta's subscription check, a GET on the source's path with `query` (the raw query
    /// string): `hub.mode=subscribe`, `hub.verify_token` equal to the source's `verify_token`
    /// (compared in constant time) and `hub.challenge`, answered 200 with the challenge as
    /// `text/plain`. A token that differs is 403; a missing or unreasonable challenge 400.
    /// `None` for an unknown source or one without a `verify_token`: the GET is then refused
    /// like any method other than POST. Nothing is written but the count of a refusal; one log
    /// line records it (never the token).
    pub async fn subscribe(&self, source: &str, query: &str) -> Option<Reply> {
        let config = self.sources.get(source)?;
        let expected = config.verify_token.as_ref()?;
        let field = |name: &str| {
            form_urlencoded::parse(query.as_bytes())
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.into_owned())
        };
        let token = field("hub.verify_token").unwrap_or_default();
        let matches: bool = {
            use secrecy::ExposeSecret;
            use subtle::ConstantTimeEq;
            token
                .as_bytes()
                .ct_eq(expected.expose_secret().as_bytes())
                .into()
        };
        if field("hub.mode").as_deref() != Some("subscribe") || !matches {
            return Some(
                self.refuse(source, 403, Outcome::Unauthorized, "verification failed")
                    .await,
            );
        }
        let challenge = field("hub.challenge").unwrap_or_default();
        if challenge.is_empty()
            || challenge.len() > 1024
            || !challenge.bytes().all(|b| b.is_ascii_graphic())
        {
            return Some(
                self.refuse(
                    source,
                    400,
                    Outcome::BadRequest,
                    "hub.challenge missing or malformed",
                )
                .await,
            );
        }
        let reply = Reply {
            status: 200,
            content_type: "text/plain",
            body: challenge,
            replayed: false,
            retry_after: None,
            outcome: Outcome::Challenge,
        };
        tracing::info!(
            source,
            outcome = Outcome::Challenge.as_str(),
            status = 200,
            "subscription check answered"
        );
        Some(reply)
    }

    /// Refuses a delivery the transport could not read (e.g. a body flagged base64 that does
    /// not decode), with `{"error": reason}`, logging the delivery line like [`Self::receive`]
    /// and counting it like a refusal of [`Self::receive`] (a `bad_request`; not a path that
    /// names no source, nor a method other than POST).
    pub async fn refuse(&self, source: &str, status: u16, outcome: Outcome, reason: &str) -> Reply {
        let reply = Reply::error(status, outcome, reason);
        log::refusal(&self.sources, source, status, outcome, reason);
        self.count_rejection(source, outcome).await;
        reply
    }

    /// Counts a refused delivery in `rejected_delivery` ([`crate::rejected::record`]) once its
    /// answer is decided: one upsert under `source` (or [`crate::rejected::UNKNOWN_SOURCE`]
    /// when it is not configured: the path's name is the sender's choice) and the outcome's
    /// [`crate::rejected::Reason`]. Nothing at all for an outcome that is not a refusal, so an
    /// accepted delivery costs no statement. Bounded by [`REJECTION_COUNT_DEADLINE`] (or the
    /// client deadline when shorter), on a connection of the same pool (opened now if none
    /// is). A failure is a warning line; the answer stays what was decided.
    async fn count_rejection(&self, source: &str, outcome: Outcome) {
        let Some(reason) = outcome.rejection() else {
            return;
        };
        let key = if self.sources.get(source).is_some() {
            source
        } else {
            crate::rejected::UNKNOWN_SOURCE
        };
        let at = SystemTime::now();
        let counted = crate::db::deadline::within(
            self.deadline.min(REJECTION_COUNT_DEADLINE),
            self.connection(),
            async |conn: &ledger::Connection| {
                crate::rejected::record(conn, key, reason, at)
                    .await
                    .map_err(Failed::from)
            },
        )
        .await;
        let error = match counted {
            Ok(Ok(())) => return,
            Ok(Err(failed)) => failed.detail(),
            Err(exceeded) => exceeded.to_string(),
        };
        tracing::warn!(
            source = key,
            reason = reason.as_str(),
            error = error.as_str(),
            "rejected delivery not counted"
        );
    }

    async fn decide(
        &self,
        trace: &mut Trace<'_>,
        source: &str,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Reply {
        // Sources older than the max age are re-read first (by this delivery only; others
        // meanwhile use the ones in force), so a secret removed from them stops verifying
        // even if no signature ever fails.
        self.sources.refresh_if_stale(source).await;
        let Some(mut config) = self.sources.get(source) else {
            return Reply::error(404, Outcome::UnknownSource, "unknown source");
        };
        if body.len() > config.max_body_bytes {
            trace.detail = Some(format!(
                "{} bytes over the limit of {}",
                body.len(),
                config.max_body_bytes
            ));
            return Reply::error(413, Outcome::TooLarge, "body too large");
        }
        // The signature is checked before the body is parsed at all.
        let url = signed_url(config.public_url.as_deref(), url);
        let request = hookledger_verify::Request {
            method: "POST",
            url: &url,
            headers,
            body,
        };
        let verified = match config.verifier.verify_request(&request, now) {
            // A secret rotated since the sources were read: re-read them (rate-limited) and
            // verify once more.
            Err(error) => match self
                .sources
                .reverify(source, &config, &error, &request, now)
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
                return Reply::error(401, Outcome::Unauthorized, error.reason());
            }
        }
        self.process(trace, &config, headers, body, false).await
    }

    /// Everything after the signature: identify the event, claim it (inline) or accept it
    /// (deferred), and answer.
    pub(super) async fn process(
        &self,
        trace: &mut Trace<'_>,
        config: &SourceConfig,
        headers: &HeaderMap,
        body: &[u8],
        replayed: bool,
    ) -> Reply {
        match identify(trace, config, headers, body) {
            Ok(Identified::One(meta, kept)) => {
                let kept = match self.seal(trace, config, &meta.event_id, kept).await {
                    Ok(kept) => kept,
                    Err(reply) => return reply,
                };
                self.process_one(trace, config, &meta, &kept, body, replayed)
                    .await
            }
            Ok(Identified::Batch(events)) => {
                let mut sealed = Vec::with_capacity(events.len());
                for (meta, kept) in events {
                    match self.seal(trace, config, &meta.event_id, kept).await {
                        Ok(kept) => sealed.push((meta, kept)),
                        Err(reply) => return reply,
                    }
                }
                self.process_batch(trace, config, &sealed, replayed).await
            }
            Err(reply) => reply,
        }
    }

    /// The keys a source's stored responses are sealed with: `Some` when it encrypts
    /// (`encrypt_payload`) and keys are configured.
    pub(super) fn sealing(
        &self,
        config: &SourceConfig,
    ) -> Option<&crate::privacy::keys::PayloadKeys> {
        match config.encrypt_payload {
            true => self.payload_keys.as_deref(),
            false => None,
        }
    }

    /// `kept` sealed when the source encrypts its payloads, else as it is; a data key that
    /// cannot be had (KMS unavailable, or no master key configured) is our fault: 503, the
    /// provider retries, nothing is written.
    async fn seal<'b>(
        &self,
        trace: &mut Trace<'_>,
        config: &SourceConfig,
        event_id: &str,
        kept: Kept<'b>,
    ) -> Result<Kept<'b>, Reply> {
        if !config.encrypt_payload {
            return Ok(kept);
        }
        let sealed = match &self.payload_keys {
            Some(keys) => kept
                .sealed(keys, &config.name, event_id)
                .await
                .map_err(|error| format!("cannot seal the payload: {error}")),
            None => Err("encrypt_payload is set but no master key is configured".to_owned()),
        };
        sealed.map_err(|detail| {
            trace.detail = Some(detail);
            Reply::error(503, Outcome::Unavailable, "service unavailable")
        })
    }

    /// One event after the signature: claim it (inline) or accept it (deferred), and answer.
    /// `body` is the event's own bytes (the delivery's body, or a batch item's).
    pub(super) async fn process_one(
        &self,
        trace: &mut Trace<'_>,
        config: &SourceConfig,
        meta: &EventMeta<'_>,
        kept: &Kept<'_>,
        body: &[u8],
        replayed: bool,
    ) -> Reply {
        // A replayed duplicate is not a delivery: shadow mode does not process it again.
        let shadow = config.shadow && !replayed;
        let (event, new_event) = event_of(config, meta, kept, body, replayed);
        let expiry = expiry_now(config);
        // Past the deadline the connection is closed, never returned to the pool.
        let decided = crate::db::deadline::within(
            self.deadline,
            self.ready_connection(),
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
        self.answer(trace, &event, decided).await
    }

    /// The answer to `event` once its database work is `decided` (the connection back in the
    /// pool): names the event in `trace`, rings the worker when the commit left it work, notes
    /// a digest mismatch or a replayed body in `trace` (and counts the mismatch), and turns a
    /// failure into its 5xx. The one place a single event and a batch's item are answered.
    pub(super) async fn answer(
        &self,
        trace: &mut Trace<'_>,
        event: &Event<'_>,
        decided: Result<(Reply, bool), Failed>,
    ) -> Reply {
        let source = event.source;
        trace.event_id = Some(event.event_id.to_owned());
        trace.event_type = Some(event.event_type.to_owned());
        let decided = match decided {
            // A body replayed under another id was opened with its original row's key.
            Ok((reply, ring)) if reply.outcome != Outcome::BodyReplayed => self
                .opened(event.source, event.event_id, reply)
                .await
                .map(|reply| (reply, ring)),
            failed => failed,
        };
        match decided {
            Ok((reply, ring)) => {
                if ring {
                    self.ring(event).await;
                }
                if reply.outcome == Outcome::DigestMismatch {
                    trace.detail =
                        Some("stored payload identity differs from this body's".to_owned());
                    crate::telemetry::count(MetricName::DigestMismatch, source, 1);
                }
                if reply.outcome == Outcome::BodyReplayed {
                    trace.detail = Some(super::reply::BODY_REPLAYED_REASON.to_owned());
                }
                reply
            }
            Err(Failed::Unavailable(detail)) => {
                trace.detail = Some(detail);
                Reply::error(503, Outcome::Unavailable, "service unavailable")
            }
            Err(Failed::Deadline(detail)) => {
                trace.detail = Some(detail);
                let mut reply = Reply::error(503, Outcome::Unavailable, "service unavailable");
                reply.retry_after = Some(RETRY_AFTER_SECS);
                reply
            }
            Err(Failed::Refused(detail)) => {
                trace.detail = Some(detail);
                Reply::error(500, Outcome::InternalError, "internal error")
            }
            Err(Failed::Apply(error)) => {
                trace.detail = Some(error.chain());
                if error.is_unavailable() {
                    Reply::error(503, Outcome::Unavailable, "service unavailable")
                } else if matches!(error, ApplyError::Retryable(_)) {
                    Reply::error(500, Outcome::HandlerFailed, "internal error")
                } else {
                    Reply::error(500, Outcome::InternalError, "internal error")
                }
            }
        }
    }

    /// `reply` with its body opened when it is `(source, event_id)`'s stored response in the
    /// sealed form
    /// (`crate::privacy::response`: a source with `encrypt_payload`), so a retry gets the same
    /// bytes as the first answer.
    ///
    /// # Errors
    /// [`Failed::Unavailable`] when no key can open it now (KMS unavailable, or no keys
    /// configured: the provider retries), [`Failed::Refused`] when it fails authentication (a
    /// value moved from another row: our fault, 500).
    pub(super) async fn opened(
        &self,
        source: &str,
        event_id: &str,
        mut reply: Reply,
    ) -> Result<Reply, Failed> {
        if crate::privacy::response::envelope_of(&reply.body).is_none() {
            return Ok(reply);
        }
        let Some(keys) = &self.payload_keys else {
            return Err(Failed::Unavailable(
                "the stored response is sealed and no master key is configured".to_owned(),
            ));
        };
        match crate::privacy::response::open_response(keys, source, event_id, &reply.body).await {
            Ok(Some(body)) => {
                reply.body = body;
                Ok(reply)
            }
            Ok(None) => Ok(reply),
            Err(error) if error.is_retryable() => Err(Failed::Unavailable(format!(
                "cannot open the stored response: {error}"
            ))),
            Err(error) => Err(Failed::Refused(format!(
                "cannot open the stored response: {error}"
            ))),
        }
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
                error = %crate::error_chain::error_chain(&error),
                "doorbell failed; the worker's schedule will drain the event"
            );
            crate::telemetry::count(MetricName::DoorbellFailed, event.source, 1);
        }
    }

    /// A connection to process an event on, once this process's SQL handlers are known to
    /// prepare against the schema ([`Registry::ready`]): a statement the database refuses
    /// makes every delivery a 500 (providers retry) until the function is redeployed.
    pub(super) async fn ready_connection(&self) -> Result<ledger::Connection, Failed> {
        let conn = self.connection().await?;
        match self.handlers.ready(&conn).await {
            Ok(()) => Ok(conn),
            Err(crate::handler::NotReady::Refused(error)) => Err(Failed::Refused(error)),
            Err(unchecked @ crate::handler::NotReady::Unchecked(_)) => Err(Failed::Unavailable(
                crate::error_chain::error_chain(&unchecked),
            )),
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

/// `meta`'s event (`body` its own bytes) as the handlers see it and as the ledger claims it.
pub(super) fn event_of<'a>(
    config: &'a SourceConfig,
    meta: &'a EventMeta<'_>,
    kept: &'a Kept<'_>,
    body: &'a [u8],
    replayed: bool,
) -> (Event<'a>, NewEvent<'a>) {
    let source = config.name.as_str();
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
        digest: &kept.hashes.digest,
        identity: &kept.hashes.identity,
        // Inline, the row is completed in the claim's transaction: it keeps the completed
        // copy. Deferred, the worker processes the stored body: it keeps it as received.
        payload: match config.mode {
            Mode::Inline => kept.completed.as_deref(),
            Mode::Deferred => kept.unfinished.as_deref(),
        },
        dead_payload: kept.unfinished.as_deref(),
        subject: kept.subject.as_ref(),
        replayed,
        // GitHub, Shopify, a generic source reading a header: one event per verified body
        // (the ledger's replay guard), or a captured body could come back under a new id.
        unsigned_id: !config.verifier.signs_id_and_type(),
    };
    (event, new_event)
}

/// The source's retention judged now: a key past it counts as absent, swept or not.
pub(super) fn expiry_now(config: &SourceConfig) -> Expiry {
    Expiry {
        retention: config.retention.retention,
        now: SystemTime::now(),
    }
}

/// The longest a refused delivery's answer waits for its count in `rejected_delivery` (an
/// upsert takes about a millisecond): past it the count is given up, with a warning, and the
/// answer goes out as decided.
pub const REJECTION_COUNT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

/// Why a delivery could not be decided: the 5xx cases.
#[derive(Debug)]
pub(super) enum Failed {
    /// No connection, or the database is unavailable: 503.
    Unavailable(String),
    /// The database work outlived the client deadline: 503 with `Retry-After`.
    Deadline(String),
    /// Applying the event failed (handler or ledger).
    Apply(ApplyError),
    /// A SQL handler's statement does not prepare against the schema: 500 for every delivery
    /// until the configuration or the schema is fixed.
    Refused(String),
}

impl Failed {
    /// What failed, with its causes, for a log line.
    fn detail(self) -> String {
        match self {
            Failed::Unavailable(detail) | Failed::Deadline(detail) | Failed::Refused(detail) => {
                detail
            }
            Failed::Apply(error) => error.chain(),
        }
    }
}

impl From<ledger::LedgerError> for Failed {
    fn from(error: ledger::LedgerError) -> Self {
        Failed::Apply(ApplyError::Ledger(error))
    }
}
