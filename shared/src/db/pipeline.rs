//! Pipelining on one connection: futures polled strictly in the order given.
//!
//! tokio-postgres sends a statement's messages on the first poll of its future and matches
//! replies in order, so polling several futures of one connection in order sends them
//! back-to-back and pays one round trip for all of them. The order matters (`BEGIN` must go
//! out before the claim, `COMMIT` after everything), which is why this module exists instead of
//! a join whose polling order is unspecified (tokio's `join!` rotates it).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::{maybe_done, MaybeDone};

/// Awaits `first` and `second` together, polling `first` before `second` on every wake-up.
pub(crate) async fn in_order<A: Future, B: Future>(first: A, second: B) -> (A::Output, B::Output) {
    let mut first = std::pin::pin!(maybe_done(first));
    let mut second = std::pin::pin!(maybe_done(second));
    std::future::poll_fn(|cx| {
        let a = first.as_mut().poll(cx).is_ready();
        let b = second.as_mut().poll(cx).is_ready();
        if a && b {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    // Both are `Done` here, so `take_output` yields each output exactly once.
    match (first.as_mut().take_output(), second.as_mut().take_output()) {
        (Some(a), Some(b)) => (a, b),
        _ => unreachable!("both futures completed"),
    }
}

/// Awaits every future in `futures`, polling them in vector order on every wake-up.
pub(crate) async fn all_in_order<F: Future + Unpin>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<MaybeDone<F>> = futures.into_iter().map(maybe_done).collect();
    std::future::poll_fn(|cx: &mut Context<'_>| {
        let mut all_ready = true;
        for future in pending.iter_mut() {
            all_ready &= Pin::new(future).poll(cx).is_ready();
        }
        if all_ready {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    pending
        .iter_mut()
        .filter_map(|future| Pin::new(future).take_output())
        .collect()
}
