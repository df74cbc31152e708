//! The chaos handlers: business effects that are NOT idempotent by themselves (a doubled event
//! would show as a doubled row), registered next to the project's own (`handlers::registry`) in
//! `chaos-receiver` and `chaos-worker`.
