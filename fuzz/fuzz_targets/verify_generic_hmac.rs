#![no_main]
//! `cargo fuzz run verify_generic_hmac`: see hookledger_fuzzing::verify_generic_hmac (fuzzing/src/lib.rs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookledger_fuzzing::verify_generic_hmac(data));
