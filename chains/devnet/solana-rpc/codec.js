// Encoding helpers shared by the devnet server: base58, exact JSON with u64s,
// little-endian reads, zstd framing and token amount formatting.

import { getBase58Decoder, getBase58Encoder } from "@solana/kit";

const b58enc = getBase58Encoder();
const b58dec = getBase58Decoder();

/** bytes -> base58 string */
export function toBase58(bytes) {
  return b58dec.decode(bytes);
}

/** base58 string -> bytes; throws on a bad character. */
export function fromBase58(s) {
  if (typeof s !== "string") throw new Error("not a string");
  return Uint8Array.from(b58enc.encode(s));
}

/** Decodes a base58 value that must be exactly `len` bytes long. */
export function fromBase58Exact(s, len) {
  const b = fromBase58(s);
  if (b.length !== len) throw new Error("WrongSize");
  return b;
}

export function toBase64(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

/** Strict base64 decode (Buffer.from silently skips bad characters). */
export function fromBase64(s) {
  if (typeof s !== "string" || s.length % 4 !== 0 || !BASE64_RE.test(s)) {
    throw new Error("Invalid input");
  }
  return new Uint8Array(Buffer.from(s, "base64"));
}

/**
 * JSON.stringify that writes BigInt as a bare JSON number (u64s such as
 * lamports or rentEpoch must be numbers, and may exceed 2^53) and drops
 * undefined object members.
 */
export function stringify(v) {
  switch (typeof v) {
    case "bigint":
      return v.toString();
    case "number":
      return Number.isFinite(v) ? String(v) : "null";
    case "string":
      return JSON.stringify(v);
    case "boolean":
      return v ? "true" : "false";
    case "undefined":
      return "null";
    case "object": {
      if (v === null) return "null";
      if (Array.isArray(v)) return "[" + v.map(stringify).join(",") + "]";
      const parts = [];
      for (const [k, x] of Object.entries(v)) {
        if (x === undefined) continue;
        parts.push(JSON.stringify(k) + ":" + stringify(x));
      }
      return "{" + parts.join(",") + "}";
    }
    default:
      return "null";
  }
}

// A string literal, or an integer literal too long to be exact as a double.
const BIG_INT_RE = /"(?:[^"\\]|\\.)*"|-?\d{16,}(?![.eE\d])/g;
/** Prefix of the strings parseJSON puts where a long integer literal was. */
const BIG_MARK = "\u0000int:";

/**
 * JSON.parse that keeps integers of 16 digits or more exact (JSON.parse
 * rounds above 2^53): they become marker strings that toU64 and bigValue
 * read back exactly.
 */
export function parseJSON(text) {
  return JSON.parse(text.replace(BIG_INT_RE, (m) => (m[0] === '"' ? m : `"\\u0000int:${m}"`)));
}

/** A parsed JSON value with long integers restored as BigInt. */
export function bigValue(v) {
  return typeof v === "string" && v.startsWith(BIG_MARK) ? BigInt(v.slice(BIG_MARK.length)) : v;
}

const U64_MAX = (1n << 64n) - 1n;

/** A u64 parameter (number or digit string) as BigInt; throws when invalid. */
export function toU64(v) {
  let b;
  if (typeof v === "number") {
    if (!Number.isInteger(v)) throw new Error("invalid type: floating point, expected u64");
    b = BigInt(v);
  } else if (typeof v === "string" && v.startsWith(BIG_MARK)) {
    b = BigInt(v.slice(BIG_MARK.length));
  } else if (typeof v === "bigint") {
    b = v;
  } else {
    throw new Error("invalid type: expected u64");
  }
  if (b < 0n || b > U64_MAX) throw new Error("invalid value: integer out of range for u64");
  return b;
}

export function readU64(bytes, off) {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getBigUint64(off, true);
}

export function readU32(bytes, off) {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(off, true);
}

export function u64le(v) {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(v), true);
  return b;
}

export function u32le(v) {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v, true);
  return b;
}

export function concatBytes(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export function bytesEqual(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * A valid zstd frame holding `data` in raw (stored) blocks. Node 20 has no
 * zstd compressor; stored blocks are legal zstd that any decoder reads.
 */
export function zstdStored(data) {
  const parts = [];
  const magic = new Uint8Array([0x28, 0xb5, 0x2f, 0xfd]);
  // Frame header descriptor: single segment, 8-byte content size, no checksum.
  const fhd = new Uint8Array([0xe0]);
  parts.push(magic, fhd, u64le(data.length));
  const MAX = 128 * 1024;
  let off = 0;
  do {
    const n = Math.min(MAX, data.length - off);
    const last = off + n >= data.length ? 1 : 0;
    const hdr = (n << 3) | (0 << 1) | last; // block type 0 = raw
    parts.push(new Uint8Array([hdr & 0xff, (hdr >> 8) & 0xff, (hdr >> 16) & 0xff]));
    parts.push(data.subarray(off, off + n));
    off += n;
  } while (off < data.length);
  return concatBytes(...parts);
}

/** "1234500" with 6 decimals -> "1.2345", as the real node trims it. */
export function uiAmountString(amount, decimals) {
  const s = amount.toString();
  if (decimals === 0) return s;
  const padded = s.padStart(decimals + 1, "0");
  const int = padded.slice(0, padded.length - decimals);
  const frac = padded.slice(padded.length - decimals).replace(/0+$/, "");
  return frac ? `${int}.${frac}` : int;
}

export function uiTokenAmount(amount, decimals) {
  const str = uiAmountString(amount, decimals);
  return {
    amount: amount.toString(),
    decimals,
    uiAmount: Number(str),
    uiAmountString: str,
  };
}
