// Solana PubSub (the websocket API) on the same port as HTTP:
// signatureSubscribe, accountSubscribe, logsSubscribe, slotSubscribe,
// rootSubscribe and their unsubscribes, notifying at the commitment asked.

import { WebSocketServer } from "ws";
import { parseJSON, stringify, toBase58, bigValue, fromBase58Exact } from "./codec.js";
import { RpcError, invalidParams, METHOD_NOT_FOUND } from "./errors.js";
import { normaliseCommitment } from "./chain.js";
import { encodeAccount, API_VERSION } from "./rpc.js";

const ENCODINGS = new Set(["binary", "base58", "base64", "base64+zstd", "jsonParsed"]);

export class PubSub {
  constructor(chain) {
    this.chain = chain;
    this.nextId = 0;
    this.subs = new Map(); // id -> subscription
    this.pendingTxs = []; // records not yet delivered to every logs subscription
    this.lastSlot = chain.slot;
    chain.onChange = (rec) => this._changed(rec);
  }

  attach(server) {
    const wss = new WebSocketServer({ server });
    wss.on("connection", (ws) => {
      ws.subs = new Set();
      ws.on("message", (data) => this._message(ws, data.toString("utf8")));
      ws.on("close", () => {
        for (const id of ws.subs) this.subs.delete(id);
      });
      ws.on("error", () => {});
    });
    this.wss = wss;
    return wss;
  }

  _message(ws, text) {
    let req;
    try {
      req = parseJSON(text);
    } catch {
      ws.send(stringify({ jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null }));
      return;
    }
    const reqs = Array.isArray(req) ? req : [req];
    const out = reqs.map((r) => this._handle(ws, r));
    ws.send(stringify(Array.isArray(req) ? out : out[0]));
    this._changed();
  }

  _handle(ws, req) {
    const id = req && typeof req === "object" && "id" in req ? bigValue(req.id) : null;
    try {
      if (!req || typeof req !== "object" || req.jsonrpc !== "2.0" || typeof req.method !== "string") throw new RpcError(-32600, "Invalid request");
      const p = Array.isArray(req.params) ? req.params : [];
      this.chain.tick();
      const cfg = (i) => (p[i] && typeof p[i] === "object" && !Array.isArray(p[i]) ? p[i] : {});
      let sub;
      switch (req.method) {
        case "signatureSubscribe": {
          let sig;
          try {
            sig = toBase58(fromBase58Exact(p[0], 64));
          } catch {
            throw invalidParams("Invalid Request: Invalid signature");
          }
          sub = { kind: "signature", sig, commitment: normaliseCommitment(cfg(1).commitment) };
          break;
        }
        case "accountSubscribe": {
          let key;
          try {
            key = fromBase58Exact(p[0], 32);
          } catch {
            throw invalidParams("Invalid Request: Invalid pubkey provided");
          }
          const enc = cfg(1).encoding ?? "binary";
          if (!ENCODINGS.has(enc)) throw invalidParams(`Invalid params: unknown variant \`${enc}\``);
          sub = { kind: "account", key, address: toBase58(key), encoding: enc, commitment: normaliseCommitment(cfg(1).commitment), dirtySlot: null };
          break;
        }
        case "logsSubscribe": {
          const f = p[0];
          let mentions = null;
          if (f && typeof f === "object" && Array.isArray(f.mentions)) {
            if (f.mentions.length !== 1) throw invalidParams("Invalid Request: Only 1 address supported");
            try {
              mentions = toBase58(fromBase58Exact(f.mentions[0], 32));
            } catch {
              throw invalidParams("Invalid Request: Invalid pubkey provided");
            }
          } else if (f !== "all" && f !== "allWithVotes") {
            throw invalidParams("Invalid params: expected \"all\", \"allWithVotes\" or {\"mentions\": [pubkey]}");
          }
          sub = { kind: "logs", mentions, commitment: normaliseCommitment(cfg(1).commitment), lastSeq: this.chain.seq };
          break;
        }
        case "slotSubscribe":
          sub = { kind: "slot", lastSlot: this.chain.slot };
          break;
        case "rootSubscribe":
          sub = { kind: "root", lastRoot: this.chain.commitmentSlot("finalized") };
          break;
        case "signatureUnsubscribe":
        case "accountUnsubscribe":
        case "logsUnsubscribe":
        case "slotUnsubscribe":
        case "rootUnsubscribe": {
          const sid = Number(p[0]);
          const s = this.subs.get(sid);
          if (!s || s.ws !== ws || `${s.kind}Unsubscribe` !== req.method) throw invalidParams("Invalid subscription id.");
          this.subs.delete(sid);
          ws.subs.delete(sid);
          return { jsonrpc: "2.0", result: true, id };
        }
        default:
          throw new RpcError(METHOD_NOT_FOUND, "Method not found");
      }
      sub.id = this.nextId++;
      sub.ws = ws;
      this.subs.set(sub.id, sub);
      ws.subs.add(sub.id);
      return { jsonrpc: "2.0", result: sub.id, id };
    } catch (e) {
      if (e instanceof RpcError) return { jsonrpc: "2.0", error: e.toJSON(), id };
      return { jsonrpc: "2.0", error: { code: -32603, message: `Internal error: ${e?.message ?? e}` }, id };
    }
  }

  _notify(sub, method, result) {
    if (sub.ws.readyState !== 1) return;
    sub.ws.send(stringify({ jsonrpc: "2.0", method, params: { result, subscription: sub.id } }));
  }

  _changed(rec) {
    if (this.subs.size === 0) {
      this.pendingTxs.length = 0;
      return;
    }
    const chain = this.chain;
    if (rec) {
      this.pendingTxs.push(rec);
      for (const sub of this.subs.values()) {
        if (sub.kind === "account" && rec.tx.message.accountKeys.some((k) => toBase58(k) === sub.address)) sub.dirtySlot = rec.slot;
      }
    }
    const ctx = (slot) => ({ apiVersion: API_VERSION, slot });
    for (const sub of [...this.subs.values()]) {
      switch (sub.kind) {
        case "signature": {
          const r = chain.txs.get(sub.sig);
          if (r && r.slot <= chain.commitmentSlot(sub.commitment)) {
            this._notify(sub, "signatureNotification", { context: ctx(r.slot), value: { err: r.err } });
            this.subs.delete(sub.id);
            sub.ws.subs.delete(sub.id);
          }
          break;
        }
        case "account": {
          if (sub.dirtySlot !== null && sub.dirtySlot <= chain.commitmentSlot(sub.commitment)) {
            const a = chain.account(sub.key);
            this._notify(sub, "accountNotification", {
              context: ctx(chain.commitmentSlot(sub.commitment)),
              value: a ? encodeAccount(chain, a, sub.encoding) : null,
            });
            sub.dirtySlot = null;
          }
          break;
        }
        case "logs": {
          const top = chain.commitmentSlot(sub.commitment);
          for (const r of this.pendingTxs) {
            if (r.seq <= sub.lastSeq) continue;
            if (r.slot > top) break;
            sub.lastSeq = r.seq;
            if (sub.mentions && !r.tx.message.accountKeys.some((k) => toBase58(k) === sub.mentions)) continue;
            this._notify(sub, "logsNotification", { context: ctx(r.slot), value: { err: r.err, logs: r.logs, signature: r.signature } });
          }
          break;
        }
        case "slot":
          sub.lastSlot = Math.max(sub.lastSlot, chain.slot - 1000);
          while (sub.lastSlot < chain.slot) {
            sub.lastSlot++;
            this._notify(sub, "slotNotification", { parent: sub.lastSlot - 1, root: chain.commitmentSlot("finalized"), slot: sub.lastSlot });
          }
          break;
        case "root": {
          const root = chain.commitmentSlot("finalized");
          sub.lastRoot = Math.max(sub.lastRoot, root - 1000);
          while (sub.lastRoot < root) {
            sub.lastRoot++;
            this._notify(sub, "rootNotification", sub.lastRoot);
          }
          break;
        }
      }
    }
    // Drop records every logs subscription has seen.
    let minSeq = Infinity;
    for (const sub of this.subs.values()) if (sub.kind === "logs") minSeq = Math.min(minSeq, sub.lastSeq);
    while (this.pendingTxs.length && this.pendingTxs[0].seq <= minSeq) this.pendingTxs.shift();
  }
}
