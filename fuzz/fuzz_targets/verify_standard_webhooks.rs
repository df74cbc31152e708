#![no_main]
//! `cargo fuzz run verify_standard_webhooks`: see hookledger_fuzzing::verify_standard_webhooks (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::verify_standard_webhooks(data));
