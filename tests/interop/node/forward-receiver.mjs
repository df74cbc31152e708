// A service receiving hookledger's `forward` deliveries, verified with the official Standard
// Webhooks library (npm install standardwebhooks). Quoted in the book; run by the tests.
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const webhook = new Webhook(process.env.FORWARD_SECRET); // the target's "secret", whsec_...
const seen = new Set(); // in production: a unique index on the key, with the effect

createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks); // the raw bytes
    const key = req.headers["webhook-id"]; // {source}:{event_id}:{n}, the same on every retry
    try {
      webhook.verify(body, req.headers, { jsonParse: false }); // a body may be a form
    } catch (e) {
      console.log("rejected", key, e.message);
      return res.writeHead(401).end();
    }
    if (!seen.has(key)) {
      seen.add(key);
      console.log("received", key, req.headers["hookledger-event-type"]);
    }
    res.writeHead(204).end(); // any 2xx: delivered; 5xx or 429: hookledger retries
  });
}).listen(Number(process.env.PORT ?? 8000), "127.0.0.1");
