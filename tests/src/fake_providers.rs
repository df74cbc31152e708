//! Local fakes of the providers' list APIs, for the replay tests: a small HTTP/1.1 server on
//! 127.0.0.1 that hands every request (method, path, decoded query parameters, headers, body)
//! to a handler closure, sends back its [`Answer`] (status, headers such as `Link` and
//! `Retry-After`, body), and records every request. The fixtures ([`StripeEvents`],
//! [`PaddleEvents`], [`GithubDeliveries`]) answer in each provider's documented list format and
//! CHECK what they receive: a wrong `Authorization` is 401, a missing or unexpected query
//! parameter 400, so a replay that sends the wrong thing fails its test.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use anyhow::Result;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path without the query, e.g. `/v1/events`.
    pub path: String,
    /// The query parameters, percent-decoded, in order.
    pub query: Vec<(String, String)>,
    /// The headers, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// `None` when the query has exactly the parameters `allowed` (each at most once) and
    /// every one of `required`; else a 400 naming the offender.
    pub fn check_params(&self, required: &[&str], allowed: &[&str]) -> Option<Answer> {
        let mut seen = BTreeSet::new();
        for (name, _) in &self.query {
            if !allowed.contains(&name.as_str()) && !required.contains(&name.as_str()) {
                return Some(Answer::bad_request(&format!("unexpected parameter {name}")));
            }
            if !seen.insert(name.as_str()) {
                return Some(Answer::bad_request(&format!("parameter {name} twice")));
            }
        }
        required
            .iter()
            .find(|name| !seen.contains(**name))
            .map(|name| Answer::bad_request(&format!("missing parameter {name}")))
    }
}

/// What the fake answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Extra headers (`Link`, `Retry-After`, ...).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// How long to wait before answering (a slow server).
    pub delay: std::time::Duration,
    /// Never answer: the connection stays open until the server is dropped (a server that
    /// took the request and hangs).
    pub hold: bool,
}

impl Answer {
    /// `status` with a JSON body.
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: body.to_string().into_bytes(),
            delay: std::time::Duration::ZERO,
            hold: false,
        }
    }

    /// `status` with `body` as it is (e.g. something that is not JSON).
    pub fn raw(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
            delay: std::time::Duration::ZERO,
            hold: false,
        }
    }

    /// Takes the request and never answers.
    pub fn hold() -> Self {
        Self {
            hold: true,
            ..Self::raw(200, "")
        }
    }

    /// This answer, sent after `delay`.
    pub fn after(mut self, delay: std::time::Duration) -> Self {
        self.delay = delay;
        self
    }

    /// This answer with one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// 400 `{"error": {"message": why}}`.
    pub fn bad_request(why: &str) -> Self {
        Self::json(400, &json!({"error": {"message": why}}))
    }

    /// 401 `{"error": {"message": "invalid credential"}}`.
    pub fn unauthorized() -> Self {
        Self::json(401, &json!({"error": {"message": "invalid credential"}}))
    }
}

type Handler = dyn Fn(&Request) -> Answer + Send + Sync;

/// A running fake; stops when dropped.
pub struct FakeServer {
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    requests: Arc<Mutex<Vec<Request>>>,
    arrived: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeServer")
            .field("base_url", &self.base_url)
            .finish()
    }
}

impl FakeServer {
    /// Serves every request with `handler`, recording it first.
    pub async fn start(
        handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
    ) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(tokio::sync::Notify::new());
        let handler: Arc<Handler> = Arc::new(handler);
        let task = {
            let (requests, arrived) = (requests.clone(), arrived.clone());
            tokio::spawn(async move {
                while let Ok((socket, _)) = listener.accept().await {
                    let (requests, arrived) = (requests.clone(), arrived.clone());
                    let handler = handler.clone();
                    tokio::spawn(async move {
                        let _ = serve(socket, &requests, &arrived, &*handler).await;
                    });
                }
            })
        };
        Ok(Self {
            base_url,
            requests,
            arrived,
            task,
        })
    }

    /// Returns once a request has arrived (recorded, not yet answered) since the last call,
    /// or at once if one arrived before this call and no earlier call took it.
    pub async fn arrival(&self) {
        self.arrived.notified().await;
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The requests received so far with `method`.
    pub fn requests_with(&self, method: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method)
            .collect()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (keep-alive requests one after another), answers each.
async fn serve(
    mut socket: tokio::net::TcpStream,
    requests: &Mutex<Vec<Request>>,
    arrived: &tokio::sync::Notify,
    handler: &Handler,
) -> Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let n = socket.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut start = lines.next().unwrap_or("").split(' ');
        let method = start.next().unwrap_or("").to_owned();
        let target = start.next().unwrap_or("").to_owned();
        let mut headers = BTreeMap::new();
        for line in lines {
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let body_start = head_end + 4;
        while buf.len() < body_start + length {
            let n = socket.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = buf[body_start..body_start + length].to_vec();
        buf.drain(..body_start + length);
        let (path, query) = match target.split_once('?') {
            Some((path, query)) => (path.to_owned(), query.to_owned()),
            None => (target.clone(), String::new()),
        };
        let request = Request {
            method,
            path,
            query: form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            headers,
            body,
        };
        if let Ok(mut seen) = requests.lock() {
            seen.push(request.clone());
        }
        let answer = handler(&request);
        arrived.notify_one();
        if answer.hold {
            // Took the request; never answers (the connection stays open until the drop).
            std::future::pending::<()>().await;
        }
        if !answer.delay.is_zero() {
            tokio::time::sleep(answer.delay).await;
        }
        let mut response = format!(
            "HTTP/1.1 {} X\r\ncontent-length: {}\r\n",
            answer.status,
            answer.body.len()
        );
        for (name, value) in &answer.headers {
            response.push_str(&format!("{name}: {value}\r\n"));
        }
        response.push_str("\r\n");
        socket.write_all(response.as_bytes()).await?;
        socket.write_all(&answer.body).await?;
    }
}

/// Checks `Authorization: Bearer {key}`: `None` when it matches, else a 401.
pub fn check_bearer(request: &Request, key: &str) -> Option<Answer> {
    (request.header("authorization") != Some(&format!("Bearer {key}"))).then(Answer::unauthorized)
}

/// Stripe's `GET /v1/events`: `events` newest first (by `created`, then as given), filtered by
/// `created[gte]` and `created[lte]`, `limit` events after `starting_after`, in
/// `{"object": "list", "url": "/v1/events", "has_more", "data"}`. Requires `Bearer {key}`,
/// both `created` bounds and `limit` (1 to 100); allows `starting_after` (an id it lists, else
/// 400 as Stripe's "No such event") and `delivery_success` (`false`: only the events in
/// `undelivered`).
#[derive(Debug, Clone)]
pub struct StripeEvents {
    /// The API key it accepts.
    pub key: String,
    /// Every event, newest first.
    pub events: Arc<Vec<Value>>,
    /// The ids listed under `delivery_success=false`.
    pub undelivered: Arc<BTreeSet<String>>,
}

impl StripeEvents {
    /// `events` (any order: sorted newest first here) behind `key`.
    pub fn new(key: &str, mut events: Vec<Value>) -> Self {
        events.sort_by_key(|e| std::cmp::Reverse(e["created"].as_i64().unwrap_or(0)));
        Self {
            key: key.to_owned(),
            events: Arc::new(events),
            undelivered: Arc::new(BTreeSet::new()),
        }
    }

    /// Answers one request.
    pub fn answer(&self, request: &Request) -> Answer {
        if request.method != "GET" || request.path != "/v1/events" {
            return Answer::json(
                404,
                &json!({"error": {"message": "unrecognized request URL"}}),
            );
        }
        if let Some(refused) = check_bearer(request, &self.key) {
            return refused;
        }
        if let Some(bad) = request.check_params(
            &["created[gte]", "created[lte]", "limit"],
            &["starting_after", "delivery_success"],
        ) {
            return bad;
        }
        let number = |name: &str| request.param(name).and_then(|v| v.parse::<i64>().ok());
        let (Some(gte), Some(lte), Some(limit)) = (
            number("created[gte]"),
            number("created[lte]"),
            number("limit"),
        ) else {
            return Answer::bad_request("created[gte], created[lte] and limit must be integers");
        };
        if !(1..=100).contains(&limit) {
            return Answer::bad_request("limit must be 1 to 100");
        }
        let only_undelivered = match request.param("delivery_success") {
            None | Some("true") => false,
            Some("false") => true,
            Some(_) => return Answer::bad_request("delivery_success must be a boolean"),
        };
        let in_window: Vec<&Value> = self
            .events
            .iter()
            .filter(|e| {
                let created = e["created"].as_i64().unwrap_or(0);
                gte <= created && created <= lte
            })
            .filter(|e| {
                !only_undelivered || self.undelivered.contains(e["id"].as_str().unwrap_or(""))
            })
            .collect();
        let start = match request.param("starting_after") {
            None => 0,
            Some(after) => match in_window.iter().position(|e| e["id"] == after) {
                Some(i) => i + 1,
                None => return Answer::bad_request(&format!("No such event: '{after}'")),
            },
        };
        let page: Vec<Value> = in_window
            .iter()
            .skip(start)
            .take(limit as usize)
            .map(|e| (*e).clone())
            .collect();
        let has_more = start + page.len() < in_window.len();
        Answer::json(
            200,
            &json!({"object": "list", "url": "/v1/events", "has_more": has_more, "data": page}),
        )
    }
}

/// Paddle Billing's `GET /events`: `events` ordered by `event_id` (ids sort by creation)
/// descending, `min(per_page, page_size)` after `after`, in `{"data", "meta": {"request_id",
/// "pagination": {"per_page", "next", "has_more", "estimated_total"}}}`. Requires `Bearer
/// {key}`, `order_by=id[DESC]` and `per_page` (1 to 200); allows `after` (an id it lists).
#[derive(Debug, Clone)]
pub struct PaddleEvents {
    /// The API key it accepts.
    pub key: String,
    /// Every event.
    pub events: Arc<Vec<Value>>,
    /// Most events per page, whatever `per_page` asks (to make several pages of a few).
    pub page_size: usize,
    /// The fake's own URL, for `meta.pagination.next`.
    pub base_url: Arc<Mutex<String>>,
}

impl PaddleEvents {
    /// `events` behind `key`, at most `page_size` a page.
    pub fn new(key: &str, mut events: Vec<Value>, page_size: usize) -> Self {
        events.sort_by(|a, b| b["event_id"].as_str().cmp(&a["event_id"].as_str()));
        Self {
            key: key.to_owned(),
            events: Arc::new(events),
            page_size,
            base_url: Arc::new(Mutex::new(String::new())),
        }
    }

    /// Answers one request.
    pub fn answer(&self, request: &Request) -> Answer {
        if request.method != "GET" || request.path != "/events" {
            return Answer::json(
                404,
                &json!({"error": {"type": "request_error", "code": "not_found", "detail": "no route"}}),
            );
        }
        if let Some(refused) = check_bearer(request, &self.key) {
            return refused;
        }
        if let Some(bad) = request.check_params(&["order_by", "per_page"], &["after"]) {
            return bad;
        }
        if request.param("order_by") != Some("id[DESC]") {
            return Answer::bad_request("order_by must be id[DESC] for this fake");
        }
        let Some(per_page) = request
            .param("per_page")
            .and_then(|v| v.parse::<usize>().ok())
        else {
            return Answer::bad_request("per_page must be an integer");
        };
        if !(1..=200).contains(&per_page) {
            return Answer::bad_request("per_page must be 1 to 200");
        }
        let start = match request.param("after") {
            None => 0,
            Some(after) => match self.events.iter().position(|e| e["event_id"] == after) {
                Some(i) => i + 1,
                None => return Answer::bad_request(&format!("after: no such event {after}")),
            },
        };
        let size = per_page.min(self.page_size);
        let page: Vec<Value> = self.events.iter().skip(start).take(size).cloned().collect();
        let has_more = start + page.len() < self.events.len();
        let base = self.base_url.lock().map(|b| b.clone()).unwrap_or_default();
        let next = page.last().map(|e| {
            format!(
                "{base}/events?after={}",
                e["event_id"].as_str().unwrap_or("")
            )
        });
        Answer::json(
            200,
            &json!({"data": page, "meta": {"request_id": "req_fake", "pagination": {
                "per_page": size, "next": next, "has_more": has_more,
                "estimated_total": self.events.len()}}}),
        )
    }
}

/// How the GitHub fake authenticates requests.
#[derive(Clone)]
pub enum GithubAuth {
    /// `Authorization: Bearer {token}`.
    Token(String),
    /// `Authorization: Bearer {jwt}`: an RS256 JWT that verifies with this public key and whose
    /// `iss` is the app id, not expired.
    App {
        /// The app's id.
        app_id: u64,
        /// The public half of the app's key.
        public_key: openssl::pkey::PKey<openssl::pkey::Public>,
    },
}

impl std::fmt::Debug for GithubAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GithubAuth::Token(_) => f.write_str("Token"),
            GithubAuth::App { app_id, .. } => write!(f, "App({app_id})"),
        }
    }
}

/// GitHub's hook deliveries: `GET {hook}/deliveries` (newest first, `per_page` of them, the
/// next page's `cursor` in a `Link: <...>; rel="next"` header) and `POST
/// {hook}/deliveries/{id}/attempts` (202). Requires the credential of [`GithubAuth`],
/// `Accept: application/vnd.github+json`, and `per_page` (1 to 100); allows `cursor` (one it
/// gave).
#[derive(Debug, Clone)]
pub struct GithubDeliveries {
    /// The hook's path, e.g. `/repos/acme/shop/hooks/7`.
    pub hook: String,
    /// How requests authenticate.
    pub auth: GithubAuth,
    /// Every delivery, newest first (ids descending).
    pub deliveries: Arc<Vec<Value>>,
    /// Most deliveries per page, whatever `per_page` asks.
    pub page_size: usize,
    /// The fake's own URL, for the `Link` header.
    pub base_url: Arc<Mutex<String>>,
}

impl GithubDeliveries {
    /// `deliveries` (sorted here by id, descending) of `hook`.
    pub fn new(hook: &str, auth: GithubAuth, mut deliveries: Vec<Value>, page_size: usize) -> Self {
        deliveries.sort_by_key(|d| std::cmp::Reverse(d["id"].as_u64().unwrap_or(0)));
        Self {
            hook: hook.to_owned(),
            auth,
            deliveries: Arc::new(deliveries),
            page_size,
            base_url: Arc::new(Mutex::new(String::new())),
        }
    }

    fn authorized(&self, request: &Request) -> bool {
        let Some(value) = request.header("authorization") else {
            return false;
        };
        let Some(bearer) = value.strip_prefix("Bearer ") else {
            return false;
        };
        match &self.auth {
            GithubAuth::Token(token) => bearer == token,
            GithubAuth::App { app_id, public_key } => verify_jwt(bearer, *app_id, public_key),
        }
    }

    /// Answers one request.
    pub fn answer(&self, request: &Request) -> Answer {
        let not_found = || Answer::json(404, &json!({"message": "Not Found"}));
        if !self.authorized(request) {
            return Answer::json(401, &json!({"message": "Bad credentials"}));
        }
        if request.header("accept") != Some("application/vnd.github+json") {
            return Answer::json(
                415,
                &json!({"message": "Accept must be application/vnd.github+json"}),
            );
        }
        let Some(rest) = request
            .path
            .strip_prefix(&format!("{}/deliveries", self.hook))
        else {
            return not_found();
        };
        if request.method == "POST" {
            let id = rest
                .strip_prefix('/')
                .and_then(|r| r.strip_suffix("/attempts"))
                .and_then(|id| id.parse::<u64>().ok());
            return match id {
                Some(id) if self.deliveries.iter().any(|d| d["id"] == id) => {
                    Answer::json(202, &json!({}))
                }
                _ => not_found(),
            };
        }
        if request.method != "GET" || !rest.is_empty() {
            return not_found();
        }
        if let Some(bad) = request.check_params(&["per_page"], &["cursor"]) {
            return bad;
        }
        let Some(per_page) = request
            .param("per_page")
            .and_then(|v| v.parse::<usize>().ok())
        else {
            return Answer::bad_request("per_page must be an integer");
        };
        if !(1..=100).contains(&per_page) {
            return Answer::bad_request("per_page must be 1 to 100");
        }
        let start = match request.param("cursor") {
            None => 0,
            Some(cursor) => match cursor
                .strip_prefix("v1_")
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(n) if n <= self.deliveries.len() => n,
                _ => return Answer::bad_request("bad cursor"),
            },
        };
        let size = per_page.min(self.page_size);
        let page: Vec<Value> = self
            .deliveries
            .iter()
            .skip(start)
            .take(size)
            .cloned()
            .collect();
        let mut answer = Answer::json(200, &Value::Array(page.clone()));
        let next = start + page.len();
        if next < self.deliveries.len() {
            let base = self.base_url.lock().map(|b| b.clone()).unwrap_or_default();
            answer = answer.with_header(
                "link",
                &format!(
                    "<{base}{}/deliveries?per_page={per_page}&cursor=v1_{next}>; rel=\"next\"",
                    self.hook
                ),
            );
        }
        answer
    }
}

/// Whether `jwt` is RS256, signed by `public_key`'s private half, issued by `app_id`, and
/// valid now (`iat` <= now < `exp`, at most ten minutes apart, as GitHub requires).
pub fn verify_jwt(
    jwt: &str,
    app_id: u64,
    public_key: &openssl::pkey::PKey<openssl::pkey::Public>,
) -> bool {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, signature] = parts.as_slice() else {
        return false;
    };
    let decode =
        |part: &str| -> Option<Value> { serde_json::from_slice(&b64.decode(part).ok()?).ok() };
    let (Some(header_json), Some(claims_json), Ok(signature)) =
        (decode(header), decode(claims), b64.decode(signature))
    else {
        return false;
    };
    if header_json["alg"] != "RS256" {
        return false;
    }
    let Ok(mut verifier) =
        openssl::sign::Verifier::new(openssl::hash::MessageDigest::sha256(), public_key)
    else {
        return false;
    };
    let signed = format!("{header}.{claims}");
    if !(verifier.update(signed.as_bytes()).is_ok() && verifier.verify(&signature).unwrap_or(false))
    {
        return false;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (Some(iat), Some(exp)) = (claims_json["iat"].as_i64(), claims_json["exp"].as_i64()) else {
        return false;
    };
    let iss_ok = claims_json["iss"].as_u64() == Some(app_id)
        || claims_json["iss"].as_str() == Some(app_id.to_string().as_str());
    iss_ok && iat <= now && now < exp && exp - iat <= 600
}

/// Starts a fake serving `fixture` (the fixtures whose `answer` needs the fake's own URL get it
/// through `base_url`).
pub async fn serve_fixture<F>(
    fixture: F,
    base_url: Option<Arc<Mutex<String>>>,
) -> Result<FakeServer>
where
    F: Fn(&Request) -> Answer + Send + Sync + 'static,
{
    let server = FakeServer::start(fixture).await?;
    if let Some(slot) = base_url {
        if let Ok(mut slot) = slot.lock() {
            *slot = server.base_url.clone();
        }
    }
    Ok(server)
}
