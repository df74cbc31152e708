//! The deferred shape: store the event durably and answer 202; the worker applies it later
//! (the receiver rings it once the connection is back in the pool).

use super::outcome::Outcome;
use super::receiver::{Failed, Receiver};
use super::reply::{accepted_reply, in_flight, Reply};
use crate::config::SourceConfig;
use crate::effect::Event;
use crate::ledger::{self, Accept, Expiry, NewEvent};

impl Receiver {
    /// Deferred mode: store durably on `conn` and answer 202; `true` alongside the reply
    /// rings the worker once `conn` is back in the pool.
    pub(super) async fn accept(
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
            Accept::Accepted => (accepted_reply(false, Outcome::Accepted), true),
            Accept::Duplicate(_) if shadow => {
                // The answer is what enforcement gives (the event is durable either way).
                self.shadow_run(conn, config, event).await;
                (accepted_reply(true, Outcome::ShadowDuplicate), false)
            }
            Accept::Duplicate(_) => (accepted_reply(true, Outcome::Duplicate), false),
            Accept::DigestMismatch => (
                Reply::error(
                    409,
                    Outcome::DigestMismatch,
                    "event id reused with a different body",
                ),
                false,
            ),
            Accept::InFlight => (in_flight(), false),
            // A captured body sent again under another id or type: the same 202 as a
            // duplicate, nothing stored, no worker rung.
            Accept::BodyReplayed(original) => {
                super::log::body_replayed(new_event, &original.event_id);
                (accepted_reply(true, Outcome::BodyReplayed), false)
            }
        })
    }
}
