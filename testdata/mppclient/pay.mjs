// Pays an agentpay checkout session over MPP (the "Payment" HTTP
// authentication scheme) with the mppx client from npm, as an agent
// holding USDC and no gas on an EVM chain would. Run by TestMPPNodeClient
// and BenchmarkMPPNodeRoundTrip (rest/mpp_test.go); prints one JSON line.
//
//   SESSION_URL=...  PAYER_KEY=0x...  TOKEN_NAME="USD Coin"  TOKEN_VERSION=2
//     mppx's fetch GETs the session's address, gets the 402 with its
//     WWW-Authenticate: Payment challenge (method evm, intent charge),
//     signs the EIP-3009 authorization it asks for (nonce: the challenge
//     hash) and retries with Authorization: Payment. Then the same
//     credential is sent once more, as a client retrying after a timeout
//     would, to show it pays once.
//   IDEMPOTENCY_KEY=...: sent as the Idempotency-Key header of every
//     request (mppx keeps a caller's headers on its paid retry), so the
//     payment is the one the key names (TestMPPNodeClientIdempotencyKey).
//   SOLANA_PAYER_KEY=<64-byte key, hex>  SOLANA_RPC_URL=...  (instead of
//     PAYER_KEY): the payer is a Solana wallet holding USDC and no SOL,
//     paying the challenge of method solana (draft-solana-charge-00)
//     with @solana/mpp 0.6.0's charge client: it builds the
//     TransferChecked against SOLANA_RPC_URL (the devnet), sets the
//     treasury (methodDetails.feePayerKey) as fee payer, signs as the
//     transfer's authority only and sends the transaction as the
//     credential (payload.type "transaction"); agentpay co-signs it.
//   CREDENTIAL_ONLY=1: the credential mppx made is printed
//     ({"credential": "Payment ..."}) and never sent: an ACP agent hands
//     it to complete (TestACPCompleteWithMPP).
import { Fetch, evm } from "mppx/client";
import { Receipt } from "mppx";
import { privateKeyToAccount } from "viem/accounts";
import { solana } from "@solana/mpp/client";
import { createKeyPairSignerFromBytes } from "@solana/kit";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};

const solanaSigner = process.env.SOLANA_PAYER_KEY
  ? await createKeyPairSignerFromBytes(Uint8Array.from(Buffer.from(env("SOLANA_PAYER_KEY"), "hex")))
  : null;
const account = solanaSigner ? { address: solanaSigner.address } : privateKeyToAccount(env("PAYER_KEY"));
// The credentials mppx sends, as the wire carries them.
const sent = [];
class Captured extends Error {}
const recording = async (input, init) => {
  const auth = new Headers(init?.headers).get("authorization");
  if (auth) sent.push(auth);
  if (auth && process.env.CREDENTIAL_ONLY === "1") throw new Captured();
  return fetch(input, init);
};
const pay = Fetch.from({
  fetch: recording,
  methods: solanaSigner ? [solana.charge({ signer: solanaSigner, rpcUrl: env("SOLANA_RPC_URL") })] : [
    evm.charge({
      account,
      // The token's EIP-712 domain: the evm request names the contract
      // and chain, not the domain's name and version.
      authorization: { name: env("TOKEN_NAME"), version: env("TOKEN_VERSION") },
      maxAtomicAmount: "1000000000",
    }),
  ],
});

// The caller's headers: the Idempotency-Key when asked for.
const init = process.env.IDEMPOTENCY_KEY ? { headers: { "Idempotency-Key": process.env.IDEMPOTENCY_KEY } } : undefined;

const out = { payer: account.address };
if (process.env.CREDENTIAL_ONLY === "1") {
  try {
    await pay(env("SESSION_URL"), init);
  } catch (e) {
    if (!(e instanceof Captured) && !(e?.cause instanceof Captured)) throw e;
  }
  if (sent.length !== 1) throw new Error(`mppx made ${sent.length} credentials`);
  console.log(JSON.stringify({ payer: account.address, credential: sent[0] }));
  process.exit(0);
}
const res = await pay(env("SESSION_URL"), init);
out.status = res.status;
out.body = await res.json();
const receipt = res.headers.get("payment-receipt");
out.receipt = receipt ? Receipt.deserialize(receipt) : null;
out.credentials = sent.length;
if (sent.length > 0 && process.env.REPLAY !== "0") {
  const again = await fetch(env("SESSION_URL"), { headers: { ...init?.headers, Authorization: sent[sent.length - 1] } });
  out.replay = { status: again.status, body: await again.json() };
  const r = again.headers.get("payment-receipt");
  out.replay.receipt = r ? Receipt.deserialize(r) : null;
}
console.log(JSON.stringify(out));
