// The hosted checkout page: chain choice, deposit details, countdown and
// live status (the sessionStatus subscription, polling GET {api}/status
// every 3 seconds while it is down), each status shown as its own view
// (page.html renders the same views for the first paint).
(function () {
  "use strict";
  var root = document.getElementById("checkout");
  if (!root) return;
  var api = root.dataset.api;
  var page = root.dataset.page;
  var successURL = root.dataset.successUrl || "";
  var embed = root.dataset.embed === "true";
  var expiresAt = Date.parse(root.dataset.expiresAt);
  var POLL_MS = 3000;
  var terminal = { confirmed: true, expired: true, cancelled: true };
  var waiting = { pending: true, detecting: true, underpaid: true };
  var messages = {
    pending: "Choose a chain to get the deposit address.",
    detecting: "Waiting for your payment…",
    underpaid: "Part of the payment arrived: send the amount still due.",
    confirming: "Payment received, waiting for confirmations…",
    confirmed: "Payment confirmed. Thank you!",
    expired: "This checkout has expired.",
    cancelled: "This checkout was cancelled."
  };
  var REDIRECT_MS = 3000; // long enough to read the success view

  function $(id) { return document.getElementById(id); }
  function show(id, on) { var el = $(id); if (el) el.hidden = !on; }
  function setText(id, text) { var el = $(id); if (el) el.textContent = text; }

  // Amounts are exact: USDC has 6 decimals, so every amount is an integer
  // number of micro-units (BigInt). A JSON number's shortest string form
  // (what String gives for the parsed value) has the digits the server
  // wrote; it is read digit by digit, never used in float arithmetic.
  var MICRO = 6;
  function toMicro(v) {
    var m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i.exec(String(v).trim());
    if (!m) return null;
    var frac = m[3] || "";
    var digits = BigInt(m[2] + frac);
    var shift = MICRO - frac.length + (m[4] ? parseInt(m[4], 10) : 0);
    if (shift >= 0) {
      digits *= 10n ** BigInt(shift);
    } else {
      var div = 10n ** BigInt(-shift);
      if (digits % div !== 0n) return null; // finer than a micro-unit
      digits /= div;
    }
    return m[1] ? -digits : digits;
  }
  // formatMicro writes at least two decimals (12.50), more when the
  // amount has them, like the server's formatAmount.
  function formatMicro(u) {
    var neg = u < 0n;
    if (neg) u = -u;
    var s = (u % 1000000n).toString().padStart(MICRO, "0").replace(/0+$/, "");
    while (s.length < 2) s += "0";
    return (neg ? "-" : "") + (u / 1000000n).toString() + "." + s;
  }
  // micro reads an optional amount of a status answer (null when absent).
  function micro(v) { return v === undefined || v === null ? null : toMicro(v); }

  // Countdown to expires_at, while the page waits for a payment.
  var countdown = $("countdown");
  function tick() {
    if (!countdown || isNaN(expiresAt)) return;
    var s = Math.max(0, Math.floor((expiresAt - Date.now()) / 1000));
    var m = Math.floor(s / 60), r = s % 60;
    countdown.textContent = (m >= 60 ? Math.floor(m / 60) + "h " + (m % 60) + "m" : m + ":" + (r < 10 ? "0" : "") + r);
  }
  var tickTimer = null;
  if (waiting[root.dataset.state]) {
    tick();
    tickTimer = setInterval(tick, 1000);
  }

  // Status.
  var pollTimer = null;
  var polls = 0;
  var redirecting = false;
  function setStatus(st) {
    var el = $("status");
    el.textContent = st.status;
    el.dataset.status = st.status;
    root.dataset.status = st.status;
    root.dataset.polls = String(polls);
    render(st);
    if (terminal[st.status]) {
      clearInterval(pollTimer);
    }
  }
  // render shows the view of a status answer, as page.html renders it.
  function render(st) {
    // The service says what the payments amount to (agentpay.ProgressOf):
    // the state, what is still due, what was paid beyond the amount.
    var paid = micro(st.amount_paid), due = micro(st.amount_due), excess = micro(st.amount_excess);
    var state = st.state || st.status;
    root.dataset.state = state;
    var wait = !!waiting[state];
    show("expiry", wait);
    if (!wait) { clearInterval(tickTimer); tickTimer = null; }
    if (state !== "pending" && state !== "detecting") show("choose", false);
    if (!wait) show("pay", false);
    var under = state === "underpaid";
    show("underpaid", under);
    show("send-full", !under);
    show("send-rest", under);
    show("qr", !under);
    show("wallet-link", !under);
    show("rest-hint", under);
    if (under) {
      setText("paid", formatMicro(paid));
      setText("due", formatMicro(due));
      setText("due-again", formatMicro(due));
      show("change-chain", false);
    }
    show("progress", state === "confirming");
    // Each new confirmation is published like a status change, so the
    // subscription (or the polling that stands in for it) moves the bar.
    if (state === "confirming") {
      var bar = $("confirm-bar");
      var n = Number(st.confirmations) || 0, req = Number(st.confirmations_required) || 0;
      setText("conf-n", String(n));
      show("conf-of", req > 0);
      if (req > 0) {
        setText("conf-m", String(req));
        bar.max = req;
        bar.value = Math.min(n, req);
      } else {
        bar.removeAttribute("value"); // indeterminate
      }
    }
    show("done", state === "confirmed");
    var ended = state === "expired" || state === "cancelled";
    show("ended", ended);
    show("ended-expired", state === "expired");
    show("ended-cancelled", state === "cancelled");
    if (ended && paid !== null) {
      show("ended-paid", paid > 0n);
      if (paid > 0n) setText("ended-paid-amount", formatMicro(paid));
    }
    var over = excess !== null && excess > 0n;
    show("overpaid", over);
    if (over) setText("excess", formatMicro(excess));
    show("cancel", wait);
    showWalletPay();
    var msg = messages[state] || "";
    if (under) msg = "Received " + formatMicro(paid) + " USDC; " + formatMicro(due) + " USDC still due.";
    if (state === "confirming" && Number(st.confirmations_required) > 0) {
      msg = "Payment received: " + (Number(st.confirmations) || 0) + " of " + st.confirmations_required + " confirmations.";
    }
    setText("status-message", msg);
    if (state === "confirmed") loadReceipt();
    if (state === "confirmed" && successURL && !redirecting) {
      redirecting = true;
      setTimeout(function () { go(successURL); }, REDIRECT_MS);
    }
  }
  // loadReceipt fills the receipt (the confirmed payments and their
  // transactions) from the page as the server renders it now, when the
  // page saw the confirmation live.
  var receiptLoaded = false;
  function loadReceipt() {
    var box = $("receipt");
    if (!box || receiptLoaded || box.children.length > 0) return;
    receiptLoaded = true;
    fetch(location.pathname + location.search, { cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : ""; })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("receipt");
        if (fresh) box.replaceChildren.apply(box, Array.prototype.slice.call(fresh.childNodes));
      })
      .catch(function () { receiptLoaded = false; });
  }
  function go(url) {
    if (embed) {
      try { window.top.location.href = url; return; } catch (e) { /* cross-origin parent */ }
    }
    window.location.href = url;
  }
  function poll() {
    polls++;
    root.dataset.polls = String(polls);
    var wsSeen = wsMessages;
    fetch(api + "/status", { headers: { "Accept": "application/json" }, cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (st) { if (st && wsMessages === wsSeen) setStatus(st); })
      .catch(function () { /* keep polling */ });
  }
  var wsLive = false; // the subscription is delivering
  // wsMessages counts the subscription's messages. A poll's answer that
  // arrives after one of them may be older than it (read before the
  // change the message brought) and would put the page back, with
  // polling stopped, until the next change: it is dropped. The
  // subscription delivers every change after its first message, and
  // polling starts again at once when the websocket closes.
  var wsMessages = 0;
  function startPolling() {
    if (pollTimer || wsLive || terminal[root.dataset.status]) return;
    root.dataset.transport = "poll";
    poll();
    pollTimer = setInterval(poll, POLL_MS);
  }
  function stopPolling() {
    clearInterval(pollTimer);
    pollTimer = null;
  }

  // The GraphQL subscription sessionStatus(externalId) over the websocket
  // (graphql-transport-ws). Polling runs until it delivers and again
  // whenever it drops; it is retried with a growing delay.
  var graphqlPath = root.dataset.graphql;
  var wsRetry = 0;
  var SUBSCRIPTION = "subscription($id: String!) { sessionStatus(externalId: $id) { " +
    "status amountPaid chain token confirmations requiredConfirmations state amountDue amountExcess } }";
  function subscribe() {
    if (!graphqlPath || !window.WebSocket || terminal[root.dataset.status]) return;
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + graphqlPath;
    var ws;
    try { ws = new WebSocket(url, "graphql-transport-ws"); } catch (e) { return; }
    root.dataset.ws = "connecting";
    ws.onopen = function () { root.dataset.ws = "open"; ws.send(JSON.stringify({ type: "connection_init", payload: {} })); };
    ws.onmessage = function (ev) {
      var m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      if (m.type === "connection_ack") {
        root.dataset.ws = "ack";
        ws.send(JSON.stringify({ id: "status", type: "subscribe", payload: {
          query: SUBSCRIPTION, variables: { id: root.dataset.externalId } } }));
      } else if (m.type === "ping") {
        ws.send(JSON.stringify({ type: "pong" }));
      } else if (m.type === "next" && m.payload && m.payload.data && m.payload.data.sessionStatus) {
        var s = m.payload.data.sessionStatus;
        wsMessages++;
        if (!wsLive) { wsLive = true; wsRetry = 0; stopPolling(); root.dataset.transport = "ws"; }
        setStatus({
          status: String(s.status).toLowerCase(),
          amount_paid: s.amountPaid,
          chain: s.chain,
          token: s.token,
          confirmations: s.confirmations,
          confirmations_required: s.requiredConfirmations,
          state: s.state,
          amount_due: s.amountDue,
          amount_excess: s.amountExcess
        });
        if (terminal[root.dataset.status]) ws.close(1000);
      } else if (m.type === "error" || m.type === "complete") {
        root.dataset.ws = m.type + (m.payload ? " " + JSON.stringify(m.payload) : "");
        ws.close(1000);
      }
    };
    ws.onclose = function (ev) {
      if (root.dataset.ws.indexOf("error") !== 0) root.dataset.ws = "closed " + ev.code;
      wsLive = false;
      if (terminal[root.dataset.status]) return;
      startPolling();
      wsRetry++;
      setTimeout(subscribe, Math.min(60000, 2000 * Math.pow(2, wsRetry)));
    };
  }

  // Chain choice.
  function select(btn) {
    var chain = btn.dataset.chain, token = btn.dataset.token;
    var err = $("choose-error");
    err.hidden = true;
    var buttons = document.querySelectorAll("button.chain");
    buttons.forEach(function (b) { b.disabled = true; });
    fetch(api + "/select", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify({ chain: chain, token: token })
    }).then(function (r) {
      return r.json().then(function (body) { return { ok: r.ok, body: body }; });
    }).then(function (res) {
      if (!res.ok) throw new Error(res.body && res.body.detail || "The payment method could not be selected.");
      var d = res.body;
      $("address").textContent = d.address;
      var amt = $("amount-token");
      amt.textContent = formatAmount(d.amount_token);
      amt.dataset.baseUnits = String(d.amount_base_units);
      amt.dataset.decimals = String(d.decimals);
      $("token").textContent = d.token;
      $("chain-name").textContent = btn.textContent;
      $("wallet-link").setAttribute("href", d.payment_uri);
      setWalletPay(d.eip712_domain ? {
        chain: d.chain, label: btn.textContent, to: d.address, value: String(d.amount_base_units),
        domain: { name: d.eip712_domain.name, version: d.eip712_domain.version,
          chainId: d.eip712_domain.chain_id, verifyingContract: d.eip712_domain.verifying_contract }
      } : null);
      $("qr").textContent = "";
      show("choose", false);
      show("pay", true);
      show("change-chain", true);
      return fetch(page + "/qr.svg?chain=" + encodeURIComponent(d.chain), { cache: "no-store" })
        .then(function (r) { return r.ok ? r.text() : ""; })
        .then(function (svg) {
          if (svg.indexOf("<svg") === 0) $("qr").innerHTML = svg;
        });
    }).then(startPolling, function (e) {
      err.textContent = e.message;
      err.hidden = false;
    }).then(function () {
      buttons.forEach(function (b) { b.disabled = false; });
    });
  }
  function formatAmount(n) {
    var s = String(n);
    var i = s.indexOf(".");
    if (i < 0) return s + ".00";
    if (s.length - i - 1 < 2) return s + "0";
    return s;
  }
  document.querySelectorAll("button.chain").forEach(function (b) {
    b.addEventListener("click", function () { select(b); });
  });
  var change = $("change-chain");
  if (change) change.addEventListener("click", function () { show("pay", false); show("choose", true); });

  // Copy.
  var copy = $("copy");
  if (copy) copy.addEventListener("click", function () {
    var text = $("address").textContent;
    var done = function () { copy.textContent = "Copied"; setTimeout(function () { copy.textContent = "Copy"; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
    } else { fallbackCopy(text); done(); }
  });
  function fallbackCopy(text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "absolute"; ta.style.left = "-9999px";
    document.body.appendChild(ta);
    ta.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing to do */ }
    document.body.removeChild(ta);
  }

  // Pay with browser wallet (EVM, when an EIP-1193 provider is present):
  // the wallet signs an EIP-3009 TransferWithAuthorization of exactly the
  // amount to the deposit address under the token's EIP-712 domain, and
  // the service relays it (the treasury pays the gas). The typed data is
  // plain JSON; the wallet does the signing. The payment then shows as
  // any payment does, through the live status.
  var payWith = null; // {chain, label, to, value (base units, digits), domain}
  var walletBusy = false;
  var WALLET_TTL_S = 600; // how long a signed authorization may be relayed
  function provider() {
    var eth = window.ethereum;
    return eth && typeof eth.request === "function" ? eth : null;
  }
  function setWalletPay(p) {
    payWith = p;
    setWalletError("");
    showWalletPay();
  }
  function showWalletPay() {
    // Not while underpaid: the authorization is for the full amount.
    show("wallet-pay", !!payWith && !!provider() && root.dataset.state === "detecting" && root.dataset.walletPaid !== "true");
  }
  function setWalletError(text) {
    setText("wallet-pay-error", text);
    show("wallet-pay-error", !!text);
  }
  // WalletRefusal is a message for the customer, shown as it is.
  function WalletRefusal(message) { this.message = message; }
  function walletMessage(e) {
    if (e instanceof WalletRefusal) return e.message;
    var code = e && e.code;
    if (code === undefined && e && e.data && e.data.originalError) code = e.data.originalError.code;
    if (code === 4001) return "You declined the request in your wallet. Nothing was paid: try again, or send the amount yourself below.";
    if (code === -32002) return "Your wallet is already showing a request: open it to continue.";
    return "Your wallet could not sign the payment" + (e && e.message ? ": " + e.message : ".") + " Nothing was paid.";
  }
  function hex(bytes) {
    var s = "0x";
    for (var i = 0; i < bytes.length; i++) s += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
    return s;
  }
  function ensureChain(eth, p) {
    var want = Number(p.domain.chainId);
    var wrong = new WalletRefusal("Your wallet is on another network. Switch it to " + p.label +
      " (chain id " + want + ") and try again.");
    return eth.request({ method: "eth_chainId" }).then(function (id) {
      if (parseInt(id, 16) === want) return;
      return eth.request({ method: "wallet_switchEthereumChain", params: [{ chainId: "0x" + want.toString(16) }] })
        .then(function () { return eth.request({ method: "eth_chainId" }); }, function (e) {
          if (e && e.code === 4001) throw e;
          throw wrong;
        })
        .then(function (now) { if (parseInt(now, 16) !== want) throw wrong; });
    });
  }
  function payWithWallet() {
    var eth = provider(), p = payWith;
    if (!eth || !p || walletBusy) return;
    walletBusy = true;
    var btn = $("wallet-pay-button");
    btn.disabled = true;
    setWalletError("");
    var from;
    var auth = {
      chain: p.chain, to: p.to, value: Number(p.value), valid_after: 0,
      valid_before: Math.floor(Date.now() / 1000) + WALLET_TTL_S,
      nonce: hex(crypto.getRandomValues(new Uint8Array(32)))
    };
    eth.request({ method: "eth_requestAccounts" }).then(function (accounts) {
      if (!accounts || !accounts.length) throw new WalletRefusal("Your wallet shared no account. Unlock it and try again.");
      from = String(accounts[0]);
      return ensureChain(eth, p);
    }).then(function () {
      var typed = {
        types: {
          EIP712Domain: [
            { name: "name", type: "string" }, { name: "version", type: "string" },
            { name: "chainId", type: "uint256" }, { name: "verifyingContract", type: "address" }
          ],
          TransferWithAuthorization: [
            { name: "from", type: "address" }, { name: "to", type: "address" }, { name: "value", type: "uint256" },
            { name: "validAfter", type: "uint256" }, { name: "validBefore", type: "uint256" }, { name: "nonce", type: "bytes32" }
          ]
        },
        primaryType: "TransferWithAuthorization",
        domain: { name: p.domain.name, version: p.domain.version, chainId: Number(p.domain.chainId), verifyingContract: p.domain.verifyingContract },
        message: {
          from: from, to: p.to, value: p.value, validAfter: String(auth.valid_after),
          validBefore: String(auth.valid_before), nonce: auth.nonce
        }
      };
      return eth.request({ method: "eth_signTypedData_v4", params: [from, JSON.stringify(typed)] });
    }).then(function (signature) {
      auth.from = from;
      auth.signature = String(signature);
      setText("status-message", "Sending your payment…");
      return fetch(api + "/authorization", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify(auth)
      }).then(function (r) {
        return r.json().then(function (body) { return { ok: r.ok, body: body }; }, function () { return { ok: false, body: null }; });
      });
    }).then(function (res) {
      if (!res.ok) {
        throw new WalletRefusal((res.body && res.body.detail) ? "The payment was not made: " + res.body.detail
          : "The payment was not made. Please try again.");
      }
      if (res.body.status === "failed") {
        throw new WalletRefusal("The network refused the transfer: nothing was paid. Please try again.");
      }
      root.dataset.walletPaid = "true";
      show("wallet-pay", false);
      setText("status-message", "Payment sent from your wallet: waiting for the network…");
      startPolling();
    }).catch(function (e) {
      setWalletError(walletMessage(e));
      setText("status-message", messages[root.dataset.state] || "");
    }).then(function () {
      walletBusy = false;
      btn.disabled = false;
    });
  }
  var walletBox = $("wallet-pay");
  if (walletBox) {
    var wd = walletBox.dataset;
    if (wd.chainId && wd.domainName) {
      payWith = {
        chain: wd.chain, label: $("chain-name").textContent, to: wd.to, value: wd.value,
        domain: { name: wd.domainName, version: wd.domainVersion, chainId: Number(wd.chainId), verifyingContract: wd.verifyingContract }
      };
    }
    $("wallet-pay-button").addEventListener("click", payWithWallet);
    // Some wallets inject their provider after the page's scripts ran.
    window.addEventListener("ethereum#initialized", showWalletPay, { once: true });
  }

  // The first paint is the server's; this sets what only the script
  // does from it (the status message, the redirect of a confirmed page).
  render({
    status: root.dataset.status,
    amount_paid: root.dataset.amountPaid,
    confirmations: root.dataset.confirmations,
    confirmations_required: root.dataset.required || null
  });
  startPolling();
  subscribe();
})();
