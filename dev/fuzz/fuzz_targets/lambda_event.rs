#![no_main]
//! `cargo fuzz run lambda_event`: see hookledger_fuzz_entry::lambda_event (dev/fuzz-entry/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::lambda_event(data));
