#![no_main]
//! `cargo fuzz run lambda_event`: see hookledger_fuzzing::lambda_event (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::lambda_event(data));
