// Pays agentpay over x402 with the x402 npm packages, as an agent holding
// USDC (and no gas) on the base test network would. Run by
// TestX402NodeClient (rest/x402_node_test.go); prints one JSON line.
//
//   X402_MODE=session  SESSION_URL=...             PAYER_KEY=0x...
//     x402-fetch's wrapFetchWithPayment GETs the session's address, gets
//     the 402, signs the requirement and retries with X-PAYMENT.
//   X402_MODE=facilitator  SESSION_URL=... FACILITATOR_URL=.../x402 SECRET_KEY=sk_test_...  PAYER_KEY=0x...
//     a merchant's own resource server: the requirements it hands out are
//     the session's (GET SESSION_URL), the payer's header is made by
//     x402/client, and x402/verify's useFacilitator verifies and settles
//     it at agentpay's facilitator with the merchant's secret key.
import { wrapFetchWithPayment, createSigner, decodeXPaymentResponse } from "x402-fetch";
import { createPaymentHeader, selectPaymentRequirements } from "x402/client";
import { decodePayment } from "x402/schemes";
import { useFacilitator } from "x402/verify";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};

const signer = await createSigner("base-sepolia", env("PAYER_KEY"));
const out = {};

if (env("X402_MODE") === "session") {
  const pay = wrapFetchWithPayment(fetch, signer, BigInt(1_000_000_000));
  const res = await pay(env("SESSION_URL"), { headers: { Accept: "application/json" } });
  out.status = res.status;
  out.body = await res.json();
  const header = res.headers.get("x-payment-response");
  out.paymentResponse = header ? decodeXPaymentResponse(header) : null;
} else {
  const challenge = await fetch(env("SESSION_URL"), { headers: { Accept: "application/json" } });
  out.challengeStatus = challenge.status;
  const { x402Version, accepts } = await challenge.json();
  const requirements = selectPaymentRequirements(accepts, "base-sepolia", "exact");
  const header = await createPaymentHeader(signer, x402Version, requirements);
  const payload = decodePayment(header);
  const auth = { "X-Checkout-Secret-Key": env("SECRET_KEY") };
  const facilitator = useFacilitator({
    url: env("FACILITATOR_URL"),
    createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
  });
  out.verify = await facilitator.verify(payload, requirements);
  out.settle = await facilitator.settle(payload, requirements);
  out.settleAgain = await facilitator.settle(payload, requirements);
}
console.log(JSON.stringify(out));
