//! The one place the receiver's Lambda service stack is put together: the function's `main.rs`,
//! the end-to-end tests and `make chaos`'s `chaos-receiver` all run [`stack`].
//!
//! From the outside in:
//! - [`ReadableEvent`] (unreadable.rs): takes the invocation as raw JSON; an event lambda_http
//!   cannot read because a header holds a CR, LF or NUL is answered 400 instead of failing the
//!   invocation (which API Gateway would turn into a 502);
//! - [`Base64Guard`] (transport.rs): a body flagged `isBase64Encoded` that is not base64 is
//!   answered 400 (lambda_http would panic);
//! - `lambda_http::Adapter`: the Lambda event into an `http::Request`, the response back.

use lambda_http::{Adapter, IntoResponse, Request, Service};
use lambda_runtime::Diagnostic;

use crate::transport::Base64Guard;
use crate::unreadable::ReadableEvent;

/// The receiver's service stack around `handler` (normally
/// `service_fn(|request| function_handler(state, request))`), as `lambda_runtime::run` takes
/// it. `lambda_http::run(handler)` is `lambda_runtime::run(Adapter::from(handler))`: this
/// stack without the two guards.
pub fn stack<'a, R, S, E>(handler: S) -> ReadableEvent<Base64Guard<Adapter<'a, R, S>>>
where
    S: Service<Request, Response = R, Error = E>,
    S::Future: Send + 'a,
    R: IntoResponse,
    E: std::fmt::Debug + Into<Diagnostic>,
{
    ReadableEvent::new(Base64Guard::new(Adapter::from(handler)))
}
