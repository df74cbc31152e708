//! What the claim traffic claims: its live events, a new one claimed and completed, and a
//! duplicate through `shared::ledger::claim` (the BASELINE duplicate is in `baseline.rs`).

use std::time::SystemTime;

use anyhow::Result;
use sha2::{Digest, Sha256};
use shared::db::Connection;
use shared::ledger::{self, Claim, Expiry, NewEvent};
use shared::retention::Retention;

use crate::sources::SOURCES;

/// A live event of the claim traffic: its source, id, body and the body's SHA-256.
#[derive(Clone)]
pub struct LiveEvent {
    source: &'static str,
    id: String,
    body: Vec<u8>,
    digest: [u8; 32],
}

impl LiveEvent {
    /// Event number `n`: source alternating, a 1.0 to 1.8 KB body.
    pub fn new(n: u64) -> Self {
        let source = SOURCES[(n % 2) as usize];
        let id = format!("evt_live_{n:09}");
        // A realistic body: 1.0 to 1.8 KB of JSON.
        let pad_len = 900 + (n * 7919 % 800) as usize;
        let pad: String = std::iter::repeat_n(format!("{:016x}", n.wrapping_mul(0x9e37_79b9)), 64)
            .collect::<String>()
            .chars()
            .take(pad_len)
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({
            "id": id, "object": "event", "type": "payment_intent.succeeded",
            "data": {"object": {"id": format!("pi_{n}"), "amount": 1000 + n, "currency": "usd",
                "description": pad}}
        }))
        .unwrap_or_default();
        let digest: [u8; 32] = Sha256::digest(&body).into();
        Self {
            source,
            id,
            body,
            digest,
        }
    }

    /// The event as the ledger claims it.
    pub fn as_new(&self) -> NewEvent<'_> {
        NewEvent {
            source: self.source,
            event_id: &self.id,
            event_type: "payment_intent.succeeded",
            digest: &self.digest,
            identity: &self.digest,
            payload: Some(&self.body),
            dead_payload: Some(&self.body),
            subject: None,
            replayed: false,
            unsigned_id: false,
        }
    }
}

/// A new event: claim, then complete with a small response. `Ok(true)` when it was won and
/// committed.
pub async fn claim_new(conn: &Connection, event: &LiveEvent) -> Result<bool> {
    let expiry = Expiry {
        retention: Retention::default(),
        now: SystemTime::now(),
    };
    match ledger::claim(conn, &event.as_new(), &expiry).await? {
        Claim::Won(tx) => {
            tx.complete(
                (event.source, &event.id),
                200,
                &serde_json::json!({"received": true}),
            )
            .await?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// A duplicate through `shared::ledger::claim`: `Ok(true)` when answered with the stored
/// response.
pub async fn current_duplicate(conn: &Connection, event: &NewEvent<'_>) -> Result<bool> {
    let expiry = Expiry {
        retention: Retention::default(),
        now: SystemTime::now(),
    };
    Ok(matches!(
        ledger::claim(conn, event, &expiry).await?,
        Claim::Completed(_)
    ))
}
