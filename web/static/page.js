// The hosted checkout page: chain choice, deposit details, countdown and
// live status (polling GET {api}/status every 3 seconds).
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
  var messages = {
    pending: "Choose a chain to get the deposit address.",
    detecting: "Waiting for your payment…",
    confirming: "Payment received, waiting for confirmations…",
    confirmed: "Payment confirmed. Thank you!",
    expired: "This checkout has expired.",
    cancelled: "This checkout was cancelled."
  };

  function $(id) { return document.getElementById(id); }
  function show(id, on) { var el = $(id); if (el) el.hidden = !on; }

  // Countdown to expires_at.
  var countdown = $("countdown");
  function tick() {
    if (!countdown || isNaN(expiresAt)) return;
    var s = Math.max(0, Math.floor((expiresAt - Date.now()) / 1000));
    var m = Math.floor(s / 60), r = s % 60;
    countdown.textContent = (m >= 60 ? Math.floor(m / 60) + "h " + (m % 60) + "m" : m + ":" + (r < 10 ? "0" : "") + r);
  }
  tick();
  var tickTimer = setInterval(tick, 1000);

  // Status.
  var pollTimer = null;
  var polls = 0;
  function setStatus(st) {
    var el = $("status");
    el.textContent = st.status;
    el.dataset.status = st.status;
    root.dataset.status = st.status;
    root.dataset.polls = String(polls);
    var conf = $("confirmations");
    if (st.status === "confirming" && st.confirmations_required) {
      conf.textContent = "(" + st.confirmations + "/" + st.confirmations_required + " confirmations)";
    } else {
      conf.textContent = "";
    }
    $("status-message").textContent = messages[st.status] || "";
    if (st.status !== "pending" && st.status !== "detecting") {
      show("choose", false);
      show("change-chain", false);
    }
    if (terminal[st.status]) {
      clearInterval(pollTimer);
      clearInterval(tickTimer);
      if (st.status === "confirmed" && successURL) {
        setTimeout(function () { go(successURL); }, 1000);
      }
    }
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
    "status amountPaid chain token confirmations requiredConfirmations } }";
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
          confirmations_required: s.requiredConfirmations
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

  startPolling();
  subscribe();
})();
