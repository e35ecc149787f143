#!/usr/bin/env node
// agentpay's local Solana devnet: a real SVM (LiteSVM, running the real SPL
// Token and Associated Token Account programs) behind the standard Solana
// JSON-RPC methods.
//
//   node server.js [--port 0] [--slot-ms 400] [--finalized-depth 32] [--skip-every 0] [--fund PUBKEY,PUBKEY]
//
// At start it creates a USDC-like mint (6 decimals) and a dev payer holding SOL
// and 10^15 base units, airdrops 1,000 SOL to each --fund key, prints one JSON
// line {"rpc_url","ws_url","mint","payer_secret","mint_authority_secret"} and serves
// until stdin closes or it gets SIGTERM (or SIGINT, when stdin is a terminal).

import http from "node:http";
import { parseArgs } from "node:util";
import { findAssociatedTokenPda } from "@solana-program/token";
import { Chain, SYSTEM_PROGRAM, TOKEN_PROGRAM, ATA_PROGRAM } from "./chain.js";
import { makeMethods, handle } from "./rpc.js";
import { PubSub } from "./pubsub.js";
import { stringify, parseJSON, toBase58, fromBase58Exact, fromBase58, u32le, u64le, concatBytes } from "./codec.js";
import { generateKeypair } from "./wire.js";

const USDC_DECIMALS = 6;
const PAYER_USDC = 10n ** 15n;
const PAYER_LAMPORTS = 1_000_000n * 1_000_000_000n; // 1,000,000 SOL
const FUND_LAMPORTS = 1_000n * 1_000_000_000n; // 1,000 SOL
const MAX_BODY = 8 * 1024 * 1024;

function fail(msg) {
  process.stderr.write(`solana-rpc: ${msg}\n`);
  process.exit(2);
}

function options() {
  const { values } = parseArgs({
    options: {
      port: { type: "string", default: "0" },
      host: { type: "string", default: "127.0.0.1" },
      "slot-ms": { type: "string", default: "400" },
      "finalized-depth": { type: "string", default: "32" },
      "skip-every": { type: "string", default: "0" },
      fund: { type: "string", default: "" },
      "genesis-hash": { type: "string", default: "" },
    },
    strict: true,
  });
  const int = (name, min) => {
    const v = Number(values[name]);
    if (!Number.isInteger(v) || v < min) fail(`--${name} must be an integer >= ${min}, got ${values[name]}`);
    return v;
  };
  const fund = values.fund
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      try {
        return fromBase58Exact(s, 32);
      } catch {
        return fail(`--fund: invalid public key ${s}`);
      }
    });
  let genesisHash = "";
  if (values["genesis-hash"] !== "") {
    try {
      fromBase58Exact(values["genesis-hash"], 32);
    } catch {
      fail(`--genesis-hash: not 32 bytes in base58: ${values["genesis-hash"]}`);
    }
    genesisHash = values["genesis-hash"];
  }
  return {
    host: values.host,
    genesisHash,
    port: int("port", 0),
    slotMs: int("slot-ms", 1),
    finalizedDepth: int("finalized-depth", 1),
    skipEvery: int("skip-every", 0),
    fund,
  };
}

const sys = fromBase58(SYSTEM_PROGRAM);
const tokenProgram = fromBase58(TOKEN_PROGRAM);
const ataProgram = fromBase58(ATA_PROGRAM);
const meta = (pubkey, isSigner, isWritable) => ({ pubkey, isSigner, isWritable });

/** Creates the mint and the dev payer with its USDC, all by real transactions. */
async function genesis(chain, fund) {
  const mintAuthority = generateKeypair();
  const payer = generateKeypair();
  const mint = generateKeypair();
  chain.airdrop(payer.pubkey, PAYER_LAMPORTS);

  const [ataAddr] = await findAssociatedTokenPda({
    owner: toBase58(payer.pubkey),
    mint: toBase58(mint.pubkey),
    tokenProgram: TOKEN_PROGRAM,
  });
  const ata = fromBase58(ataAddr);
  const mintRent = chain.svm.minimumBalanceForRentExemption(82n);
  chain.execute(
    [
      // System: CreateAccount(mint, rent, 82, token program)
      { programId: sys, keys: [meta(payer.pubkey, true, true), meta(mint.pubkey, true, true)], data: concatBytes(u32le(0), u64le(mintRent), u64le(82n), tokenProgram) },
      // Token: InitializeMint2(decimals, authority, no freeze authority)
      { programId: tokenProgram, keys: [meta(mint.pubkey, false, true)], data: concatBytes(new Uint8Array([20, USDC_DECIMALS]), mintAuthority.pubkey, new Uint8Array([0])) },
      // ATA: CreateIdempotent(payer, ata, owner, mint, system, token)
      {
        programId: ataProgram,
        keys: [meta(payer.pubkey, true, true), meta(ata, false, true), meta(payer.pubkey, false, false), meta(mint.pubkey, false, false), meta(sys, false, false), meta(tokenProgram, false, false)],
        data: new Uint8Array([1]),
      },
      // Token: MintTo(mint, ata, authority, amount)
      { programId: tokenProgram, keys: [meta(mint.pubkey, false, true), meta(ata, false, true), meta(mintAuthority.pubkey, true, false)], data: concatBytes(new Uint8Array([7]), u64le(PAYER_USDC)) },
    ],
    [payer, mint, mintAuthority],
  );
  for (const key of fund) chain.airdrop(key, FUND_LAMPORTS);
  return { mint, payer, mintAuthority };
}

function serve(chain, methods, host, port) {
  const server = http.createServer((req, res) => {
    const reply = (status, body) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(body);
    };
    if (req.method === "GET" && req.url === "/health") {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("ok");
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405, { "Content-Type": "text/plain", Allow: "POST" });
      res.end("Used HTTP Method is not allowed. POST or OPTIONS is required");
      return;
    }
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reply(413, "");
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => {
      if (size > MAX_BODY) return;
      let body;
      try {
        body = parseJSON(Buffer.concat(chunks).toString("utf8"));
      } catch {
        reply(200, stringify({ jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null }));
        return;
      }
      if (Array.isArray(body)) {
        if (body.length === 0) {
          reply(200, stringify({ jsonrpc: "2.0", error: { code: -32600, message: "Invalid request" }, id: null }));
          return;
        }
        reply(200, stringify(body.map((r) => handle(chain, methods, r))));
        return;
      }
      reply(200, stringify(handle(chain, methods, body)));
    });
  });
  // Longer than Go's default idle timeout in solana-go's client (5 minutes),
  // so the client always closes an idle connection first and never sends on
  // one the server is closing.
  server.keepAliveTimeout = 10 * 60_000;
  server.headersTimeout = server.keepAliveTimeout + 1000;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve(server));
  });
}

async function main() {
  const opts = options();
  const chain = new Chain({ slotMs: opts.slotMs, finalizedDepth: opts.finalizedDepth, skipEvery: opts.skipEvery, genesisHash: opts.genesisHash });
  const methods = makeMethods(chain);
  const { mint, payer, mintAuthority } = await genesis(chain, opts.fund);
  chain.fastForward(opts.finalizedDepth);

  const timer = setInterval(() => {
    try {
      chain.tick();
    } catch (e) {
      process.stderr.write(`solana-rpc: slot tick: ${e?.message ?? e}\n`);
    }
  }, opts.slotMs);
  const server = await serve(chain, methods, opts.host, opts.port);
  const pubsub = new PubSub(chain);
  pubsub.attach(server);
  const { port } = server.address();

  let closing = false;
  const shutdown = () => {
    if (closing) return;
    closing = true;
    clearInterval(timer);
    pubsub.wss?.close();
    server.close();
    server.closeAllConnections?.();
    process.exit(0);
  };
  process.on("SIGTERM", shutdown);
  // Run by hand (stdin a terminal), Ctrl-C stops it. Run by a parent (stdin
  // a pipe), a Ctrl-C meant for the parent's process group is ignored: the
  // parent shuts it down in its own order, by closing stdin or SIGTERM.
  process.on("SIGINT", process.stdin.isTTY ? shutdown : () => {});
  // The parent holds our stdin open; when it exits (or crashes) stdin closes
  // and so do we.
  process.stdin.on("end", shutdown);
  process.stdin.on("close", shutdown);
  process.stdin.on("error", shutdown);
  process.stdin.resume();

  process.stdout.write(
    JSON.stringify({
      rpc_url: `http://${opts.host}:${port}`,
      ws_url: `ws://${opts.host}:${port}`,
      mint: toBase58(mint.pubkey),
      payer_secret: toBase58(payer.secret),
      mint_authority_secret: toBase58(mintAuthority.secret),
    }) + "\n",
  );
}

main().catch((e) => {
  process.stderr.write(`solana-rpc: ${e?.message ?? e}\n`);
  process.exit(1);
});
