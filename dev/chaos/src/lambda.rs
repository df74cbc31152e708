//! Execution environments behind a Lambda Runtime API front, as Lambda runs a function.
//!
//! An [`Environment`] is one process of a function binary (`chaos-receiver`, `chaos-worker`)
//! whose only contact is a Runtime API served on 127.0.0.1, on a fresh port per process
//! (a *generation*), so a killed process's hanging `GET .../invocation/next` can never take the
//! next process's event. It answers one invocation at a time; it can be killed (SIGKILL),
//! frozen (SIGSTOP/SIGCONT) and restarts by itself after it exits (as Lambda starts a fresh
//! environment), unless the fleet is shutting down. A [`Fleet`] is N environments of one
//! binary with an idle queue: [`Fleet::invoke`] waits (bounded, like Lambda's concurrency
//! limit) for an idle environment, hands it the event and returns its [`Outcome`].
//!
//! The Runtime API itself (next, response, error, init error) and the API Gateway events are
//! the dev-only `lambda_sim` crate's ([`lambda_sim::RuntimeApi`], [`lambda_sim::HttpApiEvent`]),
//! shared with `bench-cold`; this module owns the processes behind it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use lambda_sim::{Reply, RuntimeApi};
use serde_json::Value;
use tokio::sync::{mpsc, watch, Mutex};

/// What a function binary is started with.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// A short name for logs and the function name, e.g. `receiver`.
    pub name: String,
    /// The binary.
    pub binary: PathBuf,
    /// Extra environment (`DATABASE_URL`, `HOOKLEDGER_SOURCES`, fault hooks...), on top of
    /// the Lambda variables [`RuntimeApi::env`] sets (function name `chaos-<name>`).
    pub env: Vec<(String, String)>,
    /// Where each process's stdout and stderr go: `<log_dir>/<name>-<index>-g<generation>.log`.
    pub log_dir: PathBuf,
}

/// Which delivery an invocation carries (empty for the worker's scheduled events).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Tag {
    /// Source name.
    pub source: String,
    /// Event id.
    pub event_id: String,
}

/// An invocation an environment is running now.
#[derive(Debug, Clone)]
pub struct InFlight {
    /// The Runtime API request id.
    pub request_id: String,
    /// The delivery it carries.
    pub tag: Tag,
    /// When it was handed to the environment.
    pub started: Instant,
    /// The process generation running it.
    pub generation: u64,
}

/// How an invocation ended, and what API Gateway would have answered ([`Outcome::status`]).
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The function posted a response: its raw JSON (for the receiver, an API Gateway v2
    /// response `{"statusCode", "headers", "body"}`).
    Response(Bytes),
    /// The function posted an invocation error (API Gateway: 502).
    FunctionError(String),
    /// The process exited (killed or crashed) before answering (API Gateway: 502).
    Died,
    /// No answer within the invocation timeout; the environment is killed and replaced, as
    /// Lambda does after a timeout (API Gateway: 504).
    Timeout,
    /// No environment became idle within the queue bound (Lambda throttling: 429).
    Throttled,
}

impl Outcome {
    /// The HTTP status a caller of API Gateway would see: `statusCode` of a response (200
    /// when a response has none, as for the worker's summary), 502, 504 or 429.
    pub fn status(&self) -> u16 {
        match self {
            Outcome::Response(body) => lambda_sim::status_code(body).unwrap_or(200),
            Outcome::FunctionError(_) | Outcome::Died => 502,
            Outcome::Timeout => 504,
            Outcome::Throttled => 429,
        }
    }

    /// The response as JSON, if there is one.
    pub fn json(&self) -> Option<Value> {
        match self {
            Outcome::Response(body) => serde_json::from_slice(body).ok(),
            _ => None,
        }
    }
}

/// One process exit the harness saw.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Exit {
    /// `<name>-<index>-g<generation>`.
    pub process: String,
    /// The exit code or signal, as text.
    pub status: String,
    /// Whether the harness caused it (a kill, a timeout, the shutdown).
    pub expected: bool,
}

/// One process of an environment, with its own Runtime API.
struct Generation {
    number: u64,
    pid: u32,
    api: RuntimeApi,
    exited: watch::Receiver<bool>,
    log: PathBuf,
}

/// One execution environment: a function process that is restarted whenever it exits.
pub struct Environment {
    /// Its index in the fleet.
    pub index: usize,
    spec: Arc<ProcessSpec>,
    current: StdMutex<Option<Arc<Generation>>>,
    in_flight: StdMutex<Option<InFlight>>,
    /// Generations whose exit the harness caused (killed, timed out, shut down).
    expected_exits: StdMutex<Vec<u64>>,
    exits: Arc<StdMutex<Vec<Exit>>>,
    generations: AtomicU64,
    shutting_down: AtomicBool,
    frozen: AtomicBool,
}

/// Every function process alive now (for [`kill_all`]).
static LIVE: StdMutex<Vec<u32>> = StdMutex::new(Vec::new());

/// SIGKILLs every function process this harness started that is still alive (on Ctrl-C or a
/// harness error, before the process exits without running destructors); SIGCONT first, so a
/// frozen one dies too.
pub fn kill_all() {
    let pids = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    for pid in pids {
        // SAFETY: kill(2) has no memory effects; these are pids this harness spawned, removed
        // from LIVE as soon as their exit is seen (a reused pid in that instant is the only,
        // accepted, risk).
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGCONT);
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
}

impl Environment {
    /// Starts environment `index` of `spec` (its first process).
    ///
    /// # Errors
    /// The Runtime API cannot bind or the binary cannot start.
    async fn start(
        index: usize,
        spec: Arc<ProcessSpec>,
        exits: Arc<StdMutex<Vec<Exit>>>,
    ) -> Result<Arc<Self>> {
        let env = Arc::new(Self {
            index,
            spec,
            current: StdMutex::new(None),
            in_flight: StdMutex::new(None),
            expected_exits: StdMutex::new(Vec::new()),
            exits,
            generations: AtomicU64::new(0),
            shutting_down: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
        });
        env.spawn_generation().await?;
        Ok(env)
    }

    /// `<name>-<index>`.
    pub fn name(&self) -> String {
        format!("{}-{}", self.spec.name, self.index)
    }

    fn spawn_generation(self: &Arc<Self>) -> futures_util::future::BoxFuture<'static, Result<()>> {
        let this = self.clone();
        Box::pin(async move { this.spawn_generation_now().await })
    }

    async fn spawn_generation_now(self: Arc<Self>) -> Result<()> {
        let number = self.generations.fetch_add(1, Ordering::SeqCst) + 1;
        let api = RuntimeApi::start(&format!("chaos-{}", self.spec.name)).await?;
        std::fs::create_dir_all(&self.spec.log_dir)?;
        let log = self
            .spec
            .log_dir
            .join(format!("{}-g{number}.log", self.name()));
        let out = std::fs::File::create(&log).with_context(|| format!("{}", log.display()))?;
        let err = out.try_clone()?;
        let mut command = api.command(&self.spec.binary);
        command
            .envs(self.spec.env.iter().cloned())
            .stdout(out)
            .stderr(err);
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {}", self.spec.binary.display()))?;
        let pid = child.id().unwrap_or(0);
        if let Ok(mut live) = LIVE.lock() {
            live.push(pid);
        }
        let (exited_tx, exited_rx) = watch::channel(false);
        let generation = Arc::new(Generation {
            number,
            pid,
            api,
            exited: exited_rx,
            log,
        });
        if let Ok(mut current) = self.current.lock() {
            *current = Some(generation);
        }
        self.frozen.store(false, Ordering::SeqCst);
        let env = self.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            if let Ok(mut live) = LIVE.lock() {
                live.retain(|p| *p != pid);
            }
            let _ = exited_tx.send(true);
            env.on_exit(number, status).await;
        });
        Ok(())
    }

    async fn on_exit(
        self: Arc<Self>,
        number: u64,
        status: std::io::Result<std::process::ExitStatus>,
    ) {
        use std::os::unix::process::ExitStatusExt;
        let status = match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(code), _) => format!("exit code {code}"),
                (None, Some(signal)) => format!("signal {signal}"),
                _ => "unknown".to_owned(),
            },
            Err(e) => format!("wait failed: {e}"),
        };
        let shutting_down = self.shutting_down.load(Ordering::SeqCst);
        let expected = shutting_down
            || self
                .expected_exits
                .lock()
                .map(|e| e.contains(&number))
                .unwrap_or(false);
        if let Ok(mut exits) = self.exits.lock() {
            exits.push(Exit {
                process: format!("{}-g{number}", self.name()),
                status,
                expected,
            });
        }
        if shutting_down {
            return;
        }
        // A process that cannot start at all would spin: back off a little.
        if !expected {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Err(e) = self.spawn_generation().await {
            eprintln!("chaos: restarting {}: {e:#}", self.name());
        }
    }

    fn generation(&self) -> Option<Arc<Generation>> {
        self.current.lock().ok().and_then(|g| g.clone())
    }

    /// The live process's pid (None between a death and its restart).
    pub fn pid(&self) -> Option<u32> {
        self.generation()
            .filter(|g| !*g.exited.borrow())
            .map(|g| g.pid)
    }

    /// The invocation it is running now, if any.
    pub fn in_flight(&self) -> Option<InFlight> {
        self.in_flight.lock().ok().and_then(|f| f.clone())
    }

    /// Sends `signal` to the live process; returns what it was running.
    fn signal(&self, signal: libc::c_int, expect_exit: bool) -> Option<Option<InFlight>> {
        let generation = self.generation().filter(|g| !*g.exited.borrow())?;
        if expect_exit {
            if let Ok(mut expected) = self.expected_exits.lock() {
                expected.push(generation.number);
            }
        }
        // An invocation whose answer is already posted is not interrupted by this signal.
        let answered = generation.api.last_answered();
        let interrupted = self
            .in_flight()
            .filter(|f| answered.as_deref() != Some(f.request_id.as_str()));
        // SAFETY: kill(2) with a pid this harness spawned and has not yet reaped (the exit
        // watcher has not seen it exit); no memory is touched.
        let rc = unsafe { libc::kill(generation.pid as libc::pid_t, signal) };
        (rc == 0).then_some(interrupted)
    }

    /// SIGKILLs the live process (it restarts by itself). Returns `None` when no process was
    /// alive, else `Some(the invocation it interrupted, if any)`: one handed over whose answer
    /// was not posted yet.
    pub fn kill(&self) -> Option<Option<InFlight>> {
        // A frozen process still dies of SIGKILL.
        self.signal(libc::SIGKILL, true)
    }

    /// SIGSTOPs the live process; returns what it was running (as [`Environment::kill`]).
    pub fn freeze(&self) -> Option<Option<InFlight>> {
        let result = self.signal(libc::SIGSTOP, false);
        if result.is_some() {
            self.frozen.store(true, Ordering::SeqCst);
        }
        result
    }

    /// SIGCONTs the live process. Returns whether a process was signalled.
    pub fn thaw(&self) -> bool {
        let result = self.signal(libc::SIGCONT, false).is_some();
        self.frozen.store(false, Ordering::SeqCst);
        result
    }

    /// Whether the process is frozen (SIGSTOP without SIGCONT).
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Init errors the current process posted (`/runtime/init/error`).
    pub fn init_errors(&self) -> Vec<String> {
        self.generation()
            .map(|g| g.api.init_errors())
            .unwrap_or_default()
    }

    /// Every log file this environment's processes wrote (one per generation).
    pub fn logs(&self) -> Vec<PathBuf> {
        let n = self.generations.load(Ordering::SeqCst);
        (1..=n)
            .map(|g| self.spec.log_dir.join(format!("{}-g{g}.log", self.name())))
            .collect()
    }

    /// The log file of the current process.
    pub fn current_log(&self) -> Option<PathBuf> {
        self.generation().map(|g| g.log.clone())
    }

    /// Runs one invocation: waits (up to `timeout`) for a live process, hands it `payload`,
    /// and waits up to `timeout` for its answer. On a timeout the process is killed (and
    /// restarts), as Lambda does.
    pub async fn invoke(&self, payload: Bytes, tag: Tag, timeout: Duration) -> Outcome {
        let started = Instant::now();
        let generation = loop {
            if let Some(g) = self.generation().filter(|g| !*g.exited.borrow()) {
                break g;
            }
            if started.elapsed() > timeout {
                return Outcome::Died;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let pending = generation.api.queue(payload, timeout);
        if let Ok(mut f) = self.in_flight.lock() {
            *f = Some(InFlight {
                request_id: pending.request_id().to_owned(),
                tag,
                started: Instant::now(),
                generation: generation.number,
            });
        }
        let mut exited = generation.exited.clone();
        let outcome = tokio::select! {
            biased;
            answer = pending.answer() => match answer.map(|a| a.reply) {
                Ok(Reply::Response(body)) => Outcome::Response(body),
                Ok(Reply::Error(body)) => {
                    Outcome::FunctionError(String::from_utf8_lossy(&body).into_owned())
                }
                Err(_) => Outcome::Died,
            },
            _ = exited.wait_for(|e| *e) => Outcome::Died,
            _ = tokio::time::sleep(timeout) => {
                self.kill();
                Outcome::Timeout
            }
        };
        if let Ok(mut f) = self.in_flight.lock() {
            *f = None;
        }
        outcome
    }

    /// Stops restarting and SIGKILLs the process (SIGCONT first if frozen).
    fn shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        if self.is_frozen() {
            self.thaw();
        }
        if let Some(g) = self.generation() {
            // SAFETY: as in `signal`: our own child, not yet reaped, or a harmless ESRCH.
            unsafe {
                libc::kill(g.pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

/// N environments of one function, with Lambda's "one invocation per environment" and a
/// bounded wait for an idle one.
pub struct Fleet {
    /// The environments, by index.
    pub environments: Vec<Arc<Environment>>,
    idle_tx: mpsc::UnboundedSender<usize>,
    idle_rx: Mutex<mpsc::UnboundedReceiver<usize>>,
    /// The function's timeout (the template's receiver `Timeout`: 10 s).
    pub invoke_timeout: Duration,
    /// How long an invocation may wait for an idle environment before it is throttled.
    pub queue_timeout: Duration,
    exits: Arc<StdMutex<Vec<Exit>>>,
    spec: Arc<ProcessSpec>,
}

/// One [`Fleet::invoke`]: the outcome, which environment ran it, how long it queued and ran.
#[derive(Debug, Clone)]
pub struct Invoked {
    /// How it ended.
    pub outcome: Outcome,
    /// The environment that ran it (None when throttled).
    pub environment: Option<usize>,
    /// Time waiting for an idle environment.
    pub queued: Duration,
    /// Time from the hand-over to the answer.
    pub ran: Duration,
}

impl Fleet {
    /// Starts `count` environments of `spec`, each as a fresh process, with the invocation
    /// timeout `invoke_timeout` and the queue bound `queue_timeout`.
    ///
    /// # Errors
    /// An environment cannot start.
    pub async fn start(
        spec: ProcessSpec,
        count: usize,
        invoke_timeout: Duration,
        queue_timeout: Duration,
    ) -> Result<Self> {
        let spec = Arc::new(spec);
        let exits = Arc::new(StdMutex::new(Vec::new()));
        let (idle_tx, idle_rx) = mpsc::unbounded_channel();
        let mut environments = Vec::with_capacity(count);
        for index in 0..count {
            environments.push(Environment::start(index, spec.clone(), exits.clone()).await?);
            let _ = idle_tx.send(index);
        }
        Ok(Self {
            environments,
            idle_tx,
            idle_rx: Mutex::new(idle_rx),
            invoke_timeout,
            queue_timeout,
            exits,
            spec,
        })
    }

    /// The function's name (`ProcessSpec::name`).
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Runs `payload` on the next idle environment (waiting up to `queue_timeout` for one).
    pub async fn invoke(&self, payload: Bytes, tag: Tag) -> Invoked {
        let queued_at = Instant::now();
        let index = {
            let next = async { self.idle_rx.lock().await.recv().await };
            match tokio::time::timeout(self.queue_timeout, next).await {
                Ok(Some(index)) => index,
                _ => {
                    return Invoked {
                        outcome: Outcome::Throttled,
                        environment: None,
                        queued: queued_at.elapsed(),
                        ran: Duration::ZERO,
                    }
                }
            }
        };
        let queued = queued_at.elapsed();
        let ran_at = Instant::now();
        let outcome = match self.environments.get(index) {
            Some(env) => env.invoke(payload, tag, self.invoke_timeout).await,
            None => Outcome::Died,
        };
        let ran = ran_at.elapsed();
        let _ = self.idle_tx.send(index);
        Invoked {
            outcome,
            environment: Some(index),
            queued,
            ran,
        }
    }

    /// Every process exit so far.
    pub fn exits(&self) -> Vec<Exit> {
        self.exits.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The exits the harness did not cause (crashes).
    pub fn unexpected_exits(&self) -> Vec<Exit> {
        self.exits().into_iter().filter(|e| !e.expected).collect()
    }

    /// Every `panicked at` line in any process's log, as `<log file>: <line>`.
    pub fn panics(&self) -> Vec<String> {
        let mut found = Vec::new();
        for env in &self.environments {
            for log in env.logs() {
                let Ok(text) = std::fs::read(&log) else {
                    continue;
                };
                let text = String::from_utf8_lossy(&text);
                for line in text.lines().filter(|l| l.contains("panicked at")) {
                    found.push(format!("{}: {}", log.display(), line));
                }
            }
        }
        found
    }

    /// The receivers' delivery outcomes (`processed`, `replayed`, ...), counted from the
    /// `"outcome":"..."` member of the metric line each process prints per delivery.
    pub fn outcomes(&self) -> std::collections::BTreeMap<String, u64> {
        let mut counts = std::collections::BTreeMap::new();
        for env in &self.environments {
            for log in env.logs() {
                let Ok(text) = std::fs::read(&log) else {
                    continue;
                };
                let text = String::from_utf8_lossy(&text);
                for line in text.lines() {
                    if let Some(rest) = line.split("\"outcome\":\"").nth(1) {
                        if let Some((outcome, _)) = rest.split_once('"') {
                            *counts.entry(outcome.to_owned()).or_insert(0) += 1;
                        }
                    }
                }
            }
        }
        counts
    }

    /// Stops every environment (no restarts, SIGKILL) and waits briefly for the exits.
    pub async fn shutdown(&self) {
        for env in &self.environments {
            env.shutdown();
        }
        for _ in 0..100 {
            if self.environments.iter().all(|e| e.pid().is_none()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for env in &self.environments {
            env.shutdown();
        }
    }
}

/// An EventBridge scheduled event, as the worker's schedule sends it.
pub fn scheduled_event() -> Bytes {
    Bytes::from(
        serde_json::json!({
            "version": "0", "id": "chaos-schedule", "detail-type": "Scheduled Event",
            "source": "aws.events", "account": "123456789012",
            "time": "2026-12-01T00:00:00Z", "region": "us-east-1",
            "resources": ["arn:aws:events:us-east-1:123456789012:rule/chaos"], "detail": {}
        })
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "function" that never polls the Runtime API: prints a panic-looking line, then sleeps.
    fn silent_function(dir: &std::path::Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).expect("test dir");
        let script = dir.join("silent.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho \"thread 'main' panicked at src/fake.rs:1:1\" >&2\nexec /bin/sleep 30\n",
        )
        .expect("script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        script
    }

    async fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
        for _ in 0..500 {
            if ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test]
    async fn a_timed_out_or_killed_environment_is_replaced_and_its_logs_are_scanned() {
        let dir = std::env::temp_dir().join(format!("chaos-lambda-test-{}", std::process::id()));
        let spec = ProcessSpec {
            name: "silent".into(),
            binary: silent_function(&dir),
            env: Vec::new(),
            log_dir: dir.join("logs"),
        };
        let fleet = Fleet::start(spec, 1, Duration::from_millis(300), Duration::from_secs(5))
            .await
            .expect("fleet");
        let env = fleet.environments[0].clone();

        // No answer within the function timeout: 504, and Lambda's reset (kill + a new process).
        let invoked = fleet
            .invoke(Bytes::from_static(b"{}"), Tag::default())
            .await;
        assert!(matches!(invoked.outcome, Outcome::Timeout), "{invoked:?}");
        assert_eq!(invoked.outcome.status(), 504);
        wait_for("the replacement process", || {
            env.logs().len() == 2 && env.pid().is_some()
        })
        .await;

        // A kill of an idle environment interrupts nothing and is expected.
        assert!(matches!(env.kill(), Some(None)));
        wait_for("the second replacement", || {
            env.logs().len() == 3 && env.pid().is_some()
        })
        .await;
        wait_for("two exits", || fleet.exits().len() == 2).await;
        assert!(fleet.unexpected_exits().is_empty(), "{:?}", fleet.exits());

        // Every process's log is scanned.
        let panics = || fleet.panics();
        for _ in 0..500 {
            if panics().len() >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(panics().len(), 3, "{:?} {:?}", panics(), env.logs());
        fleet.shutdown().await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn outcomes_map_to_what_api_gateway_answers() {
        let response = Outcome::Response(Bytes::from_static(br#"{"statusCode": 409, "body": ""}"#));
        assert_eq!(response.status(), 409);
        assert_eq!(
            Outcome::Response(Bytes::from_static(b"{\"leased\": 0}")).status(),
            200
        );
        assert_eq!(Outcome::Died.status(), 502);
        assert_eq!(Outcome::FunctionError("boom".into()).status(), 502);
        assert_eq!(Outcome::Throttled.status(), 429);
    }
}
