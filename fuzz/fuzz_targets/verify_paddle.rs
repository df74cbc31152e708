#![no_main]
//! `cargo fuzz run verify_paddle`: see hookledger_fuzzing::verify_paddle (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::verify_paddle(data));
