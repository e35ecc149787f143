// Verifies captured webhook deliveries with the official Standard Webhooks
// library, as a merchant's receiver would: `new Webhook(secret).verify(body,
// headers)` with the secret exactly as agentpay issued it.
//
// stdin: a JSON array of {secret, headers, body_base64}; stdout: a JSON
// array, one {ok: true, event} or {ok: false, error} per case, in order.
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";

const cases = JSON.parse(readFileSync(0, "utf8"));
const results = cases.map(({ secret, headers, body_base64 }) => {
  const body = Buffer.from(body_base64, "base64").toString("utf8");
  try {
    const event = new Webhook(secret).verify(body, headers);
    return { ok: true, event: event.event };
  } catch (err) {
    return { ok: false, error: String(err && err.message) };
  }
});
process.stdout.write(JSON.stringify(results) + "\n");
