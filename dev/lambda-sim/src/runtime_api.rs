//! The Runtime API server of one function process.

use std::collections::HashMap;
use std::convert::Infallible;
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::{mpsc, oneshot, watch, Mutex};

const NEXT: &str = "/2018-06-01/runtime/invocation/next";
const INVOCATION: &str = "/2018-06-01/runtime/invocation/";
const INIT_ERROR: &str = "/2018-06-01/runtime/init/error";
/// The `Lambda-Runtime-Trace-Id` of every invocation (the AWS guide's example).
const TRACE_ID: &str = "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1";

/// Request ids, unique in this process across every [`RuntimeApi`].
static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// What the function posted for an invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `POST .../invocation/{id}/response`: the raw body (for an HTTP function, an API Gateway
    /// response `{"statusCode", "headers", "body"}` as JSON).
    Response(Bytes),
    /// `POST .../invocation/{id}/error`: the raw body (lambda_runtime's
    /// `{"errorType", "errorMessage"}`).
    Error(Bytes),
}

/// The answer to one invocation, with when it was handed out and answered.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The `Lambda-Runtime-Aws-Request-Id` it was handed out with.
    pub request_id: String,
    /// What the function posted.
    pub reply: Reply,
    /// When `GET .../next` handed the event to the function (just before the response left).
    pub served_at: Instant,
    /// When the function's response or error arrived (its body read).
    pub answered_at: Instant,
}

impl Answer {
    /// The response body.
    ///
    /// # Errors
    /// The function posted an invocation error; the error says its request id and body.
    pub fn response(&self) -> Result<&Bytes> {
        match &self.reply {
            Reply::Response(body) => Ok(body),
            Reply::Error(body) => bail!(
                "invocation {} failed: {}",
                self.request_id,
                String::from_utf8_lossy(body)
            ),
        }
    }

    /// The response's `statusCode` ([`crate::status_code`]); `None` for an invocation error
    /// or a response without one.
    pub fn status_code(&self) -> Option<u16> {
        match &self.reply {
            Reply::Response(body) => crate::status_code(body),
            Reply::Error(_) => None,
        }
    }
}

/// An invocation queued by [`RuntimeApi::queue`], not answered yet.
#[derive(Debug)]
pub struct Pending {
    request_id: String,
    answer: oneshot::Receiver<Answer>,
}

impl Pending {
    /// The request id the function will get it with.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// Waits, without bound, for the function's answer.
    ///
    /// # Errors
    /// The [`RuntimeApi`] was dropped before an answer arrived.
    pub async fn answer(self) -> Result<Answer> {
        self.answer
            .await
            .map_err(|_| anyhow!("invocation {}: the runtime API is gone", self.request_id))
    }
}

struct Queued {
    request_id: String,
    event: Bytes,
    deadline_ms: u128,
    answer: oneshot::Sender<Answer>,
}

/// What the server shares with [`RuntimeApi`].
struct State {
    queue: Mutex<mpsc::UnboundedReceiver<Queued>>,
    /// Handed out, not answered yet: request id -> (served at, the waiter).
    handed_out: StdMutex<HashMap<String, (Instant, oneshot::Sender<Answer>)>>,
    function_arn: String,
    first_next: watch::Sender<Option<Instant>>,
    init_errors: watch::Sender<Vec<String>>,
    last_answered: StdMutex<Option<String>>,
}

/// The Lambda Runtime API of one function process, on `127.0.0.1:<port>` (an ephemeral port
/// of its own). Events are handed out in the order queued, one per `GET .../next`; a `next`
/// with nothing queued waits (as Lambda's does, without bound). Dropping it stops accepting
/// connections; a `next` still waiting then hangs until the process goes away.
pub struct RuntimeApi {
    function: String,
    addr: SocketAddr,
    queue: mpsc::UnboundedSender<Queued>,
    state: Arc<State>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl RuntimeApi {
    /// Binds `127.0.0.1:0` and serves the Runtime API of the function named `function` (its
    /// ARN: `arn:aws:lambda:us-east-1:123456789012:function:<function>`).
    ///
    /// # Errors
    /// The listener cannot bind.
    pub async fn start(function: &str) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (queue, queued) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            queue: Mutex::new(queued),
            handed_out: StdMutex::new(HashMap::new()),
            function_arn: format!("arn:aws:lambda:us-east-1:123456789012:function:{function}"),
            first_next: watch::Sender::new(None),
            init_errors: watch::Sender::new(Vec::new()),
            last_answered: StdMutex::new(None),
        });
        let served = state.clone();
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let state = served.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |r| serve(state.clone(), r));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            function: function.to_owned(),
            addr,
            queue,
            state,
            server,
        })
    }

    /// The address it serves on (`AWS_LAMBDA_RUNTIME_API`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The function's name, as given to [`RuntimeApi::start`].
    pub fn function(&self) -> &str {
        &self.function
    }

    /// The environment Lambda sets for a custom runtime, pointing at this API:
    /// `AWS_LAMBDA_RUNTIME_API`, the function's name, memory (256 MB), version, log group and
    /// stream, region `us-east-1`, dummy credentials, `TZ`, `LANG` and `PATH`.
    pub fn env(&self) -> Vec<(String, String)> {
        let function = &self.function;
        [
            ("AWS_LAMBDA_RUNTIME_API", self.addr.to_string()),
            ("AWS_LAMBDA_FUNCTION_NAME", function.clone()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".to_owned()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
            (
                "AWS_LAMBDA_LOG_STREAM_NAME",
                "2026/12/01/[$LATEST]0123456789abcdef".to_owned(),
            ),
            (
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{function}"),
            ),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", "AKIALAMBDASIMDUMMY00".to_owned()),
            (
                "AWS_SECRET_ACCESS_KEY",
                "lambda-sim-dummy-secret".to_owned(),
            ),
            ("AWS_SESSION_TOKEN", "lambda-sim-dummy-token".to_owned()),
            ("TZ", ":UTC".to_owned()),
            ("LANG", "en_US.UTF-8".to_owned()),
            ("PATH", "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// A command for `binary` as Lambda starts a runtime: a cleared environment plus
    /// [`RuntimeApi::env`], stdin from /dev/null, killed when the child handle is dropped. The
    /// caller adds its own environment (which wins) and stdout/stderr, then spawns it.
    pub fn command(&self, binary: impl AsRef<OsStr>) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(binary);
        command
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Queues `event` (JSON bytes) for the function's next `GET .../next`, with the deadline
    /// `now + deadline` (`Lambda-Runtime-Deadline-Ms`, unix ms). The request id is
    /// `<function>-<pid>-<n>`, unique in this process.
    pub fn queue(&self, event: Bytes, deadline: Duration) -> Pending {
        let request_id = format!(
            "{}-{}-{}",
            self.function,
            std::process::id(),
            REQUESTS.fetch_add(1, Ordering::Relaxed)
        );
        let deadline_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis()
            + deadline.as_millis();
        let (answer_tx, answer) = oneshot::channel();
        // The receiving half lives in `state` as long as `self`: this cannot fail.
        let _ = self.queue.send(Queued {
            request_id: request_id.clone(),
            event,
            deadline_ms,
            answer: answer_tx,
        });
        Pending { request_id, answer }
    }

    /// Waits up to `timeout` for `pending`'s answer (a response or an invocation error).
    ///
    /// # Errors
    /// No answer within `timeout`; the function posted an init error (now or before); the
    /// runtime API is gone.
    pub async fn wait(&self, pending: Pending, timeout: Duration) -> Result<Answer> {
        let request_id = pending.request_id.clone();
        tokio::select! {
            answer = tokio::time::timeout(timeout, pending.answer()) => match answer {
                Ok(answer) => answer,
                Err(_) => bail!(
                    "invocation {request_id}: no answer from {} within {timeout:?}",
                    self.function
                ),
            },
            error = self.init_error() => bail!("{}: init error: {error}", self.function),
        }
    }

    /// Queues `event` with the deadline `timeout` and waits up to `timeout` for its answer
    /// ([`RuntimeApi::queue`] then [`RuntimeApi::wait`]). An invocation error is an `Ok`
    /// answer ([`Answer::response`] turns it into an error).
    ///
    /// # Errors
    /// As [`RuntimeApi::wait`].
    pub async fn invoke(&self, event: Bytes, timeout: Duration) -> Result<Answer> {
        self.wait(self.queue(event, timeout), timeout).await
    }

    /// When the first `GET .../next` arrived (before anything was handed out), if one has.
    pub fn first_next_at(&self) -> Option<Instant> {
        *self.state.first_next.borrow()
    }

    /// Waits up to `timeout` for the function's first `GET .../next` (the end of its init)
    /// and returns when it arrived.
    ///
    /// # Errors
    /// None within `timeout`; the function posted an init error.
    pub async fn first_next(&self, timeout: Duration) -> Result<Instant> {
        let mut first = self.state.first_next.subscribe();
        let arrived = async {
            first
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|at| *at)
        };
        tokio::select! {
            at = tokio::time::timeout(timeout, arrived) => match at {
                Ok(Some(at)) => Ok(at),
                _ => bail!("{}: no GET .../next within {timeout:?}", self.function),
            },
            error = self.init_error() => bail!("{}: init error: {error}", self.function),
        }
    }

    /// Every body posted to `/runtime/init/error`, in order (lossy UTF-8).
    pub fn init_errors(&self) -> Vec<String> {
        self.state.init_errors.borrow().clone()
    }

    /// Waits for the first init error and returns its body (at once if one was posted).
    async fn init_error(&self) -> String {
        let mut errors = self.state.init_errors.subscribe();
        let first = errors
            .wait_for(|e| !e.is_empty())
            .await
            .ok()
            .and_then(|e| e.first().cloned());
        match first {
            Some(error) => error,
            // The sender lives in `state`, as long as `self`: never.
            None => std::future::pending().await,
        }
    }

    /// The request id of the last response or error posted (for any id, known or not).
    pub fn last_answered(&self) -> Option<String> {
        self.state.last_answered.lock().ok().and_then(|l| l.clone())
    }
}

fn reply(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
}

async fn serve(
    state: Arc<State>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    if method == Method::GET && path == NEXT {
        let arrived = Instant::now();
        state.first_next.send_if_modified(|first| {
            let unset = first.is_none();
            if unset {
                *first = Some(arrived);
            }
            unset
        });
        let queued = state.queue.lock().await.recv().await;
        let Some(queued) = queued else {
            // The RuntimeApi is gone: leave the poll hanging until the process goes away.
            std::future::pending::<()>().await;
            return Ok(reply(StatusCode::INTERNAL_SERVER_ERROR, Bytes::new()));
        };
        let served_at = Instant::now();
        if let Ok(mut handed_out) = state.handed_out.lock() {
            handed_out.insert(queued.request_id.clone(), (served_at, queued.answer));
        }
        let mut response = reply(StatusCode::OK, queued.event);
        let headers = response.headers_mut();
        let mut set = |name: &'static str, value: &str| {
            if let Ok(value) = hyper::header::HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        };
        set("lambda-runtime-aws-request-id", &queued.request_id);
        set(
            "lambda-runtime-deadline-ms",
            &queued.deadline_ms.to_string(),
        );
        set("lambda-runtime-invoked-function-arn", &state.function_arn);
        set("lambda-runtime-trace-id", TRACE_ID);
        set("content-type", "application/json");
        return Ok(response);
    }
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let accepted = || reply(StatusCode::ACCEPTED, Bytes::from_static(b"{}"));
    if method == Method::POST && path == INIT_ERROR {
        let error = String::from_utf8_lossy(&body).into_owned();
        state.init_errors.send_modify(|errors| errors.push(error));
        return Ok(accepted());
    }
    let answered = path
        .strip_prefix(INVOCATION)
        .and_then(|rest| rest.split_once('/'))
        .filter(|(_, kind)| *kind == "response" || *kind == "error");
    if let (true, Some((id, kind))) = (method == Method::POST, answered) {
        let answered_at = Instant::now();
        if let Ok(mut last) = state.last_answered.lock() {
            *last = Some(id.to_owned());
        }
        let waiter = state.handed_out.lock().ok().and_then(|mut h| h.remove(id));
        if let Some((served_at, waiter)) = waiter {
            let _ = waiter.send(Answer {
                request_id: id.to_owned(),
                reply: if kind == "response" {
                    Reply::Response(body)
                } else {
                    Reply::Error(body)
                },
                served_at,
                answered_at,
            });
        }
        return Ok(accepted());
    }
    Ok(reply(StatusCode::NOT_FOUND, Bytes::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    use hyper::client::conn::http1::SendRequest;

    /// One HTTP/1.1 connection to the API, as a runtime client keeps one.
    async fn connect(api: &RuntimeApi) -> SendRequest<Full<Bytes>> {
        let stream = tokio::net::TcpStream::connect(api.addr())
            .await
            .expect("connect");
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(connection);
        sender
    }

    async fn call(
        client: &mut SendRequest<Full<Bytes>>,
        method: Method,
        path: &str,
        body: &[u8],
    ) -> (StatusCode, hyper::HeaderMap, Bytes) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .body(Full::new(Bytes::copy_from_slice(body)))
            .expect("request");
        let response = client.send_request(request).await.expect("send");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        (parts.status, parts.headers, body)
    }

    /// A tiny custom runtime: `next`, then posts to `.../{id}/{kind}` what `answer` makes of
    /// the event, `invocations` times; returns the headers of each `next`.
    fn runtime(
        api: &RuntimeApi,
        invocations: usize,
        kind: &'static str,
        answer: fn(&[u8]) -> Vec<u8>,
    ) -> tokio::task::JoinHandle<Vec<hyper::HeaderMap>> {
        let addr = api.addr();
        tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let (mut client, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .expect("handshake");
            tokio::spawn(connection);
            let mut seen = Vec::new();
            for _ in 0..invocations {
                let (status, headers, event) = call(&mut client, Method::GET, NEXT, b"").await;
                assert_eq!(status, StatusCode::OK);
                let id = headers["lambda-runtime-aws-request-id"]
                    .to_str()
                    .expect("id")
                    .to_owned();
                let path = format!("{INVOCATION}{id}/{kind}");
                let (status, _, _) = call(&mut client, Method::POST, &path, &answer(&event)).await;
                assert_eq!(status, StatusCode::ACCEPTED);
                seen.push(headers);
            }
            seen
        })
    }

    #[tokio::test]
    async fn a_runtime_loop_gets_each_event_and_its_response_reaches_the_invoker() {
        let api = RuntimeApi::start("sim-test").await.expect("start");
        assert!(api.first_next_at().is_none());
        let function = runtime(&api, 2, "response", |event| {
            format!(
                r#"{{"statusCode": 201, "body": {}}}"#,
                String::from_utf8_lossy(event)
            )
            .into_bytes()
        });

        let first = api.first_next(Duration::from_secs(10)).await.expect("next");
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_millis();
        let answer = api
            .invoke(Bytes::from_static(b"\"one\""), Duration::from_secs(10))
            .await
            .expect("answer");
        assert_eq!(
            answer.response().expect("response").as_ref(),
            br#"{"statusCode": 201, "body": "one"}"#
        );
        assert_eq!(answer.status_code(), Some(201));
        assert!(first <= answer.served_at && answer.served_at <= answer.answered_at);
        assert_eq!(
            api.last_answered().as_deref(),
            Some(answer.request_id.as_str())
        );

        let pending = api.queue(Bytes::from_static(b"\"two\""), Duration::from_secs(10));
        let id = pending.request_id().to_owned();
        let second = pending.answer().await.expect("answer");
        assert_eq!(second.request_id, id);
        assert_ne!(second.request_id, answer.request_id);
        assert_eq!(second.status_code(), Some(201));

        let seen = function.await.expect("runtime");
        assert_eq!(
            seen[0]["lambda-runtime-aws-request-id"],
            answer.request_id.as_str()
        );
        assert_eq!(
            seen[0]["lambda-runtime-invoked-function-arn"],
            "arn:aws:lambda:us-east-1:123456789012:function:sim-test"
        );
        let deadline: u128 = seen[0]["lambda-runtime-deadline-ms"]
            .to_str()
            .expect("deadline")
            .parse()
            .expect("unix ms");
        assert!(deadline >= before + 10_000, "{deadline} vs {before}");
        assert!(seen[0].contains_key("lambda-runtime-trace-id"));
        assert_eq!(api.first_next_at(), Some(first));
        assert!(api.init_errors().is_empty());
    }

    #[tokio::test]
    async fn an_invocation_error_is_an_answer_and_an_init_error_fails_the_wait() {
        let api = RuntimeApi::start("sim-error").await.expect("start");
        let function = runtime(&api, 1, "error", |_| {
            br#"{"errorType": "Boom", "errorMessage": "it broke"}"#.to_vec()
        });
        let answer = api
            .invoke(Bytes::from_static(b"{}"), Duration::from_secs(10))
            .await
            .expect("answer");
        assert!(matches!(&answer.reply, Reply::Error(body) if body.starts_with(b"{\"errorType\"")));
        assert_eq!(answer.status_code(), None);
        let error = answer.response().expect_err("an invocation error");
        assert!(error.to_string().contains("it broke"), "{error}");
        function.await.expect("runtime");

        // Init error (a fresh process that fails before its first `next`): a waiting invoker
        // is told at once, not after its timeout.
        let api = RuntimeApi::start("sim-init").await.expect("start");
        let pending = api.queue(Bytes::from_static(b"{}"), Duration::from_secs(60));
        let mut client = connect(&api).await;
        let body = b"{\"errorType\": \"Init\"}";
        let (status, _, _) = call(&mut client, Method::POST, INIT_ERROR, body).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let started = Instant::now();
        let error = api
            .wait(pending, Duration::from_secs(60))
            .await
            .expect_err("init error");
        assert!(error.to_string().contains("init error"), "{error}");
        let error = api
            .first_next(Duration::from_secs(60))
            .await
            .expect_err("init error");
        assert!(error.to_string().contains("Init"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            api.init_errors(),
            vec!["{\"errorType\": \"Init\"}".to_owned()]
        );
    }

    #[tokio::test]
    async fn no_answer_times_out_and_unknown_paths_are_404() {
        let api = RuntimeApi::start("sim-silent").await.expect("start");
        let error = api
            .invoke(Bytes::from_static(b"{}"), Duration::from_millis(100))
            .await
            .expect_err("timeout");
        assert!(error.to_string().contains("no answer"), "{error}");
        assert!(api.first_next(Duration::from_millis(50)).await.is_err());

        let mut client = connect(&api).await;
        let (status, _, _) = call(&mut client, Method::GET, "/2018-06-01/runtime/other", b"").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // An answer for an id never handed out is accepted and remembered, nothing more.
        let path = format!("{INVOCATION}nobody/response");
        let (status, _, _) = call(&mut client, Method::POST, &path, b"{}").await;
        assert_eq!(status, StatusCode::ACCEPTED);
        assert_eq!(api.last_answered().as_deref(), Some("nobody"));
    }

    #[tokio::test]
    async fn the_environment_points_the_runtime_at_the_api() {
        let api = RuntimeApi::start("sim-env").await.expect("start");
        let env: HashMap<String, String> = api.env().into_iter().collect();
        assert_eq!(
            env["AWS_LAMBDA_RUNTIME_API"],
            format!("127.0.0.1:{}", api.port())
        );
        assert_eq!(env["AWS_LAMBDA_FUNCTION_NAME"], "sim-env");
        assert_eq!(env["AWS_LAMBDA_LOG_GROUP_NAME"], "/aws/lambda/sim-env");
        let command = api.command("/bin/true");
        let set: HashMap<_, _> = command
            .as_std()
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v?.to_str()?.to_owned())))
            .collect();
        assert_eq!(set, env);
    }
}
