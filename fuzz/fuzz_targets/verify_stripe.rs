#![no_main]
//! `cargo fuzz run verify_stripe`: see hookledger_fuzzing::verify_stripe (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::verify_stripe(data));
