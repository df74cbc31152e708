#!/usr/bin/env node
// Interop with the providers' own Node.js libraries (installed from npm with `npm ci` by make
// test, pinned in package-lock.json): GitHub's `@octokit/webhooks-methods`, Shopify's
// `@shopify/shopify-api` and Linear's `@linear/sdk` (its webhook verifier only: Linear's library
// does not sign, so `verify` checks deliveries hookledger signed).
//
// Driven by tests/tests/api/interop.rs, with the same protocol as ../interop.py:
//
//   node interop.mjs sign    < spec.json   deliveries signed by the official libraries, JSON on stdout
//   node interop.mjs verify  < deliveries  each delivery verified by the official verifier, JSON
//
// spec.json: {"now": <unix>, "deliveries": [{"name", "library", "secret", "msg_id", "body", "headers"}]}
// deliveries: [{"name", "library", "secret", "headers": {..}, "body"}]
//
// "headers" in a sign spec are the unsigned headers the provider sends beside the signature
// (GitHub's X-GitHub-Delivery and X-GitHub-Event, Shopify's X-Shopify-Topic, ...); they are
// passed through.
//
// Only the libraries' public entry points are used: for GitHub, `sign` and `verify`; for Shopify,
// `shopify.webhooks.validate` (the documented webhook check) and, to sign, the library's own
// HMAC `createSHA256HMAC` from `@shopify/shopify-api/runtime` (the function `validate` computes
// its comparison with), as Shopify's library has no webhook signing helper.

import { webcrypto } from "node:crypto";

// Node 18 (Debian 12's nodejs) has no global Web Crypto; Shopify's library expects one.
globalThis.crypto ??= webcrypto;

const { sign: githubSign, verify: githubVerify } = await import("@octokit/webhooks-methods");
await import("@shopify/shopify-api/adapters/web-api");
const { shopifyApi, ApiVersion, LogSeverity } = await import("@shopify/shopify-api");
const { createSHA256HMAC, HashFormat } = await import("@shopify/shopify-api/runtime");
const { LinearWebhookClient } = await import("@linear/sdk/webhooks");

function shopify(secret) {
  return shopifyApi({
    apiKey: "hookledger-interop",
    apiSecretKey: secret,
    hostName: "localhost",
    apiVersion: ApiVersion.October25,
    isEmbeddedApp: false,
    logger: { level: LogSeverity.Error },
  });
}

async function sign(spec) {
  const out = [];
  for (const d of spec.deliveries) {
    const { library, secret, body } = d;
    const headers = { ...(d.headers ?? {}) };
    if (library === "octokit") {
      headers["X-Hub-Signature-256"] = await githubSign(secret, body);
    } else if (library === "shopify") {
      headers["X-Shopify-Hmac-Sha256"] = await createSHA256HMAC(secret, body, HashFormat.Base64);
    } else {
      throw new Error(`unknown library ${library}`);
    }
    out.push({ name: d.name, headers, body });
  }
  return out;
}

function header(headers, name) {
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return value;
  }
  return undefined;
}

async function verify(deliveries) {
  const out = [];
  for (const d of deliveries) {
    const { library, secret, body, headers } = d;
    let error = null;
    try {
      if (library === "octokit") {
        const signature = header(headers, "x-hub-signature-256");
        if (!(await githubVerify(secret, body, signature))) error = "verify returned false";
      } else if (library === "linear") {
        // As Linear's docs verify: the raw body, `Linear-Signature`, and the body's
        // `webhookTimestamp` (milliseconds, within a minute of the real clock).
        const signature = header(headers, "linear-signature") ?? "";
        const timestamp = JSON.parse(body).webhookTimestamp;
        new LinearWebhookClient(secret).verify(Buffer.from(body, "utf8"), signature, timestamp);
      } else if (library === "shopify") {
        const rawRequest = new Request("https://localhost/webhooks/shopify", {
          method: "POST",
          headers,
          body,
        });
        const result = await shopify(secret).webhooks.validate({ rawBody: body, rawRequest });
        if (!result.valid) error = `validate: ${JSON.stringify(result)}`;
      } else {
        throw new Error(`unknown library ${library}`);
      }
    } catch (e) {
      if (String(e.message).startsWith("unknown library")) throw e;
      error = `${e.name}: ${e.message}`;
    }
    out.push({ name: d.name, accepted: error === null, error });
  }
  return out;
}

async function main() {
  const mode = process.argv[2] ?? "";
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const data = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  let result;
  if (mode === "sign") result = await sign(data);
  else if (mode === "verify") result = await verify(data);
  else throw new Error("usage: node interop.mjs sign|verify < input.json");
  process.stdout.write(JSON.stringify(result));
}

await main();
