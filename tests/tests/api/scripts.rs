//! The shell logic behind `make demo`, `make run` and `make test`: `scripts/demo-lib.sh` (where
//! the build lands, how the sources and the environment reach cargo lambda's emulator) and
//! `scripts/check-test-log.sh` (when a test run counts as a pass); and, without building,
//! `make package`: `scripts/package.sh`'s build command and `scripts/check-bootstrap.py`.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::Scratch;

fn root() -> PathBuf {
    hookledger_tests::repo_root()
}

/// Runs `script` in bash from the checkout with `scripts/demo-lib.sh` sourced; `env` is added to
/// the environment, `remove` taken out of it.
fn demo_lib(script: &str, env: &[(&str, &str)], remove: &[&str]) -> Output {
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!(
            "set -euo pipefail; . scripts/demo-lib.sh; {script}"
        ))
        .current_dir(root());
    for name in remove {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("bash runs")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn the_demo_finds_the_build_where_cargo_puts_it() {
    // With CARGO_TARGET_DIR set (common on developer machines), the binaries are not under
    // target/: the demo used to run target/debug/hookledger-dev and stop on "No such file".
    let elsewhere = Scratch::new("target-dir");
    let dir = elsewhere.0.to_str().unwrap();
    let found = stdout(&demo_lib(
        "demo_target_dir",
        &[("CARGO_TARGET_DIR", dir)],
        &["CARGO_BUILD_TARGET_DIR"],
    ));
    assert_eq!(found.trim(), dir);

    let found = stdout(&demo_lib(
        "demo_target_dir",
        &[],
        &["CARGO_TARGET_DIR", "CARGO_BUILD_TARGET_DIR"],
    ));
    assert_eq!(Path::new(found.trim()), root().join("target"));
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `cargo lambda watch --only-lambda-apis` (the emulator without building a function)
/// with `--env-file env_file`, and says whether it came up: it reads and checks the environment
/// before it listens, and exits at once on a value it refuses.
fn emulator_accepts(env_file: &Path, scratch: &Path) -> Result<(), String> {
    let port = free_port();
    let log_path = scratch.join("emulator.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new("cargo")
        .args(["lambda", "watch", "--only-lambda-apis", "-A", "127.0.0.1"])
        .args(["-P", &port.to_string()])
        .arg("--env-file")
        .arg(env_file)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("cargo starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let outcome = loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break Ok(());
        }
        if let Some(status) = child.try_wait().unwrap() {
            break Err(format!(
                "cargo lambda watch exited ({status}): {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            ));
        }
        if Instant::now() > deadline {
            break Err(format!(
                "cargo lambda watch did not listen within 60 s: {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

#[test]
fn json_sources_with_commas_reach_the_emulator_through_a_file() {
    // `make run` with HOOKLEDGER_SOURCES set used to pass the JSON with --env-var, which cargo
    // lambda splits on commas: it exited at once with `invalid environment variable`. The same
    // held for any value with a comma, such as RUST_LOG=info,shared=debug.
    let scratch = Scratch::new("demo-env");
    let sources = hookledger_tests::local_sources_json().unwrap();
    assert!(sources.contains(','), "the sources JSON has commas");
    let script = r#"
        file=$(demo_sources_file "$SCRATCH/sources.json")
        demo_env_file "$SCRATCH/emulator.env" \
          "DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable" \
          "HOOKLEDGER_SOURCES_FILE=$file" "RUST_LOG=info,shared=debug"
        echo "$file"
    "#;
    let scratch_dir = scratch.0.to_str().unwrap();
    let file = stdout(&demo_lib(
        script,
        &[("SCRATCH", scratch_dir), ("HOOKLEDGER_SOURCES", &sources)],
        &["HOOKLEDGER_SOURCES_FILE"],
    ));
    let file = PathBuf::from(file.trim());
    assert_eq!(file, scratch.0.join("sources.json"));
    // Byte for byte what the user set.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), sources);
    let env_file = scratch.0.join("emulator.env");
    let env = std::fs::read_to_string(&env_file).unwrap();
    assert!(
        env.contains(&format!("HOOKLEDGER_SOURCES_FILE='{}'\n", file.display())),
        "{env}"
    );
    assert!(env.contains("RUST_LOG='info,shared=debug'\n"), "{env}");
    assert!(!env.contains("HOOKLEDGER_SOURCES="), "{env}");
    // Both files hold secrets: owner only.
    use std::os::unix::fs::PermissionsExt as _;
    for path in [&env_file, &file] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} mode {mode:o}", path.display());
    }

    emulator_accepts(&env_file, &scratch.0).unwrap();

    // Without HOOKLEDGER_SOURCES: the file given, as an absolute path, else the local sources.
    let given = stdout(&demo_lib(
        "demo_sources_file /nonexistent/unused",
        &[("HOOKLEDGER_SOURCES_FILE", "events/sources.local.json")],
        &["HOOKLEDGER_SOURCES"],
    ));
    assert_eq!(
        Path::new(given.trim()),
        root().join("events/sources.local.json")
    );
    let default = stdout(&demo_lib(
        "demo_sources_file /nonexistent/unused",
        &[],
        &["HOOKLEDGER_SOURCES", "HOOKLEDGER_SOURCES_FILE"],
    ));
    assert_eq!(default.trim(), given.trim());
}

#[test]
fn the_demo_refuses_what_it_cannot_pass_on() {
    let scratch = Scratch::new("demo-refuse");
    let scratch_dir = scratch.0.to_str().unwrap();
    let refused = |script: &str, env: &[(&str, &str)], remove: &[&str]| {
        let mut all = vec![("SCRATCH", scratch_dir)];
        all.extend_from_slice(env);
        let output = demo_lib(script, &all, remove);
        assert!(!output.status.success(), "{script}: accepted");
        String::from_utf8(output.stderr).unwrap()
    };
    let both = refused(
        r#"demo_sources_file "$SCRATCH/s.json""#,
        &[
            ("HOOKLEDGER_SOURCES", "[]"),
            ("HOOKLEDGER_SOURCES_FILE", "events/sources.local.json"),
        ],
        &[],
    );
    assert!(both.contains("set only one"), "{both}");
    let missing = refused(
        r#"demo_sources_file "$SCRATCH/s.json""#,
        &[("HOOKLEDGER_SOURCES_FILE", "events/no-such-file.json")],
        &["HOOKLEDGER_SOURCES"],
    );
    assert!(missing.contains("events/no-such-file.json"), "{missing}");
    for (value, what) in [
        ("it's", "quote"),
        ("a\nb", "newline"),
        ("a\\nb", "backslash-n"),
    ] {
        let message = refused(
            r#"demo_env_file "$SCRATCH/e.env" "DATABASE_URL=$VALUE""#,
            &[("VALUE", value)],
            &[],
        );
        assert!(message.starts_with("DATABASE_URL "), "{what}: {message}");
    }
    let empty = refused(r#"demo_env_file "$SCRATCH/e.env" "RUST_LOG=""#, &[], &[]);
    assert!(empty.contains("RUST_LOG is empty"), "{empty}");
}

#[test]
fn an_optional_variable_left_empty_is_left_out_of_the_emulators_environment() {
    // `HOOKLEDGER_SOURCES=... make run` (the README's way to run your own sources) failed at
    // once: demo.sh passed HOOKLEDGER_EXAMPLES, empty with your own sources, and an empty value
    // is refused ("HOOKLEDGER_EXAMPLES is empty: the emulator's environment cannot pass an
    // empty value"). `NAME?=VALUE` is optional: left out when empty, written when not.
    let scratch = Scratch::new("demo-env-optional");
    let scratch_dir = scratch.0.to_str().unwrap();
    let script = r#"
        demo_env_file "$SCRATCH/empty.env" "RUST_LOG=info" "HOOKLEDGER_EXAMPLES?="
        demo_env_file "$SCRATCH/set.env" "RUST_LOG=info" "HOOKLEDGER_EXAMPLES?=stripe"
    "#;
    stdout(&demo_lib(script, &[("SCRATCH", scratch_dir)], &[]));
    let empty = std::fs::read_to_string(scratch.0.join("empty.env")).unwrap();
    assert_eq!(empty, "RUST_LOG='info'\n");
    let set = std::fs::read_to_string(scratch.0.join("set.env")).unwrap();
    assert_eq!(set, "RUST_LOG='info'\nHOOKLEDGER_EXAMPLES='stripe'\n");
    // And demo.sh passes the examples' sources that way: empty with your own sources.
    let demo = std::fs::read_to_string(root().join("scripts/demo.sh")).unwrap();
    assert!(
        demo.contains("\"HOOKLEDGER_EXAMPLES?=$HOOKLEDGER_EXAMPLES\""),
        "scripts/demo.sh must pass HOOKLEDGER_EXAMPLES as optional"
    );
}

/// Runs `scripts/check-test-log.sh` on `log` with a minimum-file holding `minimum`.
fn check_log(log: &str, minimum: &str) -> (bool, String) {
    let scratch = Scratch::new("test-log");
    let log_path = scratch.0.join("test.log");
    let minimum_path = scratch.0.join("minimum");
    std::fs::write(&log_path, log).unwrap();
    std::fs::write(&minimum_path, minimum).unwrap();
    let output = Command::new(root().join("scripts/check-test-log.sh"))
        .arg(&log_path)
        .arg(&minimum_path)
        .output()
        .expect("check-test-log.sh runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// A `cargo test --workspace` log in cargo's own words: the shared unit tests, the end-to-end
/// binary, and doc-tests.
fn cargo_log(unit: &str, e2e: &str, doc: &str) -> String {
    format!(
        "   Compiling shared v0.1.0 (/x/shared)\n\
         \x20    Running unittests src/lib.rs (target/debug/deps/shared-0123)\n\n\
         running 3 tests\ntest a ... ok\n\n\
         test result: {unit}; 0 measured; 0 filtered out; finished in 0.01s\n\n\
         \x20    Running tests/api/main.rs (target/debug/deps/api-4567)\n\n\
         running 64 tests\n{{\"level\":\"INFO\",\"message\":\"delivery\"}}\n\n\
         test result: {e2e}; 0 measured; 0 filtered out; finished in 9.12s\n\n\
         \x20  Doc-tests shared\n\n\
         running 0 tests\n\n\
         test result: {doc}; 0 measured; 0 filtered out; finished in 0.00s\n\n"
    )
}

#[test]
fn make_test_fails_on_ignored_tests_and_short_end_to_end_runs() {
    let ok = "ok. 3 passed; 0 failed; 0 ignored";
    let e2e = "ok. 64 passed; 0 failed; 0 ignored";
    let none = "ok. 0 passed; 0 failed; 0 ignored";

    let (passed, text) = check_log(&cargo_log(ok, e2e, none), "# comment\n64\n");
    assert!(passed, "{text}");
    assert!(
        text.contains("67 passed, 0 failed, 0 ignored; end-to-end: 64 passed (minimum 64)"),
        "{text}"
    );

    // One ignored test anywhere, even a doc-test, fails the run.
    let (passed, text) = check_log(
        &cargo_log(ok, e2e, "ok. 0 passed; 0 failed; 1 ignored"),
        "64",
    );
    assert!(!passed, "{text}");
    assert!(text.contains("1 test(s) ignored"), "{text}");
    let (passed, text) = check_log(
        &cargo_log("ok. 2 passed; 0 failed; 1 ignored", e2e, none),
        "64",
    );
    assert!(!passed, "{text}");

    // Fewer end-to-end tests than the minimum (a filter, a lost module) fails the run, even
    // though every test that ran passed.
    let (passed, text) = check_log(
        &cargo_log(ok, "ok. 63 passed; 0 failed; 0 ignored", none),
        "64",
    );
    assert!(!passed, "{text}");
    assert!(
        text.contains("passed 63 tests, fewer than the 64"),
        "{text}"
    );

    // The unit tests' passes do not count towards the end-to-end minimum.
    let (passed, text) = check_log(
        &cargo_log(
            "ok. 300 passed; 0 failed; 0 ignored",
            "ok. 1 passed; 0 failed; 0 ignored",
            none,
        ),
        "64",
    );
    assert!(!passed, "{text}");

    // No end-to-end result at all (it did not build, or crashed before reporting).
    let without_e2e: String = cargo_log(ok, e2e, none)
        .lines()
        .filter(|line| !line.contains("tests/api/main.rs") && !line.contains("64 passed"))
        .map(|line| format!("{line}\n"))
        .collect();
    let (passed, text) = check_log(&without_e2e, "64");
    assert!(!passed, "{text}");
    assert!(text.contains("did not report a result"), "{text}");

    // A failure, and a run where nothing passed, still fail; so does a minimum that is no number.
    let (passed, _) = check_log(
        &cargo_log(ok, "FAILED. 63 passed; 1 failed; 0 ignored", none),
        "0",
    );
    assert!(!passed);
    let (passed, text) = check_log(&cargo_log(none, none, none), "0");
    assert!(!passed, "{text}");
    assert!(text.contains("no test ran"), "{text}");
    let (passed, text) = check_log(&cargo_log(ok, e2e, none), "sixty-four");
    assert!(!passed, "{text}");
}

/// Runs `scripts/package.sh --dry-run` (what `make package` would build, without building) with
/// `arch` as ARCH (unset when None).
fn package_dry_run(arch: Option<&str>) -> Output {
    let mut command = Command::new("bash");
    command
        .arg(root().join("scripts/package.sh"))
        .arg("--dry-run")
        .current_dir(root());
    match arch {
        Some(arch) => command.env("ARCH", arch),
        None => command.env_remove("ARCH"),
    };
    command.output().expect("bash runs")
}

#[test]
fn make_package_builds_every_function_crate_at_once_for_al2023s_glibc() {
    let syntax = Command::new("bash")
        .args(["-n", "scripts/package.sh"])
        .current_dir(root())
        .output()
        .expect("bash runs");
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );

    // Every functions/<crate> (found, not listed: a new function is packaged without editing
    // the script), in ONE cargo lambda build, arm64 unless asked otherwise, pinned to glibc 2.34.
    let mut crates: Vec<String> = std::fs::read_dir(root().join("functions"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| dir.join("Cargo.toml").is_file())
        .map(|dir| dir.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    assert!(crates.len() >= 5, "{crates:?}");
    for (arch, target) in [
        (None, "aarch64-unknown-linux-gnu.2.34"),
        (Some("arm64"), "aarch64-unknown-linux-gnu.2.34"),
        (Some("x86_64"), "x86_64-unknown-linux-gnu.2.34"),
    ] {
        let out = stdout(&package_dry_run(arch));
        let builds: Vec<&str> = out
            .lines()
            .filter(|line| line.starts_with("cargo lambda build "))
            .collect();
        assert_eq!(builds.len(), 1, "{arch:?}: {out}");
        let build = builds[0];
        assert!(
            build.contains("--release") && build.contains("--output-format zip"),
            "{build}"
        );
        assert!(build.contains(&format!("--target {target} ")), "{build}");
        assert!(build.contains(" -p hookledger-handlers "), "{build}");
        for name in &crates {
            assert!(build.contains(&format!(" --bin {name}")), "{name}: {build}");
            assert!(
                out.lines()
                    .any(|line| line.ends_with(&format!("/lambda/{name}/bootstrap.zip"))),
                "{name}: {out}"
            );
        }
    }

    let refused = package_dry_run(Some("sparc"));
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("ARCH must be arm64"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// This machine's architecture as `make package` and `scripts/check-bootstrap.py` name it.
fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "x86_64",
    }
}

/// Runs `scripts/check-bootstrap.py` with `args`: (passed, stdout + stderr).
fn check_bootstrap(args: &[&str]) -> (bool, String) {
    let output = Command::new("python3")
        .arg(root().join("scripts/check-bootstrap.py"))
        .args(args)
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Issue 29: a packaged function links the AWS SDKs it calls and no other, and one TLS stack.
/// The check finds each SDK by a string it compiles in; here those strings are appended to the
/// host's /bin/true (the ELF headers do not cover trailing bytes) under the folder names
/// `make package` writes (`lambda/<function>/bootstrap`).
#[test]
fn the_bootstrap_check_refuses_an_sdk_a_function_never_calls_and_a_second_tls_stack() {
    let host = host_arch();
    let scratch = Scratch::new("bootstrap-sdks");
    let true_bin = std::fs::read("/bin/true").unwrap();
    let write = |function: &str, markers: &[&str]| {
        let dir = scratch.0.join("lambda").join(function);
        std::fs::create_dir_all(&dir).unwrap();
        let mut data = true_bin.clone();
        for marker in markers {
            data.extend_from_slice(marker.as_bytes());
            data.push(0);
        }
        let path = dir.join("bootstrap");
        std::fs::write(&path, data).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let secrets = "secretsmanager.GetSecretValue";
    let kms = "TrentService.GenerateDataKey";
    let sqs = "AmazonSQS.SendMessage";
    let events = "AWSEvents.PutEvents";
    let invoke = "/2015-03-31/functions/";
    let check = |path: &str| check_bootstrap(&["--arch", host, "--max-glibc", "99.0", path]);

    let sweeper = write("sweeper", &[secrets]);
    let (passed, text) = check(&sweeper);
    assert!(passed, "{text}");
    assert!(text.contains("AWS APIs secretsmanager"), "{text}");

    let worker = write("worker", &[secrets, kms, sqs, events]);
    let (passed, text) = check(&worker);
    assert!(passed, "{text}");

    let sweeper = write("sweeper", &[secrets, kms, sqs]);
    let (passed, text) = check(&sweeper);
    assert!(!passed, "{text}");
    assert!(
        text.contains("sweeper links the SDK of kms, sqs, which it never calls"),
        "{text}"
    );

    let console = write("console", &[secrets, kms, invoke]);
    let (passed, text) = check(&console);
    assert!(!passed, "{text}");
    assert!(text.contains("console links the SDK of lambda"), "{text}");

    // aws-config's default credential chain (assumed roles, SSO) is the CLI's, not a function's.
    let migrate = write(
        "migrate",
        &[secrets, "STS.AssumeRole", "SSO OIDC.CreateToken"],
    );
    let (passed, text) = check(&migrate);
    assert!(!passed, "{text}");
    assert!(
        text.contains("migrate links the SDK of sso-oidc, sts, which it never calls"),
        "{text}"
    );

    let receiver = write("receiver", &[secrets, kms, invoke, "rustls"]);
    let (passed, text) = check(&receiver);
    assert!(!passed, "{text}");
    assert!(
        text.contains("rustls is compiled in beside OpenSSL"),
        "{text}"
    );

    let worker = write("worker", &[secrets, kms, sqs]);
    let (passed, text) = check(&worker);
    assert!(!passed, "{text}");
    assert!(
        text.contains("worker lacks the SDK of eventbridge, which it calls"),
        "{text}"
    );
}

#[test]
fn the_bootstrap_check_refuses_another_architecture_libssl_and_a_newer_glibc() {
    // The host's /bin/true is a small dynamically linked glibc executable that needs only
    // libc.so.6: what a bootstrap looks like, without building one.
    let (host, other) = match std::env::consts::ARCH {
        "aarch64" => ("arm64", "x86_64"),
        _ => ("x86_64", "arm64"),
    };
    let scratch = Scratch::new("bootstrap-check");
    let true_bin = std::fs::read("/bin/true").unwrap();
    let plain = scratch.0.join("bootstrap");
    std::fs::write(&plain, &true_bin).unwrap();
    let plain = plain.to_str().unwrap();

    let (passed, text) = check_bootstrap(&["--arch", host, "--max-glibc", "99.0", plain]);
    assert!(passed, "{text}");
    assert!(
        text.contains("dynamically linked glibc") && text.contains("needs libc.so.6"),
        "{text}"
    );
    // The highest GLIBC_x.y it reports is the one readelf finds, where binutils is installed.
    let highest = text
        .split("highest glibc symbol version GLIBC_")
        .nth(1)
        .and_then(|rest| rest.split([';', '\n']).next())
        .unwrap_or_else(|| panic!("no glibc version in {text}"))
        .to_owned();
    if let Ok(readelf) = Command::new("readelf").args(["-V", plain]).output() {
        let listing = String::from_utf8_lossy(&readelf.stdout);
        let mut versions: Vec<Vec<u32>> = listing
            .split_whitespace()
            .filter_map(|word| word.strip_prefix("GLIBC_"))
            .filter_map(|v| v.split('.').map(|n| n.parse().ok()).collect())
            .collect();
        versions.sort();
        let expected: Vec<u32> = highest.split('.').map(|n| n.parse().unwrap()).collect();
        assert_eq!(versions.last(), Some(&expected), "{listing}");
    }

    // A glibc newer than the runtime's: refused, naming the version.
    let (passed, text) = check_bootstrap(&["--arch", host, "--max-glibc", "2.0", plain]);
    assert!(!passed, "{text}");
    assert!(
        text.contains(&format!("needs GLIBC_{highest} > 2.0")),
        "{text}"
    );

    // Built for the other architecture: refused.
    let (passed, text) = check_bootstrap(&["--arch", other, "--max-glibc", "99.0", plain]);
    assert!(!passed, "{text}");
    assert!(text.contains(&format!("not {other}")), "{text}");

    // The same binary made to need libssl.so (same length as libc.so.6): refused, OpenSSL
    // must be static.
    let needle = b"libc.so.6\0";
    let mut patched = true_bin.clone();
    let mut replaced = 0;
    let mut i = 0;
    while i + needle.len() <= patched.len() {
        if &patched[i..i + needle.len()] == needle {
            patched[i..i + needle.len()].copy_from_slice(b"libssl.so\0");
            replaced += 1;
        }
        i += 1;
    }
    assert!(replaced > 0);
    let ssl = scratch.0.join("ssl-bootstrap");
    std::fs::write(&ssl, &patched).unwrap();
    let (passed, text) =
        check_bootstrap(&["--arch", host, "--max-glibc", "99.0", ssl.to_str().unwrap()]);
    assert!(!passed, "{text}");
    assert!(text.contains("links libssl.so"), "{text}");

    // A zip is checked inside: exactly one executable `bootstrap`.
    let zip = |name: &str, mode: &str| {
        let path = scratch.0.join(name);
        let made = Command::new("python3")
            .args([
                "-c",
                "import sys, zipfile\n\
                 z = zipfile.ZipFile(sys.argv[1], 'w')\n\
                 i = zipfile.ZipInfo('bootstrap')\n\
                 i.create_system = 3\n\
                 i.external_attr = int(sys.argv[2], 8) << 16\n\
                 z.writestr(i, open(sys.argv[3], 'rb').read())\n\
                 z.close()",
            ])
            .arg(&path)
            .arg(mode)
            .arg(plain)
            .status()
            .expect("python3 runs");
        assert!(made.success());
        path.to_str().unwrap().to_owned()
    };
    let (passed, text) = check_bootstrap(&[
        "--arch",
        host,
        "--max-glibc",
        "99.0",
        &zip("ok.zip", "100755"),
    ]);
    assert!(passed, "{text}");
    let (passed, text) = check_bootstrap(&[
        "--arch",
        host,
        "--max-glibc",
        "99.0",
        &zip("not-executable.zip", "100644"),
    ]);
    assert!(!passed, "{text}");
    assert!(text.contains("not executable"), "{text}");
}

/// `scripts/scan-test-logs.py` over `paths` (with `--min-bytes min`), with `database_url` as
/// the environment's `DATABASE_URL`: the exit code and everything it printed.
fn scan_logs(paths: &[&Path], min: usize, database_url: Option<&str>) -> (i32, String) {
    let mut command = Command::new("python3");
    command
        .arg(root().join("scripts/scan-test-logs.py"))
        .args(["--min-bytes", &min.to_string()])
        .args(paths)
        .env_remove("HOOKLEDGER_SCAN_EXTRA_SECRETS")
        .env_remove("HOOKLEDGER_TEST_POOLER_URL")
        .env_remove("DATABASE_URL");
    if let Some(url) = database_url {
        command.env("DATABASE_URL", url);
    }
    let output = command.output().expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn the_log_scan_catches_a_planted_secret_or_signature_and_passes_a_clean_log() {
    let scratch = Scratch::new("scan-logs");
    // A clean log: the functions' JSON lines, with payload digests (64 hex digits, no prefix).
    let clean: String = (0..2_000)
        .map(|n| {
            format!(
                "{{\"timestamp\":\"2026-12-02T01:00:00Z\",\"level\":\"INFO\",\"message\":\"delivery\",\
                 \"source\":\"stripe\",\"event_id\":\"evt_{n}\",\"outcome\":\"processed\",\
                 \"digest\":\"{:064x}\",\"status\":200}}\n",
                n * 7919
            )
        })
        .collect();
    let clean_dir = scratch.0.join("clean");
    std::fs::create_dir_all(&clean_dir).unwrap();
    std::fs::write(clean_dir.join("api-1.log"), &clean).unwrap();
    let (code, out) = scan_logs(&[&clean_dir], 100_000, None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("none found"), "{out}");

    // The local Stripe secret, read from the sources (not written here), planted in a line.
    let sources: serde_json::Value =
        serde_json::from_str(&hookledger_tests::local_sources_json().unwrap()).unwrap();
    let secret = sources[0]["secrets"][0].as_str().unwrap().to_owned();
    let planted: [(&str, String); 6] = [
        (
            "signing secret",
            format!("{{\"error\":\"bad key {secret}\"}}\n"),
        ),
        (
            "Stripe signature",
            format!("stripe-signature: t=1750000000,v1={:064x}\n", 42),
        ),
        ("GitHub signature", format!("\"sha256={:064x}\"\n", 7)),
        (
            "Standard Webhooks signature",
            "webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=\n".to_owned(),
        ),
        (
            "database password",
            "connecting as hookledger:pw-9f2c41d7e8 \n".to_owned(),
        ),
        // A payload value: the marker the tests plant in the payloads they send.
        (
            "payload value",
            format!(
                "{{\"level\":\"ERROR\",\"error\":\"DETAIL: Failing row contains (order for {})\"}}\n",
                hookledger_tests::PAYLOAD_MARKER
            ),
        ),
    ];
    for (what, line) in planted {
        let dir = scratch.0.join(what.replace(' ', "-"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("api-1.log"), format!("{clean}{line}{clean}")).unwrap();
        let (code, out) = scan_logs(
            &[&dir],
            100_000,
            Some("postgres://hookledger:pw-9f2c41d7e8@127.0.0.1:5432/app"),
        );
        assert_eq!(code, 1, "{what}: {out}");
        assert!(
            out.contains("api-1.log:2001"),
            "{what}: the line is named: {out}"
        );
        assert!(
            !out.contains(&secret)
                && !out.contains("pw-9f2c41d7e8")
                && !out.contains(hookledger_tests::PAYLOAD_MARKER),
            "{what}: {out}"
        );
    }

    // A scan that read (almost) nothing refuses to pass.
    let empty = scratch.0.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert_eq!(scan_logs(&[&empty], 100_000, None).0, 2);
    assert_eq!(scan_logs(&[&scratch.0.join("missing")], 100_000, None).0, 2);
}

/// glibc 2.36 added the symbol version `GLIBC_ABI_DT_RELR`, which a binary linked with
/// `-z pack-relative-relocs` (DT_RELR; the default of newer toolchains and distributions)
/// requires. al2023's glibc is 2.34: the loader refuses such a bootstrap ("version
/// `GLIBC_ABI_DT_RELR' not found"). `scripts/check-bootstrap.py` only weighs `GLIBC_<digits>`
/// versions (its regex) and drops every other `GLIBC_*` name from the report, so it passes the
/// bootstrap as fit for al2023. The fixture: Debian 12's own `/usr/bin/getconf`, which needs
/// GLIBC_2.34 at most, and GLIBC_ABI_DT_RELR.
#[test]
fn the_bootstrap_check_refuses_a_binary_needing_glibc_abi_dt_relr() {
    let fixture = "/usr/bin/getconf";
    let bytes = std::fs::read(fixture).unwrap();
    assert!(
        bytes
            .windows(b"GLIBC_ABI_DT_RELR".len())
            .any(|w| w == b"GLIBC_ABI_DT_RELR"),
        "the fixture {fixture} needs GLIBC_ABI_DT_RELR on this machine (Debian 12)"
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let arch = host_arch();
    let output = std::process::Command::new("python3")
        .arg(root.join("scripts/check-bootstrap.py"))
        .args(["--arch", arch, "--max-glibc", "2.34", fixture])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        !output.status.success(),
        "accepted for al2023 (glibc 2.34) a binary that needs GLIBC_ABI_DT_RELR (glibc 2.36+): {text}"
    );
}

/// Issue 29: `make package` refuses a bootstrap whose OpenSSL has a part that
/// .cargo/openssl-configure-perl leaves out (its Configure options did not take effect), naming
/// the option. The fixtures: the host's /bin/true with one part's marker appended each: the
/// first point of arm64's 512 KiB table of precomputed SM2 points (SM2's generator, as
/// `crypto/ec/ecp_sm2p256_table.c` stores it), a format string of QUIC's, and the provider name
/// lists of ML-DSA-65 and 3DES.
#[test]
fn the_bootstrap_check_refuses_the_parts_of_openssl_its_configure_leaves_out() {
    let host = host_arch();
    let scratch = Scratch::new("bootstrap-openssl-parts");
    let plain = std::fs::read("/bin/true").unwrap();
    let sm2_table: Vec<u8> = [
        0x715a_4589_334c_74c7_u64,
        0x8fe3_0bbf_f266_0be1,
        0x5f99_0446_6a39_c994,
        0x32c4_ae2c_1f19_8119,
        0x02df_32e5_2139_f0a0,
        0xd0a9_877c_c62a_4740,
        0x59bd_cee3_6b69_2153,
        0xbc37_36a2_f4f6_779c,
    ]
    .iter()
    .flat_map(|word| word.to_le_bytes())
    .collect();
    let check = |path: &Path| {
        check_bootstrap(&[
            "--arch",
            host,
            "--max-glibc",
            "99.0",
            path.to_str().unwrap(),
        ])
    };
    let clean = scratch.0.join("clean");
    std::fs::write(&clean, &plain).unwrap();
    let (passed, text) = check(&clean);
    assert!(passed, "{text}");
    for (name, marker, what, option) in [
        (
            "sm2",
            sm2_table.as_slice(),
            "precomputed SM2 table",
            "no-sm2-precomp",
        ),
        (
            "quic",
            b"QUIC error code: 0x%llx%s%s%s, reason: \"%s\"".as_slice(),
            "QUIC",
            "no-quic",
        ),
        (
            "ml-dsa",
            b"ML-DSA-65:MLDSA65:".as_slice(),
            "ML-DSA",
            "no-ml-dsa",
        ),
        ("des", b"DES-EDE3-CBC:DES3:".as_slice(), "DES", "no-des"),
    ] {
        let path = scratch.0.join(name);
        std::fs::write(&path, [plain.as_slice(), marker].concat()).unwrap();
        let (passed, text) = check(&path);
        assert!(!passed, "{name}: {text}");
        assert!(
            text.contains(&format!("OpenSSL's {what}")) && text.contains(option),
            "{name}: {text}"
        );
    }
}

/// The perl `.cargo/config.toml` gives openssl-src (`OPENSSL_SRC_PERL`) adds its options to
/// OpenSSL's `./Configure`, after openssl-src's own, and runs every other perl command
/// unchanged. A fake perl (`PERL`) prints the arguments it gets.
#[test]
fn openssls_configure_gets_our_options_and_other_perl_runs_unchanged() {
    let scratch = Scratch::new("openssl-perl");
    let fake = scratch.0.join("perl");
    std::fs::write(&fake, "#!/bin/sh\necho \"$@\"\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let shim = root().join(".cargo/openssl-configure-perl");
    let run = |args: &[&str]| {
        let output = Command::new(&shim)
            .args(args)
            .env("PERL", &fake)
            .output()
            .expect("the shim runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let configure = run(&["./Configure", "--prefix=/x", "no-shared", "linux-aarch64"]);
    let options = configure
        .strip_prefix("./Configure --prefix=/x no-shared linux-aarch64 ")
        .unwrap_or_else(|| panic!("openssl-src's arguments first, in order: {configure}"));
    let options: Vec<&str> = options.split_whitespace().collect();
    // The parts scripts/check-bootstrap.py looks for, and every option an OpenSSL option.
    for part in ["no-sm2-precomp", "no-quic", "no-ml-dsa", "no-des"] {
        assert!(options.contains(&part), "{part} missing: {configure}");
    }
    assert!(options.iter().all(|o| o.starts_with("no-")), "{configure}");
    assert_eq!(run(&["util/mkerr.pl", "-a"]), "util/mkerr.pl -a");
    let config = std::fs::read_to_string(root().join(".cargo/config.toml")).unwrap();
    assert!(
        config.contains(
            "OPENSSL_SRC_PERL = { value = \".cargo/openssl-configure-perl\", relative = true }"
        ),
        "{config}"
    );
}
