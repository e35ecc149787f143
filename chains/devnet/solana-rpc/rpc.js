// The standard Solana JSON-RPC methods, answered from a Chain in the real
// node's shapes.

import { toBase58, fromBase58, fromBase58Exact, toBase64, fromBase64, toU64, bigValue, zstdStored, uiTokenAmount } from "./codec.js";
import { parseMessage, isSigner, isWritable, PACKET_DATA_SIZE, DecodeError, SanitizeError } from "./wire.js";
import {
  RpcError, invalidParams, INVALID_PARAMS, METHOD_NOT_FOUND, SIGNATURE_VERIFICATION_FAILURE,
  UNSUPPORTED_TRANSACTION_VERSION, MIN_CONTEXT_SLOT_NOT_REACHED,
} from "./errors.js";
import { normaliseCommitment, encodeReturnData, BLOCKHASH_VALIDITY, STATUS_CACHE_SLOTS, TOKEN_PROGRAM, TOKEN_2022_PROGRAM } from "./chain.js";
import { verifySignatures } from "./wire.js";
import { parsedInstruction } from "./parsed.js";

export const API_VERSION = "2.2.20";
const FEATURE_SET = 3294202862;
const MAX_MULTIPLE_ACCOUNTS = 100;
const MAX_SIGNATURE_STATUSES = 256;
const MAX_SIGNATURES_LIMIT = 1000;
const MAX_BASE58_TX = 1683;
const MAX_BASE64_TX = 1644;

// ---- parameter helpers ----------------------------------------------------

function pubkeyParam(v) {
  try {
    return fromBase58Exact(v, 32);
  } catch (e) {
    throw invalidParams(`Invalid param: ${e.message === "WrongSize" ? "WrongSize" : "Invalid"}`);
  }
}

function signatureParam(v) {
  try {
    return toBase58(fromBase58Exact(v, 64));
  } catch {
    throw invalidParams("Invalid param: Invalid");
  }
}

function configParam(params, i) {
  const c = params[i];
  if (c === undefined || c === null) return {};
  if (typeof c !== "object" || Array.isArray(c)) throw invalidParams("Invalid params: invalid type: expected struct config");
  return c;
}

function usize(v, name) {
  try {
    const n = toU64(v);
    if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error("too large");
    return Number(n);
  } catch (e) {
    throw invalidParams(`Invalid params: ${name}: ${e.message}`);
  }
}

function context(chain, slot) {
  return { apiVersion: API_VERSION, slot };
}

/** Commitment slot honouring minContextSlot. */
function contextSlot(chain, cfg, dflt = "finalized") {
  const commitment = normaliseCommitment(cfg.commitment, dflt);
  const slot = chain.commitmentSlot(commitment);
  if (cfg.minContextSlot !== undefined && cfg.minContextSlot !== null) {
    const min = usize(cfg.minContextSlot, "minContextSlot");
    if (slot < min) throw new RpcError(MIN_CONTEXT_SLOT_NOT_REACHED, "Minimum context slot has not been reached", { contextSlot: slot });
  }
  return { commitment, slot };
}

// ---- account encoding -----------------------------------------------------

const ENCODINGS = new Set(["binary", "base58", "base64", "base64+zstd", "jsonParsed"]);

function encodingParam(cfg, dflt = "binary") {
  const e = cfg.encoding ?? dflt;
  if (!ENCODINGS.has(e)) {
    throw invalidParams(`Invalid params: unknown variant \`${e}\`, expected one of \`binary\`, \`base58\`, \`base64\`, \`jsonParsed\`, \`base64+zstd\`.`);
  }
  return e;
}

function slice(data, ds) {
  if (!ds) return data;
  const off = usize(ds.offset ?? 0, "offset");
  const len = usize(ds.length ?? 0, "length");
  return data.subarray(Math.min(off, data.length), Math.min(off + len, data.length));
}

function binaryData(data, encoding) {
  switch (encoding) {
    case "binary":
      return toBase58(data);
    case "base58":
      return [toBase58(data), "base58"];
    case "base64+zstd":
      return [toBase64(zstdStored(data)), "base64+zstd"];
    default:
      return [toBase64(data), "base64"];
  }
}

function parsedAccountData(chain, acct) {
  const owner = toBase58(acct.owner());
  const data = acct.data();
  const program = owner === TOKEN_PROGRAM ? "spl-token" : owner === TOKEN_2022_PROGRAM ? "spl-token-2022" : null;
  if (!program) return null;
  const ta = chain.tokenAccount(acct);
  if (ta) {
    const info = {
      isNative: ta.isNative !== null,
      mint: ta.mint,
      owner: ta.owner,
      state: ta.state === 2 ? "frozen" : "initialized",
      tokenAmount: uiTokenAmount(ta.amount, ta.decimals),
    };
    if (ta.delegate) {
      info.delegate = ta.delegate;
      info.delegatedAmount = uiTokenAmount(ta.delegatedAmount, ta.decimals);
    }
    if (ta.isNative !== null) info.rentExemptReserve = uiTokenAmount(ta.isNative, ta.decimals);
    if (ta.closeAuthority) info.closeAuthority = ta.closeAuthority;
    return { program, parsed: { info, type: "account" }, space: BigInt(data.length) };
  }
  const mi = chain.mintInfo(acct);
  if (mi) {
    return {
      program,
      parsed: {
        info: {
          decimals: mi.decimals,
          freezeAuthority: mi.freezeAuthority,
          isInitialized: mi.isInitialized,
          mintAuthority: mi.mintAuthority,
          supply: mi.supply.toString(),
        },
        type: "mint",
      },
      space: BigInt(data.length),
    };
  }
  return null;
}

/** A UiAccount: {data, executable, lamports, owner, rentEpoch, space}. */
export function encodeAccount(chain, acct, encoding, dataSlice) {
  const data = acct.data();
  let out;
  if (encoding === "jsonParsed") {
    out = parsedAccountData(chain, acct) ?? binaryData(data, "base64");
  } else {
    if (encoding === "binary" || encoding === "base58") {
      if (slice(data, dataSlice).length > 128) {
        throw new RpcError(-32600, "Encoded binary (base 58) data should be less than 128 bytes, please use Base64 encoding.");
      }
    }
    out = binaryData(slice(data, dataSlice), encoding);
  }
  return {
    data: out,
    executable: acct.executable(),
    lamports: acct.lamports(),
    owner: toBase58(acct.owner()),
    rentEpoch: acct.rentEpoch(),
    space: BigInt(data.length),
  };
}

// ---- transaction encoding -------------------------------------------------

function encodeInstruction(ix) {
  return { programIdIndex: ix.programIdIndex, accounts: ix.accounts, data: toBase58(ix.data), stackHeight: ix.stackHeight ?? null };
}

function encodeTransactionJSON(tx) {
  const m = tx.message;
  const message = {
    accountKeys: m.accountKeys.map(toBase58),
    header: m.header,
    recentBlockhash: toBase58(m.recentBlockhash),
    instructions: m.instructions.map((ix) => encodeInstruction(ix)),
  };
  if (m.version !== "legacy") {
    message.addressTableLookups = m.addressTableLookups.map((l) => ({
      accountKey: toBase58(l.accountKey),
      writableIndexes: l.writableIndexes,
      readonlyIndexes: l.readonlyIndexes,
    }));
  }
  return { signatures: tx.signatures.map(toBase58), message };
}

function encodeTransactionParsed(tx) {
  const m = tx.message;
  const keys = m.accountKeys.map(toBase58);
  const message = {
    accountKeys: keys.map((k, i) => ({ pubkey: k, signer: isSigner(m, i), source: "transaction", writable: isWritable(m, i) })),
    instructions: m.instructions.map((ix) => parsedInstruction(keys, ix, null)),
    recentBlockhash: toBase58(m.recentBlockhash),
  };
  if (m.version !== "legacy") {
    message.addressTableLookups = m.addressTableLookups.map((l) => ({
      accountKey: toBase58(l.accountKey),
      writableIndexes: l.writableIndexes,
      readonlyIndexes: l.readonlyIndexes,
    }));
  }
  return { signatures: tx.signatures.map(toBase58), message };
}

function encodeTransaction(tx, encoding) {
  switch (encoding) {
    case "json":
      return encodeTransactionJSON(tx);
    case "jsonParsed":
      return encodeTransactionParsed(tx);
    case "base58":
      return [toBase58(tx.bytes), "base58"];
    case "base64":
      return [toBase64(tx.bytes), "base64"];
    case "binary":
      return toBase58(tx.bytes);
    default:
      throw invalidParams(`Invalid params: unknown variant \`${encoding}\`, expected one of \`binary\`, \`base64\`, \`base58\`, \`json\`, \`jsonParsed\`.`);
  }
}

function encodeMeta(rec, encoding) {
  const keys = rec.tx.message.accountKeys.map(toBase58);
  const inner = rec.innerInstructions.map((g) => ({
    index: g.index,
    instructions: g.instructions.map((ix) =>
      encoding === "jsonParsed"
        ? parsedInstruction(keys, ix, ix.stackHeight)
        : encodeInstruction(ix)),
  }));
  const meta = {
    err: rec.err,
    status: rec.err === null ? { Ok: null } : { Err: rec.err },
    fee: rec.fee,
    preBalances: rec.preBalances,
    postBalances: rec.postBalances,
    innerInstructions: inner,
    logMessages: rec.logs,
    preTokenBalances: rec.preTokenBalances,
    postTokenBalances: rec.postTokenBalances,
    rewards: [],
  };
  if (encoding !== "jsonParsed") meta.loadedAddresses = { writable: [], readonly: [] };
  if (rec.returnData) meta.returnData = encodeReturnData(rec.returnData);
  meta.computeUnitsConsumed = rec.unitsConsumed;
  return meta;
}

function decodeWireTransaction(encoded, encoding) {
  if (typeof encoded !== "string") throw invalidParams("Invalid params: invalid type: expected a string");
  let bytes;
  if (encoding === "base58") {
    if (encoded.length > MAX_BASE58_TX) {
      throw invalidParams(`base58 encoded solana_sdk::transaction::versioned::VersionedTransaction too large: ${encoded.length} bytes (max: encoded/raw ${MAX_BASE58_TX}/${PACKET_DATA_SIZE})`);
    }
    try {
      bytes = fromBase58(encoded);
    } catch (e) {
      throw invalidParams(`invalid base58 encoding: ${e.message}`);
    }
  } else if (encoding === "base64") {
    if (encoded.length > MAX_BASE64_TX) {
      throw invalidParams(`base64 encoded solana_sdk::transaction::versioned::VersionedTransaction too large: ${encoded.length} bytes (max: encoded/raw ${MAX_BASE64_TX}/${PACKET_DATA_SIZE})`);
    }
    try {
      bytes = fromBase64(encoded);
    } catch (e) {
      throw invalidParams(`invalid base64 encoding: ${e.message}`);
    }
  } else {
    throw invalidParams(`Invalid params: unknown variant \`${encoding}\`, expected one of \`base58\`, \`base64\`.`);
  }
  if (bytes.length > PACKET_DATA_SIZE) {
    throw invalidParams(`decoded solana_sdk::transaction::versioned::VersionedTransaction too large: ${bytes.length} bytes (max: ${PACKET_DATA_SIZE} bytes)`);
  }
  return bytes;
}

function statusOf(chain, rec) {
  const status = chain.statusOf(rec);
  return {
    slot: rec.slot,
    confirmations: status === "finalized" ? null : chain.slot - rec.slot,
    err: rec.err,
    status: rec.err === null ? { Ok: null } : { Err: rec.err },
    confirmationStatus: status,
  };
}

function atLeastConfirmed(cfg) {
  const c = normaliseCommitment(cfg.commitment);
  if (c === "processed") throw invalidParams("Method does not support commitment below `confirmed`");
  return c;
}

// ---- methods --------------------------------------------------------------

export function makeMethods(chain) {
  const m = {
    getHealth: () => "ok",
    getVersion: () => ({ "feature-set": FEATURE_SET, "solana-core": API_VERSION }),
    getGenesisHash: () => chain.genesisHash,
    getIdentity: () => ({ identity: toBase58(chain.faucet.pubkey) }),
    getFirstAvailableBlock: () => chain.baseSlot,
    minimumLedgerSlot: () => chain.baseSlot,
    getTransactionCount: (p) => {
      contextSlot(chain, configParam(p, 0));
      return chain.transactionCount;
    },

    getSlot: (p) => contextSlot(chain, configParam(p, 0)).slot,

    getBlockHeight: (p) => Math.max(0, chain.blockHeight(contextSlot(chain, configParam(p, 0)).slot)),

    getEpochInfo: (p) => {
      const { slot } = contextSlot(chain, configParam(p, 0));
      const slotsInEpoch = 432000;
      return {
        absoluteSlot: slot,
        blockHeight: Math.max(0, chain.blockHeight(slot)),
        epoch: Math.floor(slot / slotsInEpoch),
        slotIndex: slot % slotsInEpoch,
        slotsInEpoch,
        transactionCount: chain.transactionCount,
      };
    },

    getBlockTime: (p) => {
      const slot = usize(p[0], "slot");
      if (slot < chain.baseSlot || slot > chain.slot) throw new RpcError(-32004, `Block not available for slot ${slot}`);
      return chain.blockTime(slot);
    },

    getLatestBlockhash: (p) => {
      const cfg = configParam(p, 0);
      const { commitment } = contextSlot(chain, cfg);
      const bh = chain.blockhashAt(commitment);
      return { context: context(chain, bh.slot), value: { blockhash: bh.blockhash, lastValidBlockHeight: bh.lastValidBlockHeight } };
    },

    isBlockhashValid: (p) => {
      const cfg = configParam(p, 1);
      const { slot } = contextSlot(chain, cfg);
      if (typeof p[0] !== "string") throw invalidParams("Invalid params: invalid type: expected a string");
      return { context: context(chain, slot), value: chain.blockhashValid(p[0]) };
    },

    getFeeForMessage: (p) => {
      const cfg = configParam(p, 1);
      const { slot } = contextSlot(chain, cfg);
      let msg;
      try {
        msg = parseMessage(fromBase64(p[0]));
      } catch (e) {
        if (e instanceof DecodeError || e instanceof SanitizeError) throw invalidParams(`invalid message: ${e.message}`);
        throw invalidParams(`invalid base64 encoding: ${e.message}`);
      }
      const valid = chain.blockhashValid(toBase58(msg.recentBlockhash));
      return { context: context(chain, slot), value: valid ? chain.feeFor(msg) : null };
    },

    getMinimumBalanceForRentExemption: (p) => {
      const size = usize(p[0] ?? 0, "data length");
      return chain.svm.minimumBalanceForRentExemption(BigInt(size));
    },

    getRecentPrioritizationFees: () => {
      const out = [];
      for (let s = Math.max(chain.baseSlot, chain.slot - 149); s <= chain.slot; s++) out.push({ slot: s, prioritizationFee: 0 });
      return out;
    },

    getBalance: (p) => {
      const key = pubkeyParam(p[0]);
      const { slot } = contextSlot(chain, configParam(p, 1));
      return { context: context(chain, slot), value: chain.lamports(key) };
    },

    getAccountInfo: (p) => {
      const key = pubkeyParam(p[0]);
      const cfg = configParam(p, 1);
      const { slot } = contextSlot(chain, cfg);
      const enc = encodingParam(cfg);
      const acct = chain.account(key);
      return { context: context(chain, slot), value: acct ? encodeAccount(chain, acct, enc, cfg.dataSlice) : null };
    },

    getMultipleAccounts: (p) => {
      if (!Array.isArray(p[0])) throw invalidParams("Invalid params: invalid type: expected a sequence");
      if (p[0].length > MAX_MULTIPLE_ACCOUNTS) throw invalidParams(`Too many inputs provided; max ${MAX_MULTIPLE_ACCOUNTS}`);
      const keys = p[0].map(pubkeyParam);
      const cfg = configParam(p, 1);
      const { slot } = contextSlot(chain, cfg);
      const enc = encodingParam(cfg);
      return {
        context: context(chain, slot),
        value: keys.map((k) => {
          const a = chain.account(k);
          return a ? encodeAccount(chain, a, enc, cfg.dataSlice) : null;
        }),
      };
    },

    getProgramAccounts: (p) => {
      const program = pubkeyParam(p[0]);
      const cfg = configParam(p, 1);
      const { slot } = contextSlot(chain, cfg);
      const enc = encodingParam(cfg);
      const filters = cfg.filters ?? [];
      const out = [];
      for (const { address, account } of chain.svm.getProgramAccounts(program).map((x) => ({ address: x.address, account: x.account() }))) {
        const data = account.data();
        let ok = true;
        for (const f of filters) {
          if (f.dataSize !== undefined && data.length !== Number(f.dataSize)) ok = false;
          if (f.memcmp) {
            const bytes = f.memcmp.encoding === "base64" ? fromBase64(f.memcmp.bytes) : fromBase58(f.memcmp.bytes);
            const off = Number(f.memcmp.offset);
            if (off + bytes.length > data.length || !bytes.every((b, i) => data[off + i] === b)) ok = false;
          }
        }
        if (ok) out.push({ account: encodeAccount(chain, account, enc, cfg.dataSlice), pubkey: toBase58(address) });
      }
      return cfg.withContext ? { context: context(chain, slot), value: out } : out;
    },

    getTokenAccountsByOwner: (p) => {
      const owner = toBase58(pubkeyParam(p[0]));
      const filter = p[1];
      if (!filter || typeof filter !== "object") throw invalidParams("Invalid params: expected a mint or programId filter");
      const cfg = configParam(p, 2);
      const { slot } = contextSlot(chain, cfg);
      const enc = encodingParam(cfg);
      let mint = null;
      let programId = null;
      if (filter.mint != null) {
        mint = toBase58(pubkeyParam(filter.mint));
        const ma = chain.account(fromBase58(mint));
        if (!ma || !chain.mintInfo(ma)) throw invalidParams("Invalid param: could not find mint");
      } else if (filter.programId != null) {
        programId = toBase58(pubkeyParam(filter.programId));
        if (programId !== TOKEN_PROGRAM && programId !== TOKEN_2022_PROGRAM) throw invalidParams("Invalid param: unrecognized Token program id");
      } else {
        throw invalidParams("Invalid params: expected a mint or programId filter");
      }
      const value = [];
      for (const addr of chain.tokenAccountsByOwner(owner)) {
        const acct = chain.account(fromBase58(addr));
        const ta = chain.tokenAccount(acct);
        if (!ta) continue;
        if (mint && ta.mint !== mint) continue;
        if (programId && ta.programId !== programId) continue;
        value.push({ account: encodeAccount(chain, acct, enc, cfg.dataSlice), pubkey: addr });
      }
      return { context: context(chain, slot), value };
    },

    getTokenAccountBalance: (p) => {
      const key = pubkeyParam(p[0]);
      const { slot } = contextSlot(chain, configParam(p, 1));
      const ta = chain.tokenAccount(chain.account(key));
      if (!ta) throw invalidParams("Invalid param: could not find account");
      return { context: context(chain, slot), value: uiTokenAmount(ta.amount, ta.decimals) };
    },

    getTokenSupply: (p) => {
      const key = pubkeyParam(p[0]);
      const { slot } = contextSlot(chain, configParam(p, 1));
      const mi = chain.mintInfo(chain.account(key));
      if (!mi) throw invalidParams("Invalid param: could not find mint");
      return { context: context(chain, slot), value: uiTokenAmount(mi.supply, mi.decimals) };
    },

    requestAirdrop: (p) => {
      const key = pubkeyParam(p[0]);
      let lamports;
      try {
        lamports = toU64(p[1]);
      } catch (e) {
        throw invalidParams(`Invalid params: ${e.message}`);
      }
      try {
        return chain.airdrop(key, lamports);
      } catch (e) {
        if (e instanceof RpcError) throw new RpcError(-32600, `airdrop request failed: ${e.message}`);
        throw e;
      }
    },

    sendTransaction: (p) => {
      const cfg = configParam(p, 1);
      const bytes = decodeWireTransaction(p[0], cfg.encoding ?? "base58");
      if (!cfg.skipPreflight) contextSlot(chain, { commitment: cfg.preflightCommitment, minContextSlot: cfg.minContextSlot });
      return chain.send(bytes, { skipPreflight: !!cfg.skipPreflight });
    },

    simulateTransaction: (p) => {
      const cfg = configParam(p, 1);
      const { slot } = contextSlot(chain, cfg);
      const bytes = decodeWireTransaction(p[0], cfg.encoding ?? "base58");
      if (cfg.sigVerify && cfg.replaceRecentBlockhash) throw invalidParams("sigVerify may not be used with replaceRecentBlockhash");
      let tx = chain.decode(bytes);
      if (cfg.sigVerify && !verifySignatures(tx)) throw new RpcError(SIGNATURE_VERIFICATION_FAILURE, "Transaction signature verification failure");
      let replacementBlockhash = null;
      if (cfg.replaceRecentBlockhash) {
        const bh = chain.blockhashAt("processed");
        const copy = new Uint8Array(tx.bytes);
        copy.set(fromBase58(bh.blockhash), tx.message.recentBlockhash.byteOffset - tx.bytes.byteOffset);
        tx = chain.decode(copy);
        replacementBlockhash = { blockhash: bh.blockhash, lastValidBlockHeight: bh.lastValidBlockHeight };
      }
      const sim = chain.simulate(tx);
      let accounts = null;
      if (cfg.accounts && Array.isArray(cfg.accounts.addresses)) {
        const enc = encodingParam(cfg.accounts, "base64");
        if (enc === "binary" || enc === "base58") throw invalidParams("Invalid params: base58 encoding not supported");
        accounts = cfg.accounts.addresses.map((a) => {
          const key = pubkeyParam(a);
          const post = sim.postAccounts.find((x) => Buffer.compare(Buffer.from(x.address), Buffer.from(key)) === 0);
          const acct = post ? post.account() : chain.account(key);
          return acct ? encodeAccount(chain, acct, enc) : null;
        });
      }
      let innerInstructions = null;
      if (cfg.innerInstructions) innerInstructions = sim.innerInstructions.map((g) => ({ index: g.index, instructions: g.instructions.map(encodeInstruction) }));
      return {
        context: context(chain, slot),
        value: {
          accounts,
          err: sim.err,
          innerInstructions,
          logs: sim.logs,
          replacementBlockhash,
          returnData: encodeReturnData(sim.returnData),
          unitsConsumed: sim.unitsConsumed,
        },
      };
    },

    getSignatureStatuses: (p) => {
      if (!Array.isArray(p[0])) throw invalidParams("Invalid params: invalid type: expected a sequence");
      if (p[0].length > MAX_SIGNATURE_STATUSES) throw invalidParams(`Too many inputs provided; max ${MAX_SIGNATURE_STATUSES}`);
      const sigs = p[0].map(signatureParam);
      const cfg = configParam(p, 1);
      const search = !!cfg.searchTransactionHistory;
      return {
        context: context(chain, chain.slot),
        value: sigs.map((s) => {
          const rec = chain.txs.get(s);
          if (!rec) return null;
          // Without searchTransactionHistory a node answers from its status
          // cache only, which holds the last STATUS_CACHE_SLOTS slots.
          if (!search && chain.slot - rec.slot > STATUS_CACHE_SLOTS) return null;
          return statusOf(chain, rec);
        }),
      };
    },

    getTransaction: (p) => {
      const sig = signatureParam(p[0]);
      let cfg = p[1];
      if (typeof cfg === "string") cfg = { encoding: cfg };
      cfg = cfg ?? {};
      const commitment = atLeastConfirmed(cfg);
      const encoding = cfg.encoding ?? "json";
      const rec = chain.txs.get(sig);
      if (!rec || rec.slot > chain.commitmentSlot(commitment)) return null;
      const version = rec.tx.message.version;
      if (version !== "legacy") {
        const max = cfg.maxSupportedTransactionVersion;
        if (max === undefined || max === null || Number(max) < version) {
          throw new RpcError(
            UNSUPPORTED_TRANSACTION_VERSION,
            `Transaction version (${version}) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": ${version}`,
          );
        }
      }
      const out = {
        blockTime: chain.blockTime(rec.slot),
        meta: encodeMeta(rec, encoding),
        slot: rec.slot,
        transaction: encodeTransaction(rec.tx, encoding),
      };
      if (cfg.maxSupportedTransactionVersion !== undefined && cfg.maxSupportedTransactionVersion !== null) out.version = version;
      return out;
    },

    getBlock: (p) => {
      const slot = usize(p[0], "slot");
      let cfg = p[1];
      if (typeof cfg === "string") cfg = { encoding: cfg };
      cfg = cfg ?? {};
      const commitment = atLeastConfirmed(cfg);
      const encoding = cfg.encoding ?? "json";
      const details = cfg.transactionDetails ?? "full";
      if (!["full", "signatures", "none", "accounts"].includes(details)) {
        throw invalidParams(`Invalid params: unknown variant \`${details}\`, expected one of \`full\`, \`signatures\`, \`none\`, \`accounts\`.`);
      }
      if (slot < chain.baseSlot) {
        throw new RpcError(-32001, `Block ${slot} cleaned up, does not exist on node. First available block: ${chain.baseSlot}`);
      }
      if (slot > chain.commitmentSlot(commitment)) throw new RpcError(-32004, `Block not available for slot ${slot}`);
      const blockhash = chain.blockhashOfSlot(slot);
      if (blockhash === undefined) throw new RpcError(-32007, `Slot ${slot} was skipped, or missing due to ledger jump to recent snapshot`);
      let prev = slot - 1;
      while (prev >= chain.baseSlot && chain.blockhashOfSlot(prev) === undefined) prev--;
      const recs = chain.bySlot.get(slot) ?? [];
      const out = {
        blockHeight: chain.blockHeight(slot),
        blockTime: chain.blockTime(slot),
        blockhash,
        parentSlot: prev,
        previousBlockhash: chain.blockhashOfSlot(prev) ?? "11111111111111111111111111111111",
      };
      if (cfg.rewards !== false) out.rewards = [];
      const withVersion = cfg.maxSupportedTransactionVersion !== undefined && cfg.maxSupportedTransactionVersion !== null;
      if (details === "full" || details === "accounts") {
        out.transactions = recs.map((rec) => {
          const version = rec.tx.message.version;
          if (version !== "legacy" && (!withVersion || Number(cfg.maxSupportedTransactionVersion) < version)) {
            throw new RpcError(
              UNSUPPORTED_TRANSACTION_VERSION,
              `Transaction version (${version}) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": ${version}`,
            );
          }
          let t;
          if (details === "accounts") {
            const parsed = encodeTransactionParsed(rec.tx);
            const meta = encodeMeta(rec, "jsonParsed");
            delete meta.innerInstructions;
            delete meta.logMessages;
            t = { meta, transaction: { accountKeys: parsed.message.accountKeys, signatures: parsed.signatures } };
          } else {
            t = { meta: encodeMeta(rec, encoding), transaction: encodeTransaction(rec.tx, encoding) };
          }
          if (withVersion) t.version = version;
          return t;
        });
      } else if (details === "signatures") {
        out.signatures = recs.map((r) => r.signature);
      }
      return out;
    },

    getBlocks: (p) => {
      const start = usize(p[0], "start_slot");
      let end;
      let cfg = {};
      if (p[1] !== undefined && p[1] !== null && typeof p[1] === "object") cfg = p[1];
      else {
        if (p[1] !== undefined && p[1] !== null) end = usize(p[1], "end_slot");
        cfg = configParam(p, 2);
      }
      const top = chain.commitmentSlot(atLeastConfirmed(cfg));
      end = Math.min(end ?? top, top);
      if (end - start > 500_000) throw invalidParams("Slot range too large; max 500000");
      const out = [];
      for (let s = Math.max(start, chain.baseSlot); s <= end; s++) if (chain.blockhashOfSlot(s) !== undefined) out.push(s);
      return out;
    },

    getBlocksWithLimit: (p) => {
      const start = usize(p[0], "start_slot");
      const limit = usize(p[1], "limit");
      if (limit > 500_000) throw invalidParams("Limit too large; max 500000");
      const top = chain.commitmentSlot(atLeastConfirmed(configParam(p, 2)));
      const out = [];
      for (let s = Math.max(start, chain.baseSlot); s <= top && out.length < limit; s++) if (chain.blockhashOfSlot(s) !== undefined) out.push(s);
      return out;
    },

    getSignaturesForAddress: (p) => {
      const addr = toBase58(pubkeyParam(p[0]));
      const cfg = configParam(p, 1);
      const commitment = atLeastConfirmed(cfg);
      const maxSlot = chain.commitmentSlot(commitment);
      if (cfg.minContextSlot !== undefined && cfg.minContextSlot !== null && maxSlot < usize(cfg.minContextSlot, "minContextSlot")) {
        throw new RpcError(MIN_CONTEXT_SLOT_NOT_REACHED, "Minimum context slot has not been reached", { contextSlot: maxSlot });
      }
      const limit = cfg.limit === undefined || cfg.limit === null ? MAX_SIGNATURES_LIMIT : usize(cfg.limit, "limit");
      if (limit === 0 || limit > MAX_SIGNATURES_LIMIT) throw invalidParams(`Invalid limit; max ${MAX_SIGNATURES_LIMIT}`);
      const before = cfg.before ? chain.txs.get(signatureParam(cfg.before)) : undefined;
      const until = cfg.until ? chain.txs.get(signatureParam(cfg.until)) : undefined;
      const list = chain.byAddress.get(addr) ?? [];
      // The list is in execution order: start below `before` by binary search.
      let start = list.length - 1;
      if (before) {
        let lo = 0;
        let hi = list.length;
        while (lo < hi) {
          const mid = (lo + hi) >> 1;
          if (list[mid].seq < before.seq) lo = mid + 1;
          else hi = mid;
        }
        start = lo - 1;
      }
      const out = [];
      for (let i = start; i >= 0 && out.length < limit; i--) {
        const rec = list[i];
        if (until && rec.seq <= until.seq) break;
        if (rec.slot > maxSlot) continue;
        out.push({
          blockTime: chain.blockTime(rec.slot),
          confirmationStatus: chain.statusOf(rec),
          err: rec.err,
          memo: rec.memo,
          signature: rec.signature,
          slot: rec.slot,
        });
      }
      return out;
    },
  };
  return m;
}

/** Dispatches one JSON-RPC request object; returns the response object. */
export function handle(chain, methods, req) {
  const id = req && typeof req === "object" && "id" in req ? bigValue(req.id) : null;
  try {
    if (!req || typeof req !== "object" || Array.isArray(req) || req.jsonrpc !== "2.0" || typeof req.method !== "string") {
      throw new RpcError(-32600, "Invalid request");
    }
    const fn = Object.hasOwn(methods, req.method) ? methods[req.method] : undefined;
    if (!fn) throw new RpcError(METHOD_NOT_FOUND, "Method not found");
    let params = req.params ?? [];
    if (!Array.isArray(params)) throw invalidParams("Invalid params: expected an array");
    chain.tick();
    const result = fn(params);
    return { jsonrpc: "2.0", result, id };
  } catch (e) {
    if (e instanceof RpcError) return { jsonrpc: "2.0", error: e.toJSON(), id };
    return { jsonrpc: "2.0", error: { code: -32603, message: `Internal error: ${e?.message ?? e}` }, id };
  }
}

export { INVALID_PARAMS };
