//! The limits every scheme shares: header length, signatures per header, the default tolerance.

/// Longest signature-related header value accepted, in bytes (8 KiB).
///
/// Longer values are [`VerifyError::MalformedHeader`](crate::VerifyError::MalformedHeader). Real values are far shorter: Stripe sends
/// one `t` and a few `v1` entries (~80 bytes each), GitHub ~71 bytes, Standard Webhooks ~47
/// bytes per signature, Shopify 44, Slack 67, Paddle ~70 per `h1`.
pub const MAX_HEADER_LEN: usize = 8 * 1024;

/// Most signatures of one header that are considered; later ones are ignored.
///
/// Providers send one signature per active secret (two during a rotation), so 16 is generous;
/// the cap bounds the comparisons a hostile header can cause.
pub const MAX_SIGNATURES: usize = 16;

/// Default timestamp tolerance, in seconds, for the schemes that sign a timestamp (300 s).
///
/// Source: Stripe's libraries (`DEFAULT_TOLERANCE = 300`), the Standard Webhooks specification
/// ("five minutes") and Slack's docs ("more than five minutes").
///
/// Paddle's SDKs default to 5 s (`maximum_variance = 5`). We do not: `ts` is stamped when
/// Paddle sends, and a Lambda cold start (runtime init, fetching secrets, opening the database
/// pool) plus network delay and retries on Paddle's side can take longer than 5 s, which would
/// reject authentic deliveries. Replays inside the window are absorbed by the ledger's
/// idempotency on the event id. A source can still configure a tighter tolerance.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;
