#![no_main]
//! `cargo fuzz run verify_github`: see hookledger_fuzzing::verify_github (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::verify_github(data));
