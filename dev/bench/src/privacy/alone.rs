//! What the receiver seals and opens per new delivery of `stripe-on`, timed apart from the
//! rest of the delivery: no database, no handler.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use serde_json::json;
use shared::privacy::keys::{Column, PayloadKeys};
use shared::privacy::response::{open_response, seal_response};

use super::Variant;

/// What the receiver seals and opens per new delivery of `stripe-on`, timed apart from
/// everything else (no database, no handler): its payload sealed, the example handler's
/// response sealed in its stored form (`shared::privacy::response::seal_response`), and that
/// form opened again to answer (`open_response`: the receiver answers a new event with the
/// response as stored, opened).
#[derive(Debug, Clone, Copy)]
pub struct Alone {
    /// Calls of each kind timed one by one.
    pub calls: usize,
    /// The payload's length.
    pub body_bytes: usize,
    /// One thread, each call timed: the payload's seal, median ns.
    pub seal_median_ns: f64,
    /// Its p99, ns.
    pub seal_p99_ns: f64,
    /// One thread, each call timed: the response's sealed form, median ns.
    pub response_median_ns: f64,
    /// One thread, each call timed: the response's sealed form opened to answer, median ns.
    pub answer_median_ns: f64,
    /// One thread, each call timed: the payload opened again (the worker's, the console's),
    /// median ns.
    pub open_median_ns: f64,
    /// The three from `concurrency` tasks on the bench's runtime at once: this process's CPU
    /// (getrusage) ÷ deliveries' worth.
    pub concurrent_cpu_us: f64,
    /// Tasks at once in the concurrent measurement.
    pub concurrency: usize,
}

/// Times [`SEALS_ALONE`] calls of each of `stripe-on`'s seals and opens of one delivery (after
/// a warm-up) on one thread, then as many deliveries' worth of the three from `concurrency`
/// tasks at once.
pub(super) async fn measure(
    keys: &Arc<PayloadKeys>,
    variant: &Variant,
    now: i64,
    concurrency: usize,
) -> Result<Alone> {
    let (_, body) = variant
        .deliveries(now, Some(0), 1, now)
        .pop()
        .context("one delivery")?;
    let response = json!({"order_id": "ord_bench_seal_alone_0", "status": "recorded"});
    let (source, event_id) = (variant.source, "evt_seal_alone");
    let mut sealed = Vec::new();
    for _ in 0..1000 {
        sealed = keys.seal(source, event_id, Column::Payload, &body).await?;
        keys.open(source, event_id, Column::Payload, &sealed)
            .await?;
        seal_response(keys, source, event_id, &response).await?;
    }
    let stored = seal_response(keys, source, event_id, &response)
        .await?
        .to_string();
    let (mut seals, mut responses, mut opens) = (Vec::new(), Vec::new(), Vec::new());
    let mut answers = Vec::new();
    for _ in 0..SEALS_ALONE {
        let t0 = Instant::now();
        let fresh = keys.seal(source, event_id, Column::Payload, &body).await?;
        seals.push(t0.elapsed().as_nanos() as f64);
        let t0 = Instant::now();
        std::hint::black_box(seal_response(keys, source, event_id, &response).await?);
        responses.push(t0.elapsed().as_nanos() as f64);
        let t0 = Instant::now();
        let answer = open_response(keys, source, event_id, &stored).await?;
        answers.push(t0.elapsed().as_nanos() as f64);
        ensure!(answer.is_some(), "the stored response did not open");
        let t0 = Instant::now();
        let plain = keys
            .open(source, event_id, Column::Payload, &sealed)
            .await?;
        opens.push(t0.elapsed().as_nanos() as f64);
        ensure!(
            plain == body,
            "a payload sealed alone did not open to itself"
        );
        sealed = fresh;
    }
    for v in [&mut seals, &mut responses, &mut answers, &mut opens] {
        v.sort_by(f64::total_cmp);
    }
    let body = Arc::new(body);
    let response = Arc::new(response);
    let stored = Arc::new(stored);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = crate::own_cpu();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (keys, body, response, stored, next) = (
            keys.clone(),
            body.clone(),
            response.clone(),
            stored.clone(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < SEALS_ALONE {
                keys.seal(source, event_id, Column::Payload, &body).await?;
                seal_response(&keys, source, event_id, &response).await?;
                open_response(&keys, source, event_id, &stored).await?;
                // Let the other tasks in, as the receiver's awaits on the database do.
                tokio::task::yield_now().await;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let cpu = crate::own_cpu().since(cpu_before);
    Ok(Alone {
        calls: SEALS_ALONE,
        body_bytes: body.len(),
        seal_median_ns: crate::percentile(&seals, 0.5),
        seal_p99_ns: crate::percentile(&seals, 0.99),
        response_median_ns: crate::percentile(&responses, 0.5),
        answer_median_ns: crate::percentile(&answers, 0.5),
        open_median_ns: crate::percentile(&opens, 0.5),
        concurrent_cpu_us: (cpu.user_s + cpu.sys_s) * 1e6 / SEALS_ALONE as f64,
        concurrency,
    })
}

/// Calls of each kind timed by [`measure`].
const SEALS_ALONE: usize = 20_000;
