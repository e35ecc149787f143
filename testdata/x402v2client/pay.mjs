// Pays agentpay over x402 version 2 with the x402 npm packages
// (@x402/fetch, @x402/evm, @x402/core 2.27.0), as an agent holding USDC
// and no gas on the base test network would. Run by TestX402V2NodeClient
// and BenchmarkX402V2PaidRequest (rest/x402v2_test.go); prints one JSON
// line per payment.
//
//   X402_MODE=session  SESSION_URL=...  PAYER_KEY=0x...  [PAYMENT_ID=...]
//     wrapFetchWithPayment GETs the session's address, reads the 402's
//     PAYMENT-REQUIRED, signs the eip155 requirement and retries with
//     PAYMENT-SIGNATURE; PAYMENT_ID adds the payment-identifier
//     extension's id to the payload.
//   X402_MODE=retry  SESSION_URL=...  PAYER_KEY=0x...  PAYMENT_ID=...
//     an agent that retries: x402HTTPClient signs the requirement twice
//     (two authorizations, two nonces) under one payment-identifier and
//     sends both at once, as a retry after a timeout would.
//   X402_MODE=facilitator  SESSION_URL=...  FACILITATOR_URL=.../x402  SECRET_KEY=sk_test_...  PAYER_KEY=0x...
//     a merchant's own resource server: its requirements are the
//     session's (the 402's PAYMENT-REQUIRED), the payer's payload is made
//     by x402Client, and HTTPFacilitatorClient reads /supported, then
//     verifies and settles at agentpay's facilitator with the merchant's
//     secret key.
//   X402_MODE=bench  SESSION_URLS=url1,url2,...  PAYER_KEY=0x...
//     pays each session in turn and prints each round trip's milliseconds
//     (402, sign, settle, 200).
//
// With SOLANA_PAYER_KEY (the payer's 64-byte key, hex) and SOLANA_RPC_URL
// instead of PAYER_KEY, the payer is a Solana wallet holding USDC and no
// SOL: @x402/svm's ExactSvmScheme (2.27.0) builds the exact transaction
// against SOLANA_RPC_URL (the devnet; x402 names it solana devnet's
// CAIP-2) and signs it, leaving the fee payer's (the treasury's)
// signature to agentpay. The session, retry and facilitator modes are
// the same; retry prints the two transactions it signed.
import { wrapFetchWithPayment, x402Client, x402HTTPClient, decodePaymentResponseHeader } from "@x402/fetch";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { decodePaymentRequiredHeader } from "@x402/core/http";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { privateKeyToAccount } from "viem/accounts";
import { ExactSvmScheme } from "@x402/svm/exact/client";
import { createKeyPairSignerFromBytes, getBase64Encoder, getTransactionDecoder, getCompiledTransactionMessageDecoder } from "@solana/kit";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};

const client = new x402Client();
let svmSigner = null;
if (process.env.SOLANA_PAYER_KEY) {
  svmSigner = await createKeyPairSignerFromBytes(Uint8Array.from(Buffer.from(env("SOLANA_PAYER_KEY"), "hex")));
  client.register("solana:*", new ExactSvmScheme(svmSigner, { rpcUrl: env("SOLANA_RPC_URL") }));
} else {
  registerExactEvmScheme(client, { signer: privateKeyToAccount(env("PAYER_KEY")) });
}

// svmParts reads an exact Solana payload's transaction: its blockhash and
// memo, so a test sees that a retry signed a new transaction.
function svmParts(payload) {
  const tx = getTransactionDecoder().decode(getBase64Encoder().encode(payload.payload.transaction));
  const msg = getCompiledTransactionMessageDecoder().decode(tx.messageBytes);
  const memo = msg.instructions.at(-1);
  return { blockhash: msg.lifetimeToken, memo: Buffer.from(memo.data ?? []).toString("utf8"), transaction: payload.payload.transaction };
}
// The devnet's USDC is no asset the client knows by address: let it pay
// any asset, as an agent configured for agentpay's networks would.
client.setSpendControls(false);
if (process.env.PAYMENT_ID) {
  client.registerExtension({
    key: "payment-identifier",
    enrichPaymentPayload: async (payload) => ({
      ...payload,
      extensions: {
        ...payload.extensions,
        "payment-identifier": { info: { required: false, id: process.env.PAYMENT_ID } },
      },
    }),
  });
}
const http = new x402HTTPClient(client);
const headers = { Accept: "application/json" };

// seen records what the server answered at each step.
const seen = [];
const recording = async (input, init) => {
  const res = await fetch(input, init);
  seen.push({ status: res.status, paymentRequired: res.headers.get("payment-required") });
  return res;
};

async function answer(res) {
  const out = { status: res.status, body: await res.json() };
  const header = res.headers.get("payment-response");
  out.paymentResponse = header ? decodePaymentResponseHeader(header) : null;
  return out;
}

const mode = env("X402_MODE");
if (mode === "session") {
  const pay = wrapFetchWithPayment(recording, client);
  const out = await answer(await pay(env("SESSION_URL"), { headers }));
  out.challengeStatus = seen[0].status;
  out.challenge = seen[0].paymentRequired ? decodePaymentRequiredHeader(seen[0].paymentRequired) : null;
  console.log(JSON.stringify(out));
} else if (mode === "retry") {
  const url = env("SESSION_URL");
  const challenge = await fetch(url, { headers });
  const required = http.getPaymentRequiredResponse((n) => challenge.headers.get(n));
  const first = await client.createPaymentPayload(required);
  const retry = await client.createPaymentPayload(required);
  const send = async (payload) =>
    answer(await fetch(url, { headers: { ...headers, ...http.encodePaymentSignatureHeader(payload) } }));
  const [a, b] = await Promise.all([send(first), new Promise((r) => setTimeout(r, 50)).then(() => send(retry))]);
  // And once more after both are answered.
  const again = await send(retry);
  console.log(JSON.stringify({
    nonces: svmSigner
      ? [svmParts(first).transaction, svmParts(retry).transaction]
      : [first.payload.authorization.nonce, retry.payload.authorization.nonce],
    ids: [first.extensions?.["payment-identifier"]?.info?.id, retry.extensions?.["payment-identifier"]?.info?.id],
    first: a, retry: b, again,
  }));
} else if (mode === "facilitator") {
  const challenge = await fetch(env("SESSION_URL"), { headers });
  const required = http.getPaymentRequiredResponse((n) => challenge.headers.get(n));
  const payload = await client.createPaymentPayload(required);
  const auth = { "X-Checkout-Secret-Key": env("SECRET_KEY") };
  const facilitator = new HTTPFacilitatorClient({
    url: env("FACILITATOR_URL"),
    createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
  });
  const out = { challengeStatus: challenge.status };
  out.supported = await facilitator.getSupported();
  out.verify = await facilitator.verify(payload, payload.accepted);
  out.settle = await facilitator.settle(payload, payload.accepted);
  out.settleAgain = await facilitator.settle(payload, payload.accepted);
  console.log(JSON.stringify(out));
} else if (mode === "bench") {
  const pay = wrapFetchWithPayment(fetch, client);
  const ms = [];
  for (const url of env("SESSION_URLS").split(",")) {
    const start = performance.now();
    const res = await pay(url, { headers });
    await res.json();
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    ms.push(performance.now() - start);
  }
  console.log(JSON.stringify({ ms }));
} else {
  throw new Error(`unknown X402_MODE ${mode}`);
}
