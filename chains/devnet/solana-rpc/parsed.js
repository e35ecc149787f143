// jsonParsed instructions for the programs the devnet's users touch: System,
// SPL Token (and Token-2022's shared instructions), Associated Token Account
// and Memo. Anything else is returned unparsed, as the real node does.

import { toBase58, readU64, readU32, uiTokenAmount } from "./codec.js";
import { SYSTEM_PROGRAM, TOKEN_PROGRAM, TOKEN_2022_PROGRAM, ATA_PROGRAM } from "./chain.js";

const MEMO_PROGRAMS = new Set(["MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr", "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo"]);

function parseSystem(data, acc) {
  if (data.length < 4) return null;
  const kind = readU32(data, 0);
  switch (kind) {
    case 0: // CreateAccount
      if (data.length < 52 || acc.length < 2) return null;
      return {
        type: "createAccount",
        info: { lamports: readU64(data, 4), newAccount: acc[1], owner: toBase58(data.subarray(20, 52)), source: acc[0], space: readU64(data, 12) },
      };
    case 2: // Transfer
      if (data.length < 12 || acc.length < 2) return null;
      return { type: "transfer", info: { destination: acc[1], lamports: readU64(data, 4), source: acc[0] } };
    case 8: // Allocate
      if (data.length < 12 || acc.length < 1) return null;
      return { type: "allocate", info: { account: acc[0], space: readU64(data, 4) } };
    case 1: // Assign
      if (data.length < 36 || acc.length < 1) return null;
      return { type: "assign", info: { account: acc[0], owner: toBase58(data.subarray(4, 36)) } };
    default:
      return null;
  }
}

function parseToken(data, acc, decimalsOf) {
  if (data.length < 1) return null;
  const amountInfo = (off) => readU64(data, off).toString();
  const signerOf = (i) => acc[i];
  switch (data[0]) {
    case 3: // Transfer
      if (data.length < 9 || acc.length < 3) return null;
      return { type: "transfer", info: { amount: amountInfo(1), authority: signerOf(2), destination: acc[1], source: acc[0] } };
    case 12: // TransferChecked
      if (data.length < 10 || acc.length < 4) return null;
      return {
        type: "transferChecked",
        info: { authority: signerOf(3), destination: acc[2], mint: acc[1], source: acc[0], tokenAmount: uiTokenAmount(readU64(data, 1), data[9]) },
      };
    case 7: // MintTo
      if (data.length < 9 || acc.length < 3) return null;
      return { type: "mintTo", info: { account: acc[1], amount: amountInfo(1), mint: acc[0], mintAuthority: signerOf(2) } };
    case 14: // MintToChecked
      if (data.length < 10 || acc.length < 3) return null;
      return { type: "mintToChecked", info: { account: acc[1], mint: acc[0], mintAuthority: signerOf(2), tokenAmount: uiTokenAmount(readU64(data, 1), data[9]) } };
    case 8: // Burn
      if (data.length < 9 || acc.length < 3) return null;
      return { type: "burn", info: { account: acc[0], amount: amountInfo(1), authority: signerOf(2), mint: acc[1] } };
    case 15: // BurnChecked
      if (data.length < 10 || acc.length < 3) return null;
      return { type: "burnChecked", info: { account: acc[0], authority: signerOf(2), mint: acc[1], tokenAmount: uiTokenAmount(readU64(data, 1), data[9]) } };
    case 9: // CloseAccount
      if (acc.length < 3) return null;
      return { type: "closeAccount", info: { account: acc[0], destination: acc[1], owner: signerOf(2) } };
    case 4: // Approve
      if (data.length < 9 || acc.length < 3) return null;
      return { type: "approve", info: { amount: amountInfo(1), delegate: acc[1], owner: signerOf(2), source: acc[0] } };
    case 5: // Revoke
      if (acc.length < 2) return null;
      return { type: "revoke", info: { owner: signerOf(1), source: acc[0] } };
    case 18: // InitializeAccount3
      if (data.length < 33 || acc.length < 2) return null;
      return { type: "initializeAccount3", info: { account: acc[0], mint: acc[1], owner: toBase58(data.subarray(1, 33)) } };
    case 1: // InitializeAccount
      if (acc.length < 4) return null;
      return { type: "initializeAccount", info: { account: acc[0], mint: acc[1], owner: acc[2], rentSysvar: acc[3] } };
    case 20: // InitializeMint2
    case 0: { // InitializeMint
      if (data.length < 35 || acc.length < 1) return null;
      const info = { decimals: data[1], mint: acc[0], mintAuthority: toBase58(data.subarray(2, 34)) };
      if (data[34] === 1 && data.length >= 67) info.freezeAuthority = toBase58(data.subarray(35, 67));
      if (data[0] === 0 && acc[1]) info.rentSysvar = acc[1];
      return { type: data[0] === 0 ? "initializeMint" : "initializeMint2", info };
    }
    case 17: // SyncNative
      if (acc.length < 1) return null;
      return { type: "syncNative", info: { account: acc[0] } };
    case 21: // GetAccountDataSize
      if (acc.length < 1) return null;
      return { type: "getAccountDataSize", info: { mint: acc[0] } };
    case 22: // InitializeImmutableOwner
      if (acc.length < 1) return null;
      return { type: "initializeImmutableOwner", info: { account: acc[0] } };
    default:
      return null;
  }
}

function parseATA(data, acc) {
  if (acc.length < 6) return null;
  const info = { account: acc[1], mint: acc[3], source: acc[0], systemProgram: acc[4], tokenProgram: acc[5], wallet: acc[2] };
  if (data.length === 0 || data[0] === 0) return { type: "create", info };
  if (data[0] === 1) return { type: "createIdempotent", info };
  return null;
}

/**
 * A jsonParsed instruction: {program, programId, parsed, stackHeight} when
 * the program is known and the data parses, else
 * {accounts, data, programId, stackHeight}.
 */
export function parsedInstruction(keys, ix, stackHeight) {
  const programId = keys[ix.programIdIndex];
  const acc = ix.accounts.map((a) => keys[a] ?? "");
  let program = null;
  let parsed = null;
  try {
    if (programId === SYSTEM_PROGRAM) {
      program = "system";
      parsed = parseSystem(ix.data, acc);
    } else if (programId === TOKEN_PROGRAM || programId === TOKEN_2022_PROGRAM) {
      program = programId === TOKEN_PROGRAM ? "spl-token" : "spl-token-2022";
      parsed = parseToken(ix.data, acc);
    } else if (programId === ATA_PROGRAM) {
      program = "spl-associated-token-account";
      parsed = parseATA(ix.data, acc);
    } else if (MEMO_PROGRAMS.has(programId)) {
      program = "spl-memo";
      parsed = Buffer.from(ix.data).toString("utf8");
    }
  } catch {
    parsed = null;
  }
  if (parsed !== null) return { program, programId, parsed, stackHeight };
  return { accounts: acc, data: toBase58(ix.data), programId, stackHeight };
}
