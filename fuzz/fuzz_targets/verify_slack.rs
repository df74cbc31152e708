#![no_main]
//! `cargo fuzz run verify_slack`: see hookledger_fuzzing::verify_slack (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::verify_slack(data));
