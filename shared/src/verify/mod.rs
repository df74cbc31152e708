//! Webhook signature verification: pure functions over the raw body bytes and the headers.
