// Solana wire format: parsing and sanitizing transactions and messages,
// ed25519 keys and signatures, and building the few legacy transactions the
// devnet signs itself (setup, airdrops).

import crypto from "node:crypto";
import { concatBytes, toBase58, bytesEqual } from "./codec.js";

export const PACKET_DATA_SIZE = 1232;

/** Raised when bytes are not a transaction at all (-32602 "failed to deserialize"). */
export class DecodeError extends Error {}
/** Raised when a transaction decodes but is malformed (-32602 "invalid transaction"). */
export class SanitizeError extends Error {
  constructor(message, txErr) {
    super(message);
    this.txErr = txErr; // TransactionError JSON value
  }
}

class Reader {
  constructor(bytes) {
    this.b = bytes;
    this.o = 0;
  }
  u8() {
    if (this.o >= this.b.length) throw new DecodeError("io error: unexpected end of file");
    return this.b[this.o++];
  }
  bytes(n) {
    if (this.o + n > this.b.length) throw new DecodeError("io error: unexpected end of file");
    const s = this.b.subarray(this.o, this.o + n);
    this.o += n;
    return s;
  }
  shortVec() {
    let v = 0;
    for (let i = 0; i < 3; i++) {
      const x = this.u8();
      v |= (x & 0x7f) << (7 * i);
      if ((x & 0x80) === 0) {
        if (i > 0 && x === 0) throw new DecodeError("invalid value: alias encoding");
        return v;
      }
      if (i === 2) throw new DecodeError("invalid value: short vec too long");
    }
    return v;
  }
}

function parseMessageFrom(r) {
  const start = r.o;
  let version = "legacy";
  const first = r.b[r.o];
  if (first === undefined) throw new DecodeError("io error: unexpected end of file");
  if (first & 0x80) {
    version = first & 0x7f;
    r.o++;
    if (version !== 0) throw new DecodeError(`invalid value: integer \`${version}\`, expected a valid transaction message version`);
  }
  const header = {
    numRequiredSignatures: r.u8(),
    numReadonlySignedAccounts: r.u8(),
    numReadonlyUnsignedAccounts: r.u8(),
  };
  const nKeys = r.shortVec();
  const accountKeys = [];
  for (let i = 0; i < nKeys; i++) accountKeys.push(r.bytes(32));
  const recentBlockhash = r.bytes(32);
  const nIx = r.shortVec();
  const instructions = [];
  for (let i = 0; i < nIx; i++) {
    const programIdIndex = r.u8();
    const na = r.shortVec();
    const accounts = Array.from(r.bytes(na));
    const nd = r.shortVec();
    const data = r.bytes(nd);
    instructions.push({ programIdIndex, accounts, data });
  }
  const addressTableLookups = [];
  if (version === 0) {
    const nl = r.shortVec();
    for (let i = 0; i < nl; i++) {
      const accountKey = r.bytes(32);
      const writableIndexes = Array.from(r.bytes(r.shortVec()));
      const readonlyIndexes = Array.from(r.bytes(r.shortVec()));
      addressTableLookups.push({ accountKey, writableIndexes, readonlyIndexes });
    }
  }
  const messageBytes = r.b.subarray(start, r.o);
  return { version, header, accountKeys, recentBlockhash, instructions, addressTableLookups, messageBytes };
}

/** Parses a serialized message (getFeeForMessage). */
export function parseMessage(bytes) {
  const r = new Reader(bytes);
  const m = parseMessageFrom(r);
  sanitizeMessage(m);
  return m;
}

/** Parses and sanitizes a wire transaction. */
export function parseTransaction(bytes) {
  const r = new Reader(bytes);
  const n = r.shortVec();
  const signatures = [];
  for (let i = 0; i < n; i++) signatures.push(r.bytes(64));
  const message = parseMessageFrom(r);
  const tx = { signatures, message, bytes: bytes.subarray(0, r.o) };
  sanitizeTransaction(tx);
  return tx;
}

const SANITIZE_MSG = "Transaction failed to sanitize accounts offsets correctly";

function sanitizeMessage(m) {
  const h = m.header;
  const nStatic = m.accountKeys.length;
  let nLoaded = 0;
  for (const l of m.addressTableLookups) {
    if (l.writableIndexes.length + l.readonlyIndexes.length === 0) throw new SanitizeError(SANITIZE_MSG, "SanitizeFailure");
    nLoaded += l.writableIndexes.length + l.readonlyIndexes.length;
  }
  const total = nStatic + nLoaded;
  if (h.numRequiredSignatures + h.numReadonlyUnsignedAccounts > nStatic) throw new SanitizeError(SANITIZE_MSG, "SanitizeFailure");
  if (h.numReadonlySignedAccounts >= h.numRequiredSignatures) throw new SanitizeError(SANITIZE_MSG, "SanitizeFailure");
  if (total > 256) throw new SanitizeError(SANITIZE_MSG, "SanitizeFailure");
  for (const ix of m.instructions) {
    if (ix.programIdIndex === 0 || ix.programIdIndex >= nStatic) throw new SanitizeError(SANITIZE_MSG, "SanitizeFailure");
    for (const a of ix.accounts) if (a >= total) throw new SanitizeError(SANITIZE_MSG, "SanitizeFailure");
  }
  const seen = new Set();
  for (const k of m.accountKeys) {
    const s = Buffer.from(k).toString("hex");
    if (seen.has(s)) throw new SanitizeError("Account loaded twice", "AccountLoadedTwice");
    seen.add(s);
  }
}

function sanitizeTransaction(tx) {
  const m = tx.message;
  if (tx.signatures.length !== m.header.numRequiredSignatures) throw new SanitizeError(SANITIZE_MSG, "SanitizeFailure");
  if (tx.signatures.length > m.accountKeys.length) throw new SanitizeError(SANITIZE_MSG, "SanitizeFailure");
  sanitizeMessage(m);
}

/** Whether static account key i is writable as the message header says. */
export function isWritable(m, i) {
  const h = m.header;
  if (i < h.numRequiredSignatures) return i < h.numRequiredSignatures - h.numReadonlySignedAccounts;
  return i < m.accountKeys.length - h.numReadonlyUnsignedAccounts;
}

export function isSigner(m, i) {
  return i < m.header.numRequiredSignatures;
}

// ---- ed25519 -----------------------------------------------------------

const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

function publicKeyObject(pub) {
  return crypto.createPublicKey({ key: Buffer.concat([SPKI_PREFIX, pub]), format: "der", type: "spki" });
}

/** Verifies every required signature; returns false on the first bad one. */
export function verifySignatures(tx) {
  const m = tx.message;
  for (let i = 0; i < tx.signatures.length; i++) {
    let ok = false;
    try {
      ok = crypto.verify(null, m.messageBytes, publicKeyObject(m.accountKeys[i]), tx.signatures[i]);
    } catch {
      ok = false;
    }
    if (!ok) return false;
  }
  return true;
}

/** A fresh keypair: { secret: 64 bytes (seed || pubkey), pubkey: 32 bytes }. */
export function generateKeypair() {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ed25519");
  const seed = new Uint8Array(privateKey.export({ format: "der", type: "pkcs8" }).subarray(16));
  const pubkey = new Uint8Array(publicKey.export({ format: "der", type: "spki" }).subarray(12));
  return { secret: concatBytes(seed, pubkey), pubkey, key: privateKey };
}

function sign(kp, msg) {
  return new Uint8Array(crypto.sign(null, msg, kp.key));
}

function shortVec(n) {
  const out = [];
  for (;;) {
    let b = n & 0x7f;
    n >>= 7;
    if (n === 0) {
      out.push(b);
      return new Uint8Array(out);
    }
    out.push(b | 0x80);
  }
}

/**
 * Builds and signs a legacy transaction.
 * instructions: [{ programId: bytes, keys: [{ pubkey, isSigner, isWritable }], data: bytes }]
 * signers: keypairs from generateKeypair; the first is the fee payer.
 */
export function buildTransaction(instructions, signers, recentBlockhash) {
  const metas = []; // {pubkey, signer, writable}
  const find = (pk) => metas.find((x) => bytesEqual(x.pubkey, pk));
  const add = (pubkey, signer, writable) => {
    const e = find(pubkey);
    if (e) {
      e.signer ||= signer;
      e.writable ||= writable;
    } else metas.push({ pubkey, signer, writable });
  };
  add(signers[0].pubkey, true, true);
  for (const ix of instructions) {
    for (const k of ix.keys) add(k.pubkey, k.isSigner, k.isWritable);
    add(ix.programId, false, false);
  }
  const payer = metas.shift();
  const rank = (x) => (x.signer ? (x.writable ? 0 : 1) : x.writable ? 2 : 3);
  const sorted = [payer, ...metas.map((x, i) => ({ x, i })).sort((a, b) => rank(a.x) - rank(b.x) || a.i - b.i).map((e) => e.x)];
  const keys = sorted.map((x) => x.pubkey);
  const index = (pk) => keys.findIndex((k) => bytesEqual(k, pk));
  const header = new Uint8Array([
    sorted.filter((x) => x.signer).length,
    sorted.filter((x) => x.signer && !x.writable).length,
    sorted.filter((x) => !x.signer && !x.writable).length,
  ]);
  const ixBytes = instructions.map((ix) =>
    concatBytes(
      new Uint8Array([index(ix.programId)]),
      shortVec(ix.keys.length),
      new Uint8Array(ix.keys.map((k) => index(k.pubkey))),
      shortVec(ix.data.length),
      ix.data,
    ),
  );
  const message = concatBytes(header, shortVec(keys.length), ...keys, recentBlockhash, shortVec(ixBytes.length), ...ixBytes);
  const sigs = [];
  for (let i = 0; i < header[0]; i++) {
    const kp = signers.find((s) => bytesEqual(s.pubkey, keys[i]));
    if (!kp) throw new Error(`missing signer ${toBase58(keys[i])}`);
    sigs.push(sign(kp, message));
  }
  return concatBytes(shortVec(sigs.length), ...sigs, message);
}
