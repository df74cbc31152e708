//! Replays every committed fuzz input through its target's entry function: the crashes the
//! fuzzer found (`dev/fuzz/regressions/<target>/`, each a regression test of its fix) and the seed
//! corpus (`dev/fuzz/corpus/<target>/`), so this test never replays nothing. Runs in `make test`
//! on stable; `make fuzz` runs the same entry functions under libFuzzer.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use hookledger_fuzz_entry::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files of `dir` (none when it does not exist), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Runs every file of `kind` (`regressions` or `corpus`) through its target; returns how many
/// ran and the files that panicked.
fn replay(kind: &str) -> (usize, Vec<String>) {
    let mut ran = 0;
    let mut panicked = Vec::new();
    for target in TARGETS {
        for path in files(&fuzz_dir().join(kind).join(target.name)) {
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            ran += 1;
            if catch_unwind(AssertUnwindSafe(|| (target.run)(&data))).is_err() {
                panicked.push(format!("{}: {}", target.name, path.display()));
            }
        }
    }
    (ran, panicked)
}

#[test]
fn every_fuzz_regression_input_is_handled_without_a_panic() {
    let (ran, panicked) = replay("regressions");
    assert!(
        panicked.is_empty(),
        "{ran} replayed; panicked: {panicked:#?}"
    );
}

#[test]
fn every_fuzz_seed_input_is_handled_without_a_panic() {
    let (ran, panicked) = replay("corpus");
    assert!(
        panicked.is_empty(),
        "{ran} replayed; panicked: {panicked:#?}"
    );
    // Every target has seeds, so this test never replays nothing.
    for target in TARGETS {
        assert!(
            !files(&fuzz_dir().join("corpus").join(target.name)).is_empty(),
            "dev/fuzz/corpus/{} has no seed",
            target.name
        );
    }
}

#[test]
fn every_target_has_a_fuzz_target_file() {
    for target in TARGETS {
        let file = fuzz_dir()
            .join("fuzz_targets")
            .join(format!("{}.rs", target.name));
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(
            text.contains(&format!("hookledger_fuzz_entry::{}(", target.name)),
            "{} does not call hookledger_fuzz_entry::{}",
            file.display(),
            target.name
        );
    }
}

/// The seeds start where the interesting code is: every signed Lambda event of
/// `events/receiver/` verifies at [`hookledger_fuzz_entry::NOW`] against the fixed sources and
/// reaches the claim, and the deliberately broken ones stop where they should.
#[test]
fn the_signed_seed_events_reach_the_claim() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events/receiver");
    let mut reached = 0;
    for path in files(&dir) {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let stopped = hookledger_fuzz_entry::lambda_event_status(&data);
        // Past the signature and the extraction, the claim cannot reach the database: 503.
        let expected = if name.contains("bad-signature") {
            401
        } else if name.contains("invalid-base64") {
            400
        } else if name.contains("url-verification")
            || name.contains("ping") && name.contains("discord")
        {
            // Slack's and Discord's handshakes: signed, answered, never claimed.
            200
        } else {
            503
        };
        assert_eq!(stopped, Some(expected), "{name}");
        reached += usize::from(expected == 503);
    }
    assert!(reached >= 10, "only {reached} events reached the claim");
}
