//! The test suite's logs, collected for the secret scan of `make test`
//! (scripts/scan-test-logs.py): with [`LOG_DIR_ENV`] set (scripts/test.sh sets it to a fresh
//! folder under the target dir), every in-process test logs through the functions' own JSON
//! subscriber (`shared::telemetry::subscriber`, debug for the workspace's crates) into
//! `{dir}/api-{pid}.log`, and the output of the processes tests spawn is appended by [`record`];
//! without it, logs go through libtest's capture as before (shown for failing tests only).

use std::io::Write as _;
use std::path::PathBuf;

/// The folder the logs are written to; unset: no files.
pub const LOG_DIR_ENV: &str = "HOOKLEDGER_TEST_LOG_DIR";

/// What is logged to the files: everything the workspace's crates log at debug and above (the
/// EMF metric events are debug), the rest at info.
const FILTER: &str = "info,shared=debug,receiver=debug,worker=debug,replay=debug,sweeper=debug,\
                      auditor=debug,migrate=debug,hookledger=debug,hookledger_handlers=debug,\
                      handlers=debug,hookledger_tests=debug,hookledger_console=debug,\
                      console_function=debug,console=debug";

fn dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os(LOG_DIR_ENV)?);
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Installs the process-wide subscriber once (later calls do nothing): into the log folder when
/// [`LOG_DIR_ENV`] is set, else JSON lines through libtest's capture.
pub fn install() {
    let file = dir().and_then(|dir| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("api-{}.log", std::process::id())))
            .ok()
    });
    match file {
        Some(file) => {
            let filter = FILTER
                .parse()
                .expect("FILTER is a list of target=level directives");
            let subscriber = shared::telemetry::subscriber(std::sync::Mutex::new(file), filter);
            // `try_init` also routes the `log` crate's records, as `shared::telemetry::init` does.
            let _ = tracing_subscriber::util::SubscriberInitExt::try_init(subscriber);
        }
        None => {
            let _ = tracing_subscriber::fmt()
                .json()
                .flatten_event(true)
                .with_test_writer()
                .try_init();
        }
    }
}

/// Appends a spawned process's stdout and stderr to `{dir}/{program}-{pid}.log` when
/// [`LOG_DIR_ENV`] is set (the test process's pid: one file per test binary).
pub fn record(program: &str, output: &std::process::Output) {
    let Some(dir) = dir() else {
        return;
    };
    let path = dir.join(format!("{program}-{}.log", std::process::id()));
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(&output.stdout);
        let _ = file.write_all(&output.stderr);
    }
}
