#![no_main]
//! `cargo fuzz run verify_standard_webhooks`: see hookledger_fuzz_entry::verify_standard_webhooks (dev/fuzz-entry/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzz_entry::verify_standard_webhooks(data));
