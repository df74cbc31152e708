//! Shadow mode: a duplicate enforcement would skip is processed anyway, in a transaction of
//! its own that leaves the ledger alone, and counted; the answer stays enforcement's.

use super::receiver::Receiver;
use crate::apply::apply;
use crate::config::SourceConfig;
use crate::effect::Event;
use crate::ledger;
use crate::telemetry::MetricName;

impl Receiver {
    /// Shadow mode: run the handler for a duplicate in its own transaction, leaving the ledger
    /// alone, and count what enforcement would have skipped. Its outbox messages were queued by
    /// the first run under the same keys, so it queues none. A failure is logged, never
    /// answered.
    pub(super) async fn shadow_run(
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
            // Nothing of a shadow run is stored, so nothing to seal.
            None,
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
}
