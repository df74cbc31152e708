//! Replay's entry into the receive path ([`Receiver::replay`]): an event fetched from the
//! provider's API with its credential goes the verified delivery's way from identification on,
//! or, in a dry run, is only looked up.

use std::time::SystemTime;

use http::HeaderMap;

use super::identify::{identify, Identified};
use super::log::{self, Trace};
use super::outcome::Outcome;
use super::receiver::Receiver;
use super::reply::{dry_run_reply, Reply};
use crate::config::SourceConfig;
use crate::ledger::{self, Expiry};

impl Receiver {
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
            Reply::error(413, Outcome::TooLarge, "body too large")
        } else if dry_run {
            self.peek(&mut trace, config, body).await
        } else {
            self.process(&mut trace, config, &HeaderMap::new(), body, true)
                .await
        };
        log::replay(&trace, &reply, dry_run);
        reply
    }

    /// A dry run of [`Self::replay`]: identify the event and read its key, write nothing.
    async fn peek(&self, trace: &mut Trace<'_>, config: &SourceConfig, body: &[u8]) -> Reply {
        let headers = HeaderMap::new();
        let meta = match identify(trace, config, &headers, body) {
            Ok(Identified::One(meta, _)) => meta,
            // Replay fetches single events from a provider's API: a batch never comes here.
            Ok(Identified::Batch(_)) => {
                return Reply::error(400, Outcome::BadRequest, "a batch cannot be replayed")
            }
            Err(reply) => return reply,
        };
        let conn = match self.pool.get().await {
            Ok(conn) => conn,
            Err(error) => {
                trace.detail = Some(crate::db::describe_pool(&error));
                return Reply::error(503, Outcome::Unavailable, "service unavailable");
            }
        };
        let expiry = Expiry {
            retention: config.retention.retention,
            now: SystemTime::now(),
        };
        match ledger::lookup(&conn, &config.name, &meta.event_id).await {
            Ok(Some(row)) if !row.is_expired(&expiry) => dry_run_reply(Outcome::Duplicate),
            Ok(_) => dry_run_reply(Outcome::New),
            Err(error) => {
                trace.detail = Some(error.to_string());
                Reply::error(503, Outcome::Unavailable, "service unavailable")
            }
        }
    }
}
