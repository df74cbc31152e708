//! `make chaos`: the receiver and the worker as real separate processes (several receiver
//! processes, as several Lambda execution environments would be), against a throwaway
//! PostgreSQL, driven by a provider simulator, under the faults a Lambda receiver and its
//! database really meet. Each scenario counts events sent, attempts, 2xx received, business
//! effects, outbox messages received, duplicates, lost events and the longest wait, and passes
//! only when every event acknowledged with a 2xx has exactly one effect, nothing acknowledged
//! is lost and no process panicked. The results go to `RELIABILITY.md`.
//!
//! Loopback only; bounded in time and request count.

pub mod handlers;
pub mod proxy;
pub mod scenarios;
