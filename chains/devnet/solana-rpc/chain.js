// The chain: a LiteSVM instance given slots, blockhashes, commitment levels
// and the history indexes a real node keeps (signatures, addresses, token
// account owners).

import crypto from "node:crypto";
import internal from "litesvm/dist/internal.js";
import { toBase58, fromBase58, readU64, readU32, u64le, u32le, concatBytes, bytesEqual, uiTokenAmount } from "./codec.js";
import { parseTransaction, verifySignatures, isWritable, buildTransaction, generateKeypair, DecodeError, SanitizeError } from "./wire.js";
import {
  RpcError, transactionError, namedError, INVALID_PARAMS, PREFLIGHT_FAILURE, SIGNATURE_VERIFICATION_FAILURE,
} from "./errors.js";

const { LiteSvm, Clock, Account, FailedTransactionMetadata } = internal;

export const SYSTEM_PROGRAM = "11111111111111111111111111111111";
export const TOKEN_PROGRAM = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
export const TOKEN_2022_PROGRAM = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";
export const ATA_PROGRAM = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL";
export const COMPUTE_BUDGET_PROGRAM = "ComputeBudget111111111111111111111111111111";
const MEMO_PROGRAMS = new Set(["MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr", "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo"]);

export const LAMPORTS_PER_SIGNATURE = 5000n;
/** A blockhash is usable for this many slots after its own (MAX_PROCESSING_AGE). */
export const BLOCKHASH_VALIDITY = 150;
/** Slots a signature stays in the status cache (MAX_RECENT_BLOCKHASHES). */
export const STATUS_CACHE_SLOTS = 300;

export const COMMITMENTS = new Set(["processed", "confirmed", "finalized"]);

/** Normalises a commitment level (including the deprecated names). */
export function normaliseCommitment(c, dflt = "finalized") {
  if (c === undefined || c === null) return dflt;
  switch (c) {
    case "processed":
    case "recent":
      return "processed";
    case "confirmed":
    case "single":
    case "singleGossip":
      return "confirmed";
    case "finalized":
    case "root":
    case "max":
      return "finalized";
    default:
      throw new RpcError(INVALID_PARAMS, `Invalid params: unknown variant \`${c}\`, expected one of \`processed\`, \`confirmed\`, \`finalized\`.`);
  }
}

function isTokenProgram(owner) {
  return owner === TOKEN_PROGRAM || owner === TOKEN_2022_PROGRAM;
}

/** Whether account data (owned by a token program) is an initialized token account. */
export function isTokenAccountData(owner, data) {
  if (!isTokenProgram(owner)) return false;
  if (data.length < 165) return false;
  if (data.length > 165 && !(owner === TOKEN_2022_PROGRAM && data[165] === 2)) return false;
  return data[108] !== 0;
}

export function isMintData(owner, data) {
  if (!isTokenProgram(owner)) return false;
  if (data.length === 82) return data[45] === 1;
  return owner === TOKEN_2022_PROGRAM && data.length > 165 && data[165] === 1 && data[45] === 1;
}

function cOptionKey(data, off) {
  return readU32(data, off) === 1 ? toBase58(data.subarray(off + 4, off + 36)) : null;
}

export class Chain {
  /**
   * @param {{slotMs: number, finalizedDepth: number, confirmedDepth?: number, skipEvery?: number}} cfg
   */
  constructor(cfg) {
    this.slotMs = cfg.slotMs;
    this.finalizedDepth = cfg.finalizedDepth;
    this.confirmedDepth = cfg.confirmedDepth ?? 1;
    // Every skipEvery-th slot that no transaction landed in produces no
    // block, as a real cluster skips the slots of leaders that were offline:
    // getBlocks leaves it out and getBlock answers -32007. 0: none.
    this.skipEvery = cfg.skipEvery ?? 0;

    const svm = new LiteSvm();
    // Blockhashes are checked here against our own slot-based window;
    // signatures are verified here so a bad one is -32003 before execution;
    // history is ours (LiteSVM keeps only a few).
    svm.setBlockhashCheck(false);
    svm.setSigverify(false);
    svm.setTransactionHistory(0n);
    this.svm = svm;

    const clock = svm.getClock();
    this.baseSlot = Number(clock.slot);
    this.epoch = clock.epoch;
    this.genesisMs = Date.now();
    this.slot = this.baseSlot;
    this.hashSlot = new Map(); // blockhash (base58) -> slot it was produced in
    this.slotHash = new Map(); // slot -> blockhash, for the last STATUS_CACHE_SLOTS slots
    this.blockhashes = []; // blockhash of every slot since baseSlot (index slot - baseSlot)
    this.bySlot = new Map(); // slot -> [record] executed in it
    this._setClock();
    this._recordHash();
    // LiteSVM's blockhashes are the same in every instance; the genesis
    // hash is what identifies a cluster, so make it this instance's own,
    // unless the caller names the cluster this one stands for (x402 names
    // Solana's clusters by their genesis hash).
    this.genesisHash = cfg.genesisHash || toBase58(crypto.randomBytes(32));

    this.seq = 0;
    this.txs = new Map(); // signature (base58) -> record
    this.byAddress = new Map(); // address (base58) -> [record] in execution order
    this.tokenOwnerOf = new Map(); // token account (base58) -> owner (base58)
    this.tokenAccountsOf = new Map(); // owner (base58) -> Set(token account)
    this.mintDecimals = new Map();
    this.transactionCount = 0;

    // Called after the chain moves: with no argument when slots passed, with
    // the record when a transaction landed (PubSub listens).
    this.onChange = () => {};

    this.faucet = generateKeypair();
    svm.setAccount(this.faucet.pubkey, new Account(10n ** 18n, new Uint8Array(0), fromBase58(SYSTEM_PROGRAM), false, 0n));
  }

  // ---- time ---------------------------------------------------------------

  slotTimeMs(slot) {
    return this.genesisMs + (slot - this.baseSlot) * this.slotMs;
  }

  blockTime(slot) {
    return Math.floor(this.slotTimeMs(slot) / 1000);
  }

  blockHeight(slot) {
    return slot - this.baseSlot;
  }

  _setClock() {
    this.svm.setClock(new Clock(BigInt(this.slot), BigInt(Math.floor(this.genesisMs / 1000)), this.epoch, this.epoch, BigInt(this.blockTime(this.slot))));
  }

  _recordHash() {
    const h = this.svm.latestBlockhash();
    this.hashSlot.set(h, this.slot);
    this.slotHash.set(this.slot, h);
    this.blockhashes[this.slot - this.baseSlot] = h;
    const old = this.slot - STATUS_CACHE_SLOTS;
    const oh = this.slotHash.get(old);
    if (oh !== undefined) {
      this.slotHash.delete(old);
      this.hashSlot.delete(oh);
    }
  }

  /**
   * Moves the chain's start back by `slots` slots and catches up, so that
   * what happened at start (genesis) is already that deep. Used once after
   * genesis with the finalized depth: genesis is final, and no commitment
   * level ever points before the first slot.
   */
  fastForward(slots) {
    this.genesisMs -= slots * this.slotMs;
    this.tick();
  }

  /** Advances the chain to the slot wall-clock time says it is at. */
  tick() {
    const target = this.baseSlot + Math.floor((Date.now() - this.genesisMs) / this.slotMs);
    if (target <= this.slot) return this.slot;
    if (target - this.slot > STATUS_CACHE_SLOTS) {
      // Long pause (suspended machine): skip ahead, keeping a full window.
      for (const [s, h] of this.slotHash) if (s < target - STATUS_CACHE_SLOTS) {
        this.slotHash.delete(s);
        this.hashSlot.delete(h);
      }
      this.slot = target - STATUS_CACHE_SLOTS;
    }
    while (this.slot < target) {
      this._maybeSkip(this.slot);
      this.slot++;
      this._setClock();
      this.svm.expireBlockhash();
      this._recordHash();
    }
    this.onChange();
    return this.slot;
  }

  /**
   * Called as the chain leaves `slot`: an empty slot the skip rule names
   * loses its block. Its blockhash stays valid for transactions already
   * signed with it (a real leader's blockhash would not exist; nothing here
   * depends on that).
   */
  _maybeSkip(slot) {
    if (this.skipEvery < 2 || slot <= this.baseSlot) return;
    if ((slot - this.baseSlot) % this.skipEvery !== 0 || this.bySlot.has(slot)) return;
    this.blockhashes[slot - this.baseSlot] = undefined;
  }

  /** The slot a commitment level sees. */
  commitmentSlot(commitment) {
    switch (commitment) {
      case "processed":
        return this.slot;
      case "confirmed":
        return this.slot - this.confirmedDepth;
      default:
        return this.slot - this.finalizedDepth;
    }
  }

  /** The blockhash a commitment level sees, with its slot. */
  blockhashAt(commitment) {
    let s = Math.max(this.commitmentSlot(commitment), this.baseSlot);
    let h = this.slotHash.get(s);
    while (h === undefined && s < this.slot) h = this.slotHash.get(++s);
    return { blockhash: h, slot: s, lastValidBlockHeight: this.blockHeight(s) + BLOCKHASH_VALIDITY };
  }

  /** Whether a blockhash can still land a transaction now. */
  blockhashValid(hash) {
    const s = this.hashSlot.get(hash);
    return s !== undefined && this.slot <= s + BLOCKHASH_VALIDITY;
  }

  /** The blockhash produced in a slot, or undefined when the slot has no block. */
  blockhashOfSlot(slot) {
    return slot < this.baseSlot ? undefined : this.blockhashes[slot - this.baseSlot];
  }

  statusOf(rec) {
    const depth = this.slot - rec.slot;
    if (depth >= this.finalizedDepth) return "finalized";
    if (depth >= this.confirmedDepth) return "confirmed";
    return "processed";
  }

  // ---- accounts -----------------------------------------------------------

  /** LiteSVM account or null. */
  account(pubkey) {
    return this.svm.getAccount(pubkey);
  }

  lamports(pubkey) {
    return this.svm.getBalance(pubkey) ?? 0n;
  }

  decimalsOf(mintB58) {
    let d = this.mintDecimals.get(mintB58);
    if (d !== undefined) return d;
    const a = this.svm.getAccount(fromBase58(mintB58));
    if (!a) return undefined;
    const data = a.data();
    if (!isMintData(toBase58(a.owner()), data)) return undefined;
    d = data[44];
    this.mintDecimals.set(mintB58, d);
    return d;
  }

  /** Decoded token account, or null when the account is not one. */
  tokenAccount(acct) {
    if (!acct) return null;
    const owner = toBase58(acct.owner());
    const data = acct.data();
    if (!isTokenAccountData(owner, data)) return null;
    const mint = toBase58(data.subarray(0, 32));
    return {
      programId: owner,
      mint,
      owner: toBase58(data.subarray(32, 64)),
      amount: readU64(data, 64),
      delegate: cOptionKey(data, 72),
      state: data[108],
      isNative: readU32(data, 109) === 1 ? readU64(data, 113) : null,
      delegatedAmount: readU64(data, 121),
      closeAuthority: cOptionKey(data, 129),
      decimals: this.decimalsOf(mint) ?? 0,
    };
  }

  mintInfo(acct) {
    if (!acct) return null;
    const owner = toBase58(acct.owner());
    const data = acct.data();
    if (!isMintData(owner, data)) return null;
    return {
      programId: owner,
      mintAuthority: cOptionKey(data, 0),
      supply: readU64(data, 36),
      decimals: data[44],
      isInitialized: data[45] === 1,
      freezeAuthority: cOptionKey(data, 46),
    };
  }

  /** Token accounts (base58) owned by `owner` (base58), from the owner index. */
  tokenAccountsByOwner(owner) {
    return [...(this.tokenAccountsOf.get(owner) ?? [])];
  }

  _indexTokenAccount(key, keyB58) {
    const ta = this.tokenAccount(this.svm.getAccount(key));
    const prev = this.tokenOwnerOf.get(keyB58);
    const next = ta ? ta.owner : undefined;
    if (prev === next) return;
    if (prev !== undefined) {
      const set = this.tokenAccountsOf.get(prev);
      set?.delete(keyB58);
      if (set && set.size === 0) this.tokenAccountsOf.delete(prev);
      this.tokenOwnerOf.delete(keyB58);
    }
    if (next !== undefined) {
      this.tokenOwnerOf.set(keyB58, next);
      let set = this.tokenAccountsOf.get(next);
      if (!set) this.tokenAccountsOf.set(next, (set = new Set()));
      set.add(keyB58);
    }
  }

  _snapshot(keys) {
    const lamports = [];
    const tokens = [];
    keys.forEach((k, i) => {
      const a = this.svm.getAccount(k);
      lamports.push(a ? a.lamports() : 0n);
      const ta = this.tokenAccount(a);
      if (ta) {
        tokens.push({
          accountIndex: i,
          mint: ta.mint,
          owner: ta.owner,
          programId: ta.programId,
          uiTokenAmount: uiTokenAmount(ta.amount, ta.decimals),
        });
      }
    });
    return { lamports, tokens };
  }

  // ---- transactions -------------------------------------------------------

  /** Decodes and sanitizes wire bytes, mapping failures to RPC errors. */
  decode(bytes) {
    try {
      return parseTransaction(bytes);
    } catch (e) {
      if (e instanceof SanitizeError) throw new RpcError(INVALID_PARAMS, `invalid transaction: ${e.message}`);
      if (e instanceof DecodeError) {
        throw new RpcError(INVALID_PARAMS, `failed to deserialize solana_sdk::transaction::versioned::VersionedTransaction: ${e.message}`);
      }
      throw e;
    }
  }

  _run(tx, simulate) {
    const fn = tx.message.version === "legacy"
      ? (simulate ? "simulateLegacyTransaction" : "sendLegacyTransaction")
      : (simulate ? "simulateVersionedTransaction" : "sendVersionedTransaction");
    try {
      return this.svm[fn](tx.bytes);
    } catch (e) {
      throw new RpcError(INVALID_PARAMS, `invalid transaction: ${e.message ?? e}`);
    }
  }

  /**
   * Pre-execution checks a real bank makes before running a transaction:
   * blockhash age, then the status cache. Returns a named error or null.
   */
  _check(tx) {
    if (!this.blockhashValid(toBase58(tx.message.recentBlockhash))) return namedError("BlockhashNotFound");
    const sig = toBase58(tx.signatures[0] ?? new Uint8Array(64));
    const rec = this.txs.get(sig);
    if (rec && this.slot - rec.slot <= STATUS_CACHE_SLOTS) return namedError("AlreadyProcessed");
    return null;
  }

  /**
   * Runs a simulation. Returns { err, errDisplay, logs, unitsConsumed,
   * returnData, innerInstructions, postAccounts }.
   */
  simulate(tx, { checkBlockhash = true } = {}) {
    if (checkBlockhash) {
      const pre = this._check(tx);
      if (pre) return { err: pre.json, errDisplay: pre.display, logs: [], unitsConsumed: 0n, returnData: null, innerInstructions: [], postAccounts: [] };
    }
    const res = this._run(tx, true);
    if (res instanceof FailedTransactionMetadata) {
      const te = transactionError(res.err());
      return { err: te.json, errDisplay: te.display, ...this._metaFields(res.meta()), postAccounts: [] };
    }
    return { err: null, errDisplay: null, ...this._metaFields(res.meta()), postAccounts: res.postAccounts() };
  }

  _metaFields(meta) {
    let returnData = null;
    const rd = meta.returnData();
    if (rd && rd.data().length > 0) returnData = { programId: toBase58(rd.programId()), data: rd.data() };
    const innerInstructions = [];
    meta.innerInstructions().forEach((list, index) => {
      if (list.length === 0) return;
      innerInstructions.push({
        index,
        instructions: list.map((ii) => {
          const ci = ii.instruction();
          return { programIdIndex: ci.programIdIndex(), accounts: Array.from(ci.accounts()), data: ci.data(), stackHeight: ii.stackHeight() };
        }),
      });
    });
    return { logs: meta.logs(), unitsConsumed: meta.computeUnitsConsumed(), returnData, innerInstructions };
  }

  /**
   * sendTransaction: verify, check, simulate (unless skipPreflight), execute
   * and index. Returns the signature (base58) or throws an RpcError.
   */
  send(bytes, { skipPreflight = false } = {}) {
    // A compact copy: the index keeps views into it, not into a request buffer.
    const tx = this.decode(Uint8Array.from(bytes));
    if (!verifySignatures(tx)) throw new RpcError(SIGNATURE_VERIFICATION_FAILURE, "Transaction signature verification failure");
    const signature = toBase58(tx.signatures[0]);

    const pre = this._check(tx);
    if (pre) {
      // A real node silently drops these when preflight is skipped; here
      // they are always refused, so a caller learns at once.
      if (pre.json === "AlreadyProcessed" && skipPreflight) return signature;
      throw preflightError(pre.json, pre.display, { logs: [], unitsConsumed: 0n, returnData: null });
    }
    if (!skipPreflight) {
      const sim = this.simulate(tx, { checkBlockhash: false });
      if (sim.err !== null) throw preflightError(sim.err, sim.errDisplay, sim);
    }

    const keys = tx.message.accountKeys;
    const before = this._snapshot(keys);
    const res = this._run(tx, false);
    const after = this._snapshot(keys);
    let fee = 0n;
    for (let i = 0; i < keys.length; i++) fee += before.lamports[i] - after.lamports[i];

    let err = null;
    let meta = res;
    if (res instanceof FailedTransactionMetadata) {
      const te = transactionError(res.err());
      meta = res.meta();
      if (fee <= 0n) {
        // Not committed (the fee payer was not even charged): nothing landed.
        throw preflightError(te.json, te.display, this._metaFields(meta));
      }
      err = te.json;
    }

    const rec = {
      seq: ++this.seq,
      signature,
      slot: this.slot,
      tx,
      err,
      fee,
      preBalances: before.lamports,
      postBalances: after.lamports,
      preTokenBalances: before.tokens,
      postTokenBalances: after.tokens,
      ...this._metaFields(meta),
      memo: memoOf(tx),
    };
    this.txs.set(signature, rec);
    let inSlot = this.bySlot.get(rec.slot);
    if (!inSlot) this.bySlot.set(rec.slot, (inSlot = []));
    inSlot.push(rec);
    this.transactionCount++;
    keys.forEach((k, i) => {
      const a = toBase58(k);
      let list = this.byAddress.get(a);
      if (!list) this.byAddress.set(a, (list = []));
      list.push(rec);
      if (isWritable(tx.message, i)) this._indexTokenAccount(k, a);
    });
    this.onChange(rec);
    return signature;
  }

  /** requestAirdrop: a signed system transfer from the faucet. */
  airdrop(to, lamports) {
    const ix = {
      programId: fromBase58(SYSTEM_PROGRAM),
      keys: [
        { pubkey: this.faucet.pubkey, isSigner: true, isWritable: true },
        { pubkey: to, isSigner: false, isWritable: true },
      ],
      data: concatBytes(u32le(2), u64le(lamports)),
    };
    return this.send(buildTransaction([ix], [this.faucet], fromBase58(this.svm.latestBlockhash())));
  }

  /** Builds, signs and sends a transaction from instructions; returns the signature. */
  execute(instructions, signers) {
    return this.send(buildTransaction(instructions, signers, fromBase58(this.svm.latestBlockhash())));
  }

  /** The fee a message costs: signatures plus its compute-unit price. */
  feeFor(message) {
    let fee = LAMPORTS_PER_SIGNATURE * BigInt(message.header.numRequiredSignatures);
    let limit = null;
    let price = 0n;
    let others = 0;
    for (const ix of message.instructions) {
      const pid = toBase58(message.accountKeys[ix.programIdIndex]);
      if (pid === COMPUTE_BUDGET_PROGRAM) {
        if (ix.data[0] === 2 && ix.data.length >= 5) limit = BigInt(readU32(ix.data, 1));
        if (ix.data[0] === 3 && ix.data.length >= 9) price = readU64(ix.data, 1);
      } else others++;
    }
    if (price > 0n) {
      if (limit === null) limit = BigInt(Math.min(1_400_000, 200_000 * others));
      fee += (price * limit + 999_999n) / 1_000_000n;
    }
    return fee;
  }
}

function preflightError(errJson, display, sim) {
  return new RpcError(PREFLIGHT_FAILURE, `Transaction simulation failed: ${display}`, {
    accounts: null,
    err: errJson,
    innerInstructions: null,
    logs: sim.logs ?? [],
    replacementBlockhash: null,
    returnData: encodeReturnData(sim.returnData),
    unitsConsumed: sim.unitsConsumed ?? 0n,
  });
}

export function encodeReturnData(rd) {
  if (!rd) return null;
  return { programId: rd.programId, data: [Buffer.from(rd.data).toString("base64"), "base64"] };
}

function memoOf(tx) {
  const m = tx.message;
  const memos = [];
  for (const ix of m.instructions) {
    if (MEMO_PROGRAMS.has(toBase58(m.accountKeys[ix.programIdIndex]))) {
      const text = Buffer.from(ix.data).toString("utf8");
      memos.push(`[${ix.data.length}] ${text}`);
    }
  }
  return memos.length ? memos.join("; ") : null;
}

export { bytesEqual };
