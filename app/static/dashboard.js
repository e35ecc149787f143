// The merchant dashboard (docs/dashboard.md): everything through the
// public GraphQL API. The viewer's own calls (which merchants it manages,
// openDashboard, members) carry the session cookie and its CSRF token; the
// merchant's calls carry the dashboard session opened for the merchant and
// mode picked (X-Dashboard-Session), exactly as a merchant's own dashboard
// would carry its secret key, and the live updates come from the
// merchantEvents subscription with the same credential.
(function () {
  // Every GraphQL operation of the page, in one place.
  var Q = {
    merchants: "{ viewer { merchants { id name role } } }",
    members: "{ viewer { merchants { id members { id email role acceptedAt } } } }",
    open: "mutation($m: ID!, $mode: Mode!) { openDashboard(merchantId: $m, mode: $mode) { token expiresAt mode role } }",
    invite: "mutation($m: ID!, $e: String!, $r: MemberRole!) { inviteMerchantMember(merchantId: $m, email: $e, role: $r) { id } }",
    remove: "mutation($m: ID!, $id: ID!) { removeMerchantMember(merchantId: $m, memberId: $id) }",
    volume: "query($from: Time!, $to: Time!) { paymentVolume(from: $from, to: $to) { day chain status count volume } }",
    sessions: "query($where: SessionFilter) { sessions(first: 50, where: $where) { totalCount edges { node { externalId amountUsd currency status createdAt } } } }",
    cancel: "mutation($id: String!) { cancelSession(externalId: $id) { externalId status } }",
    refund: "mutation($id: String!, $in: RefundInput, $key: String) { createRefund(externalId: $id, input: $in, idempotencyKey: $key) { refund { externalId status } replayed } }",
    brand: "query($c: String!) { brandColors(color: $c) { background text contrast link } }",
    createSession: "mutation($in: CreateSessionInput!) { createSession(input: $in) { externalId } }",
    session: "query($id: String!) { session(externalId: $id) { externalId status amountUsd currency checkoutUrl attention { kind paymentExternalId advice } } " +
      "payments(first: 20, where: {sessionExternalId: $id}) { edges { node { externalId chain txHash tokenAmount amountUsd confirmations status } } } " +
      "refunds(externalId: $id) { externalId amountUsd status txHash error createdAt payment { externalId } } " +
      "webhookEvents(first: 10, where: {sessionExternalId: $id}) { edges { node { id eventType createdAt " +
      "deliveries { id url status attemptLog { at statusCode error durationMs } } } } } }",
    redeliver: "mutation($id: ID!) { redeliverWebhook(eventId: $id) { id } }",
    merchant: "{ merchant { name webhookUrl settlementType settlementAddress settlementChain brandColor acceptedTokens { chain token } publicKeys { live test } } }",
    events: "{ webhookEvents(first: 10) { edges { node { id eventType createdAt deliveries { id url status attemptLog { at statusCode error durationMs } } } } } }",
    saveWebhook: "mutation($url: String!) { updateMerchant(input: {webhookUrl: $url}) { id } }",
    rollSecret: "mutation { rollWebhookSecret { webhookSecret livemode warning } }",
    testWebhook: "mutation { sendTestWebhook { id } }",
    rollKeys: "mutation { rollKeys { publicKey secretKey livemode warning } }",
    saveSettings: "mutation($in: UpdateMerchantInput!) { updateMerchant(input: $in) { id } }",
    feed: "subscription($after: Int64) { merchantEvents(after: $after) { cursor kind eventId eventType } }"
  };
  var MODES = {test: "TEST", live: "LIVE"}, OWNER = "OWNER", CHAINS = ["base", "arbitrum", "ethereum", "polygon", "solana"];
  // Enum values: the page shows and compares them lower-cased (shown()),
  // and sends filter values as the API spells them (asEnum), so a change of
  // the API's enum spelling is this one line.
  function asEnum(v) { return String(v).toUpperCase(); }
  var money = window.agentpayUI.money, confirmAction = window.agentpayUI.confirm;
  // Lists and tables render through agentpayUI.keyed: the live feed
  // refreshes the view on every event, and a row that did not change
  // keeps its node (and a refund form its typed amount and focus), so
  // nothing moves under a person's pointer.
  var keyed = window.agentpayUI.keyed;
  function shown(v) { return String(v).toLowerCase(); }

  var root = document.getElementById("dashboard");
  var endpoint = root.dataset.graphql, csrf = root.dataset.csrf;
  var errorBox = document.getElementById("dash-error"), notice = document.getElementById("dash-notice");
  var picker = document.getElementById("merchant-picker"), modeSwitch = document.getElementById("mode-switch");
  // ?merchant=<id> and ?mode=live|test pick what opens (the sign-up's
  // "open the dashboard", the live-mode link of test mode's settings).
  var params = new URLSearchParams(location.search);
  if (params.get("mode") === "live" || params.get("mode") === "test") { sessionStorage.setItem("dash.mode", params.get("mode")); }
  if (params.get("merchant")) { sessionStorage.setItem("dash.merchant", params.get("merchant")); }
  if (params.has("mode") || params.has("merchant")) { history.replaceState(null, "", location.pathname + location.hash); }
  var state = {merchants: [], merchant: null, mode: sessionStorage.getItem("dash.mode") || "test", token: null, role: null, socket: null};

  function $(id) { return document.getElementById(id); }
  function post(query, variables, headers) {
    headers["Content-Type"] = "application/json";
    return fetch(endpoint, {method: "POST", credentials: "same-origin", headers: headers,
      body: JSON.stringify({query: query, variables: variables || {}})}).then(function (r) { return r.json(); });
  }
  // asViewer: the signed-in human's calls.
  function asViewer(query, variables) {
    return post(query, variables, {"X-CSRF-Token": csrf}).then(function (res) {
      if (res.errors) {
        if (res.errors[0].extensions && res.errors[0].extensions.code === "UNAUTHENTICATED") { location.href = root.dataset.signin; }
        throw new Error(res.errors[0].message);
      }
      return res.data;
    });
  }
  // asMerchant: the merchant API with the dashboard session; an ended
  // session is opened again once.
  function asMerchant(query, variables, retried) {
    var sent = state.token;
    return post(query, variables, {"X-Dashboard-Session": sent}).then(function (res) {
      if (res.errors) {
        var code = res.errors[0].extensions && res.errors[0].extensions.code;
        if (code === "UNAUTHENTICATED" && !retried) {
          return reopen(sent).then(function () { return asMerchant(query, variables, true); });
        }
        var err = new Error(res.errors[0].message);
        err.answered = true; // the service answered (not a lost answer)
        throw err;
      }
      return res.data;
    });
  }
  function showError(e) { errorBox.textContent = window.agentpayUI.sentence(e.message); errorBox.hidden = false; }
  function tell(text) { notice.textContent = text; notice.hidden = false; }
  function clear() { errorBox.hidden = true; notice.hidden = true; }
  function when(t) { return t ? new Date(t).toLocaleString() : ""; }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }
  function button(label, cls, onClick) {
    var b = el("button", label, cls);
    b.type = "button";
    b.addEventListener("click", function () { clear(); b.disabled = true; onClick().catch(showError).then(function () { b.disabled = false; }); });
    return b;
  }
  function tokenKey() { return "dash.token." + root.dataset.user + "." + state.merchant.id + "." + state.mode; }

  // Opening: a dashboard session per merchant and mode, kept for the tab.
  // Views that start together (a link to #webhooks before the session is
  // open) share one opening rather than each opening its own session.
  var opening = null;
  function openSession() {
    var kept = sessionStorage.getItem(tokenKey());
    if (kept) {
      var k = JSON.parse(kept);
      if (new Date(k.expiresAt) > new Date()) { return Promise.resolve(use(k)); }
    }
    var key = tokenKey();
    if (!opening || opening.key !== key) {
      var mine = {key: key};
      mine.done = asViewer(Q.open, {m: state.merchant.id, mode: MODES[state.mode]}).then(function (d) {
        sessionStorage.setItem(key, JSON.stringify(d.openDashboard));
        if (tokenKey() === key) { use(d.openDashboard); }
      }).finally(function () { if (opening === mine) { opening = null; } });
      opening = mine;
    }
    return opening.done;
  }
  // reopen replaces a refused token, unless another call already has.
  function reopen(refused) {
    if (state.token && state.token !== refused) { return Promise.resolve(); }
    state.token = null;
    sessionStorage.removeItem(tokenKey());
    return openSession();
  }
  function use(s) {
    state.token = s.token;
    state.role = s.role;
    root.classList.toggle("read-only", s.role !== OWNER);
    $("role-label").textContent = s.role === OWNER ? "owner" : "read-only";
  }

  function switchTo() {
    sessionStorage.setItem("dash.mode", state.mode);
    sessionStorage.setItem("dash.merchant", state.merchant.id);
    // The switch reads like the label beside it: on is test mode.
    modeSwitch.checked = state.mode === "test";
    root.classList.toggle("live", state.mode === "live");
    // Test mode shows no form that only live mode can save (issue 27
    // item 10): the settings say so and link to live mode instead.
    var liveOnly = document.querySelectorAll(".live-only");
    for (var i = 0; i < liveOnly.length; i++) { liveOnly[i].hidden = state.mode !== "live"; }
    $("settings-live-only").hidden = state.mode === "live";
    // An unsaved endpoint URL was the other merchant's or mode's.
    forgetURLEdit();
    return openSession().then(function () { subscribe(); return route(); });
  }

  // Views, by the location's hash. Going to a view clears the feedback of
  // the last one; refreshing it (after an action, or when the live feed
  // says something changed) keeps what the person was told until they
  // read it or something replaces it.
  //
  // One view renders at a time: a refresh asked for while one is loading
  // runs again once it is done, so what shows last was read after the
  // last change. Two loads side by side could answer in the other order,
  // and the older answer, rendered last, stayed on screen (a delivery's
  // tries missing until the next change, which may never come).
  var routing = null, routeAgain = false;
  function route(refresh) {
    if (refresh !== true) { clear(); }
    if (routing) { routeAgain = true; return routing; }
    routing = load().then(function () {
      routing = null;
      if (routeAgain) { routeAgain = false; return route(true); }
    });
    return routing;
  }
  function load() {
    var hash = location.hash.replace(/^#/, "") || "overview";
    var parts = hash.split("/"), name = parts[0];
    var views = document.querySelectorAll(".view");
    for (var i = 0; i < views.length; i++) { views[i].hidden = true; }
    var show = {overview: overview, sessions: sessions, session: sessionDetail, webhooks: webhooks, keys: keys, settings: settings, members: members}[name];
    if (!show) { name = "overview"; show = overview; }
    $("view-" + name).hidden = false;
    // data-loaded names the view once it shows what it read (tests and
    // assistive tools wait on it; aria-busy says so meanwhile).
    root.dataset.loaded = "";
    root.setAttribute("aria-busy", "true");
    return show(decodeURIComponent(parts[1] || "")).then(function () { root.dataset.loaded = name; }).catch(showError)
      .then(function () { root.removeAttribute("aria-busy"); });
  }
  function current() { return (location.hash.replace(/^#/, "") || "overview").split("/")[0]; }

  function overview() {
    var to = new Date(), from = new Date(to.getTime() - 30 * 86400000);
    return asMerchant(Q.volume, {from: from.toISOString(), to: to.toISOString()}).then(function (d) {
      keyed($("volume-table").tBodies[0], d.paymentVolume, {key: function (v) { return v.day + " " + v.chain + " " + v.status; }, render: function (v) {
        var tr = el("tr");
        [v.day, v.chain, shown(v.status), v.count, money(v.volume)].forEach(function (c, i) { tr.appendChild(cell(c, VOLUME_COLUMNS[i])); });
        return tr;
      }});
      $("volume-empty").hidden = d.paymentVolume.length > 0;
      state.volume = {from: from, rows: d.paymentVolume};
      drawChart();
    });
  }
  // The chart stacks each day's payments by chain, for the status and
  // measure picked above it. Volumes are summed exactly, in USDC base
  // units (BigInt); only bar heights are floats.
  function baseUnits(usdc) {
    var parts = String(usdc).split("."), frac = (parts[1] || "").padEnd(6, "0").slice(0, 6);
    return BigInt(parts[0]) * 1000000n + BigInt(frac) * (parts[0].startsWith("-") ? -1n : 1n);
  }
  function shownMeasure(metric, n) {
    if (metric === "count") { return n + (n === 1n ? " payment" : " payments"); }
    return showUnits(n) + " USDC";
  }
  function showUnits(units) {
    var s = (units < 0n ? -units : units).toString().padStart(7, "0");
    var out = s.slice(0, -6) + "." + s.slice(-6);
    return (units < 0n ? "-" : "") + out.replace(/\.?0+$/, "");
  }
  var CHAIN_COLORS = {base: "#0052ff", arbitrum: "#28a0f0", ethereum: "#627eea", polygon: "#8247e5", solana: "#0fa37a"};
  function drawChart() {
    if (!state.volume) { return; }
    var svg = $("volume-chart"), ns = "http://www.w3.org/2000/svg", metric = $("chart-metric").value, status = $("chart-status").value;
    var days = [], perDay = {}, max = 0n;
    svg.textContent = "";
    for (var i = 0; i < 30; i++) { days.push(new Date(state.volume.from.getTime() + (i + 1) * 86400000).toISOString().slice(0, 10)); }
    state.volume.rows.forEach(function (v) {
      if (status && shown(v.status) !== status) { return; }
      var day = perDay[v.day] = perDay[v.day] || {total: 0n};
      var n = metric === "count" ? BigInt(v.count) : baseUnits(v.volume);
      day[v.chain] = (day[v.chain] || 0n) + n;
      day.total += n;
      if (day.total > max) { max = day.total; }
    });
    function svgEl(name, attrs, text) {
      var e = document.createElementNS(ns, name);
      for (var k in attrs) { e.setAttribute(k, attrs[k]); }
      if (text != null) { e.textContent = text; }
      return e;
    }
    days.forEach(function (day, i) {
      var y = 170, totals = perDay[day] || {total: 0n};
      CHAINS.forEach(function (chain) {
        if (!totals[chain]) { return; }
        var h = Math.max(1, Math.round(150 * Number(totals[chain]) / Number(max)));
        y -= h;
        var r = svgEl("rect", {x: i * 20 + 2, y: y, width: 16, height: h, fill: CHAIN_COLORS[chain], "data-chain": chain, "data-day": day});
        r.appendChild(svgEl("title", {}, day + " · " + chain + ": " + shownMeasure(metric, totals[chain])));
        svg.appendChild(r);
      });
      if (i % 5 === 4) { svg.appendChild(svgEl("text", {x: i * 20 + 10, y: 188, "text-anchor": "middle", "font-size": 10, fill: "#555"}, day.slice(5))); }
    });
    svg.appendChild(svgEl("line", {x1: 0, x2: 600, y1: 170, y2: 170, stroke: "#999"}));
    svg.appendChild(svgEl("text", {x: 2, y: 12, "font-size": 10, fill: "#555"}, "max " + shownMeasure(metric, max) + " a day"));
    var legend = $("chart-legend");
    if (legend.children.length) { return; }
    // The chain's colour on a swatch; its name in the text colour, which
    // some chain colours are too light to be read in.
    CHAINS.forEach(function (chain) {
      var item = el("span", null, "legend-item"), swatch = el("span", null, "swatch");
      swatch.style.backgroundColor = CHAIN_COLORS[chain];
      swatch.setAttribute("aria-hidden", "true");
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(chain));
      legend.appendChild(item);
    });
  }

  // Tables become stacked rows on a phone (ui.css): each cell carries its
  // column's name, which the stacked row shows before the value.
  var VOLUME_COLUMNS = ["Day", "Chain", "Status", "Payments", "Volume (USDC)"];
  function cell(content, label) {
    var td = typeof content === "object" && content !== null ? content : el("td", content);
    td.dataset.label = label;
    return td;
  }

  function sessions() {
    var where = {}, status = $("session-status").value, search = $("session-search").value.trim();
    if (status) { where.status = [asEnum(status)]; }
    if (search) { where.search = search; }
    // Days are UTC days, the "to" day included (createdTo is exclusive).
    var from = $("session-from").value, to = $("session-to").value;
    if (from) { where.createdFrom = from + "T00:00:00Z"; }
    if (to) { where.createdTo = new Date(Date.parse(to + "T00:00:00Z") + 86400000).toISOString(); }
    return asMerchant(Q.sessions, {where: where}).then(function (d) {
      keyed($("sessions-table").tBodies[0], d.sessions.edges.map(function (e) { return e.node; }), {key: function (s) { return s.externalId; }, render: function (s) {
        var tr = el("tr"), a = el("a", s.externalId);
        a.href = "#session/" + encodeURIComponent(s.externalId);
        var td = el("td");
        td.appendChild(a);
        tr.appendChild(cell(td, "Session"));
        tr.appendChild(cell(money(s.amountUsd, s.currency), "Amount"));
        tr.appendChild(cell(el("td", shown(s.status), "session-status"), "Status"));
        tr.appendChild(cell(when(s.createdAt), "Created"));
        tr.dataset.id = s.externalId;
        return tr;
      }});
      $("sessions-empty").hidden = d.sessions.edges.length > 0;
    });
  }

  function attemptsList(d) {
    var ul = el("ul", null, "attempts");
    (d.attemptLog || []).forEach(function (a, i) {
      ul.appendChild(el("li", "try " + (i + 1) + " · " + when(a.at) + " · " + (a.statusCode === null ? "no answer" : "HTTP " + a.statusCode) +
        (a.error ? " · " + a.error : "") + " · " + a.durationMs + " ms", a.error ? "attempt attempt-failed" : "attempt attempt-ok"));
    });
    return ul;
  }
  function events(edges, list, none) {
    keyed(list, edges.map(function (e) { return e.node; }), {key: function (ev) { return ev.id; }, render: eventItem,
      empty: function () { return el("li", none, "empty"); }});
  }
  function eventItem(ev) {
    var li = el("li");
    li.dataset.id = ev.id;
    li.appendChild(el("span", when(ev.createdAt) + " · " + ev.eventType));
    (ev.deliveries || []).forEach(function (d) {
      var div = el("div", "delivery to " + d.url + " · " + shown(d.status), "delivery delivery-" + shown(d.status));
      div.appendChild(attemptsList(d));
      li.appendChild(div);
    });
    if (ev.deliveries && ev.deliveries.length) {
      li.appendChild(button("Redeliver", "mutating redeliver", function () {
        return asMerchant(Q.redeliver, {id: ev.id}).then(function () { tell("Sent again as a new delivery."); return route(true); });
      }));
    }
    return li;
  }

  // A session's page: its payments, each confirmed one refundable in full
  // or in part (the rest of it: what was paid less refunds that have not
  // failed), its refunds with their state, a cancel while nothing is paid,
  // and its webhook events.
  var REFUND_STATES = {pending: "requested, waiting to be sent", submitted: "sent, waiting for the chain to confirm it",
    completed: "completed", failed: "failed"};
  var OPEN = {pending: true, detecting: true};
  function refundLeft(p, refunds) {
    var left = baseUnits(p.amountUsd);
    refunds.forEach(function (r) {
      if (r.payment && r.payment.externalId === p.externalId && shown(r.status) !== "failed") { left -= baseUnits(r.amountUsd); }
    });
    return left;
  }
  function refundForm(s, p, left) {
    var form = el("form", null, "mutating refund-form row"), key = newKey();
    var label = el("label", "Refund (USD) ", "inline"), amount = el("input");
    amount.name = "amount"; amount.inputMode = "decimal"; amount.size = 10; amount.className = "refund-amount";
    amount.placeholder = showUnits(left);
    amount.setAttribute("aria-describedby", "refund-help-" + p.externalId);
    label.appendChild(amount);
    form.appendChild(label);
    var submit = el("button", "Refund", "refund");
    submit.type = "submit";
    form.appendChild(submit);
    form.appendChild(el("span", "Empty: all that is left, " + money(showUnits(left), "USD") + ".", "note")).id = "refund-help-" + p.externalId;
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      clear();
      var value = amount.value.trim();
      if (value && !/^[0-9]+(\.[0-9]{1,6})?$/.test(value)) {
        showError(new Error("Enter the amount to refund in USD, such as 2.50, or leave it empty to refund all that is left."));
        return;
      }
      var whole = !value || baseUnits(value) === left;
      var what = whole ? money(showUnits(left), "USD") + " (all that is left of it)" : money(value, "USD");
      confirmAction("Refund this payment?", "This sends " + what + " back to the payer's address on " + p.chain +
        " out of your balance, and cannot be undone." + (state.mode === "live" ? " This is real money." : ""), "Refund " + (whole ? "in full" : money(value, "USD"))).then(function (yes) {
        if (!yes) { return; }
        submit.disabled = true;
        var input = {paymentId: p.externalId};
        if (value) { input.amountUsd = value; }
        return asMerchant(Q.refund, {id: s.externalId, in: input, key: key}).then(function (d) {
          tell("Refund " + d.createRefund.refund.externalId + " requested: it shows below with its state.");
          return route(true);
        }, function (e) {
          // Refused: the form is kept (its row did not change), and the
          // next try is a new request. A lost answer keeps the key, so
          // submitting again retries the same refund.
          if (e.answered) { key = newKey(); }
          throw e;
        }).catch(showError).then(function () { submit.disabled = false; });
      });
    });
    return form;
  }
  function newKey() {
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return "dash-" + Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join("");
  }
  function sessionDetail(id) {
    return asMerchant(Q.session, {id: id}).then(function (d) {
      var s = d.session;
      $("session-id").textContent = s.externalId;
      $("session-status-value").textContent = shown(s.status);
      $("session-amount").textContent = money(s.amountUsd, s.currency);
      $("session-checkout").href = s.checkoutUrl;
      // What needs the merchant's attention (underpaid, overpaid, late or
      // repeat payments), with what to do: the service's sentences.
      var attention = $("session-attention"), flagged = {};
      attention.textContent = "";
      s.attention.forEach(function (a) {
        var p = el("p", a.advice, "attention");
        p.dataset.kind = shown(a.kind);
        attention.appendChild(p);
        if (a.paymentExternalId) { flagged[a.paymentExternalId] = shown(a.kind); }
      });
      attention.hidden = !s.attention.length;
      // A payment's row is updated in place while what its refund form
      // offers is the same (its confirmations count up meanwhile), so
      // an amount being typed stays.
      function paymentLine(p) {
        return p.externalId + " · " + money(p.tokenAmount, "USDC") + " on " + p.chain + " · " + shown(p.status) +
          " · " + p.confirmations + " confirmations · " + p.txHash;
      }
      function refundable(p) {
        var left = refundLeft(p, d.refunds);
        return shown(p.status) === "confirmed" && left > 0n ? left : null;
      }
      keyed($("session-payments"), d.payments.edges.map(function (e) { return e.node; }), {
        key: function (p) { return p.externalId; },
        sig: function (p) { return JSON.stringify(p) + " " + refundable(p) + " " + (flagged[p.externalId] || ""); },
        render: function (p) {
          var li = el("li", null, "payment"), left = refundable(p);
          li.appendChild(el("span", paymentLine(p)));
          li.dataset.status = shown(p.status);
          li.dataset.id = p.externalId;
          if (flagged[p.externalId]) { li.dataset.attention = flagged[p.externalId]; }
          li.agentpayRefund = String(left);
          if (left !== null) { li.appendChild(refundForm(s, p, left)); }
          return li;
        },
        update: function (li, p) {
          if (li.agentpayRefund !== String(refundable(p)) || (li.dataset.attention || "") !== (flagged[p.externalId] || "")) { return false; }
          li.firstChild.textContent = paymentLine(p);
          li.dataset.status = shown(p.status);
          return true;
        },
        empty: function () { return el("li", "No payment yet: the customer pays on the hosted page.", "empty"); }
      });
      var cancel = $("cancel-session");
      cancel.hidden = !(OPEN[shown(s.status)] && !d.payments.edges.length);
      cancel.dataset.id = s.externalId;
      keyed($("session-refunds"), d.refunds, {key: function (r) { return r.externalId; }, render: function (r) {
        var li = el("li", r.externalId + " · " + money(r.amountUsd, "USD") + " of " + (r.payment ? r.payment.externalId : "a payment") + " · " +
          (REFUND_STATES[shown(r.status)] || shown(r.status)) + (r.txHash ? " · " + r.txHash : "") + (r.error ? " · " + r.error : ""), "refund-row");
        li.dataset.status = shown(r.status);
        li.dataset.id = r.externalId;
        return li;
      }, empty: function () { return el("li", "No refund: a confirmed payment can be refunded from its row above.", "empty"); }});
      events(d.webhookEvents.edges.slice().reverse(), $("session-events"), "No event yet.");
    });
  }

  function loadMerchant() { return asMerchant(Q.merchant).then(function (d) { return d.merchant; }); }

  // The endpoint's field shows the saved URL and follows it while the
  // person has not changed it; what they wrote over it stays until they
  // save it or switch merchant or mode. data-saved is the saved URL the
  // field last showed. Every live event reloads the view: overwriting
  // the field each time replaced an unsaved URL (one typed, or written
  // before the view's first answer came) with the saved one, and the
  // next Save sent that, so a new merchant's empty URL was saved over
  // the one just entered, "Saved." shown and no delivery ever made (CI:
  // TestDashboardEndToEnd, no delivery under payment.confirmed).
  function showSavedURL(saved) {
    var url = $("webhook-url");
    if (document.activeElement === url || url.value !== (url.dataset.saved || "")) { return; }
    url.value = saved;
    url.dataset.saved = saved;
  }
  function forgetURLEdit() {
    var url = $("webhook-url");
    url.value = "";
    url.dataset.saved = "";
  }
  function webhooks() {
    $("webhook-mode").textContent = "(" + state.mode + " mode)";
    return Promise.all([loadMerchant(), asMerchant(Q.events)]).then(function (r) {
      showSavedURL(r[0].webhookUrl || "");
      events(r[1].webhookEvents.edges, $("webhook-events"), "No event yet in this mode: set your endpoint's URL and send a test event to try it.");
    });
  }
  function keys() {
    return loadMerchant().then(function (m) {
      $("public-live").textContent = m.publicKeys.live;
      $("public-test").textContent = m.publicKeys.test;
    });
  }
  function settings() {
    if (state.mode !== "live") { return Promise.resolve(); }
    return loadMerchant().then(function (m) {
      state.settlement = {type: m.settlementType, address: m.settlementAddress || "", chain: m.settlementChain || ""};
      $("set-name").value = m.name;
      $("set-settlement-type").value = m.settlementType;
      $("set-settlement-address").value = m.settlementAddress || "";
      // A chain the list does not name (set through the API) is kept as
      // it is rather than shown as another.
      var chain = $("set-settlement-chain");
      var listed = Array.prototype.some.call(chain.options, function (o) { return o.value === m.settlementChain; });
      if (m.settlementChain && !listed) {
        var extra = el("option", m.settlementChain);
        extra.value = m.settlementChain;
        chain.appendChild(extra);
      }
      chain.value = m.settlementChain || "";
      $("set-brand-color").value = m.brandColor || "#3355ff";
      var box = $("set-tokens"), accepted = {};
      m.acceptedTokens.forEach(function (t) { accepted[t.chain] = true; });
      box.textContent = "";
      CHAINS.forEach(function (c) {
        var label = el("label", null, "inline"), input = el("input");
        input.type = "checkbox"; input.value = c; input.checked = !!accepted[c];
        label.appendChild(input);
        label.appendChild(document.createTextNode(" USDC on " + c));
        box.appendChild(label);
      });
      preview();
    });
  }
  // The preview draws with the colours the hosted page will use, asked of
  // the service (brandColors: the one contrast rule), newest pick last.
  var brandAsked = 0;
  function preview() {
    $("preview-name").textContent = $("set-name").value;
    var color = $("set-brand-color").value, asked = ++brandAsked, box = $("brand-preview"), note = $("brand-note");
    return asMerchant(Q.brand, {c: color}).then(function (d) {
      if (asked !== brandAsked) { return; }
      var b = d.brandColors;
      box.style.setProperty("--brand", b.background);
      box.style.setProperty("--on-brand", b.text);
      box.style.setProperty("--brand-link", b.link);
      note.textContent = "Text on it is " + (b.text === "#ffffff" ? "white" : "black") + " (contrast " + b.contrast.toFixed(2) + ":1)" +
        (b.link === b.background ? "; links use it too." : "; links use dark text, as it is too light on white.");
    }, function (e) { if (asked === brandAsked) { note.textContent = window.agentpayUI.sentence(e.message); } });
  }
  function members() {
    return asViewer(Q.members).then(function (d) {
      var m = d.viewer.merchants.filter(function (x) { return x.id === state.merchant.id; })[0];
      $("invite-form").hidden = state.merchant.role !== OWNER;
      keyed($("members"), m.members, {key: function (mm) { return mm.id; }, sig: function (mm) { return JSON.stringify(mm) + state.merchant.id + state.merchant.role; }, render: function (mm) {
        var li = el("li", mm.email + " · " + (mm.role === OWNER ? "owner" : "read-only") + (mm.acceptedAt ? "" : " · invited"));
        if (state.merchant.role === OWNER) {
          li.appendChild(button("Remove", "remove-member", function () {
            return confirmAction("Remove " + mm.email + "?", mm.email + " loses access to " + state.merchant.name +
              "'s dashboard at once, in both modes. You can invite them again later.", "Remove").then(function (yes) {
              if (!yes) { return; }
              return asViewer(Q.remove, {m: state.merchant.id, id: mm.id}).then(function () { tell(mm.email + " was removed."); return members(); });
            });
          }));
        }
        return li;
      }});
    });
  }

  // Live: the merchant's events and delivery tries, each refreshing the
  // view shown.
  //
  // The service ends a watch whose credential it could not read again
  // (livecredentials.go: the database away counts), and a socket may drop:
  // either way the page subscribes again, authenticating afresh, and
  // reloads the view once acknowledged, since what changed meanwhile sent
  // no message. Without it the page stopped following for good (a
  // delivery's tries never showed).
  //
  // The feed is read from its start (after: 0, which the service bounds
  // to the newest 100 lines), then from the last line seen: the service
  // starts a watch after answering, on its own goroutine, so one without
  // after could miss a line committed meanwhile. A replayed line costs a
  // refresh (one at a time, and rows that did not change stay). Once the
  // subscription is asked for, <body data-live="subscribed"> says every
  // change reaches the page ("connecting" before), which tests wait for.
  function live(s) { document.body.dataset.live = s; }
  function subscribe(again) {
    if (state.socket) { state.socket.onclose = null; state.socket.close(); }
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + endpoint;
    var ws = new WebSocket(url, "graphql-transport-ws");
    var feed = state.merchant.id + "." + state.mode;
    if (state.feed !== feed) { state.feed = feed; state.cursor = 0; }
    state.socket = ws;
    live("connecting");
    var resubscribe = function () { if (state.socket === ws) { subscribe(true); } };
    ws.onopen = function () { ws.send(JSON.stringify({type: "connection_init", payload: {"X-Dashboard-Session": state.token}})); };
    ws.onmessage = function (m) {
      var msg = JSON.parse(m.data);
      if (msg.type === "connection_ack") {
        ws.send(JSON.stringify({id: "feed", type: "subscribe", payload: {query: Q.feed, variables: {after: state.cursor}}}));
        live("subscribed");
        if (again === true) { refreshLive(); }
      } else if (msg.type === "next") {
        var line = msg.payload && msg.payload.data && msg.payload.data.merchantEvents;
        if (line && state.socket === ws) { state.cursor = Math.max(state.cursor, line.cursor); }
        refreshLive();
      } else if (msg.type === "complete" || msg.type === "error") {
        live("connecting");
        setTimeout(resubscribe, 1000);
      } else if (msg.type === "ping") {
        ws.send(JSON.stringify({type: "pong"}));
      }
    };
    ws.onclose = function () { live("connecting"); setTimeout(resubscribe, 3000); };
  }
  function refreshLive() {
    var v = current();
    if (v === "sessions" || v === "session" || v === "webhooks" || v === "overview") { route(true); }
  }

  // Controls.
  picker.addEventListener("change", function () {
    state.merchant = state.merchants.filter(function (m) { return m.id === picker.value; })[0];
    switchTo().catch(showError);
  });
  modeSwitch.addEventListener("change", function () {
    state.mode = modeSwitch.checked ? "test" : "live";
    switchTo().catch(showError);
  });
  window.addEventListener("hashchange", function () { route(); });
  $("chart-metric").addEventListener("change", drawChart);
  $("chart-status").addEventListener("change", drawChart);
  $("session-filter-form").addEventListener("submit", function (e) { e.preventDefault(); sessions().catch(showError); });
  $("new-session-form").addEventListener("submit", function (e) {
    e.preventDefault();
    clear();
    var input = {amount: $("new-session-amount").value.trim(), currency: "USD"};
    if ($("new-session-description").value.trim()) { input.description = $("new-session-description").value.trim(); }
    asMerchant(Q.createSession, {in: input}).then(function (d) {
      location.hash = "#session/" + encodeURIComponent(d.createSession.externalId);
    }).catch(showError);
  });
  $("webhook-form").addEventListener("submit", function (e) {
    e.preventDefault();
    clear();
    var url = $("webhook-url"), sent = url.value.trim();
    asMerchant(Q.saveWebhook, {url: sent}).then(function () {
      // What was sent is saved: the field follows the service again.
      if (url.value.trim() === sent) { url.dataset.saved = url.value; }
      tell(sent ? "Saved." : "Saved. With no endpoint, this mode's events are listed below and not sent.");
      return webhooks();
    }).catch(showError);
  });
  $("roll-webhook-secret").addEventListener("click", function () {
    clear();
    confirmAction("Rotate the webhook secret?", "A new signing secret replaces this mode's at once: your endpoint rejects every webhook " +
      "until it checks signatures with the new secret, which is shown here once." +
      (state.mode === "live" ? " In live mode, deploy the new secret right away." : ""), "Rotate the secret").then(function (yes) {
      if (!yes) { return; }
      return asMerchant(Q.rollSecret).then(function (d) {
      var box = $("webhook-secret");
      box.textContent = d.rollWebhookSecret.webhookSecret + " — " + d.rollWebhookSecret.warning;
      box.hidden = false;
      tell("The webhook secret was rotated.");
      });
    }).catch(showError);
  });
  $("send-test-webhook").addEventListener("click", function () {
    clear();
    asMerchant(Q.testWebhook).then(function () { tell("Test event sent; its tries appear below."); return webhooks(); }).catch(showError);
  });
  $("roll-keys").addEventListener("click", function () {
    clear();
    confirmAction("Roll this mode's keys?", state.mode === "live" ?
      "New live keys replace the current ones at once: your integration stops working until you deploy the new secret key, which is shown here once." :
      "New test keys replace the current ones at once: your test integration stops working until you use the new secret key, which is shown here once.",
      "Roll the keys").then(function (yes) {
      if (!yes) { return; }
      return asMerchant(Q.rollKeys).then(function (d) {
        var k = d.rollKeys, box = $("rolled-keys");
        box.textContent = "Secret key: " + k.secretKey + " · public key: " + k.publicKey + " — " + k.warning;
        box.hidden = false;
        tell("The keys were rolled.");
        return keys();
      });
    }).catch(showError);
  });
  $("cancel-session").addEventListener("click", function () {
    clear();
    var id = $("cancel-session").dataset.id;
    confirmAction("Cancel this session?", "Its hosted page stops taking payments and shows the customer it was cancelled. This cannot be undone.",
      "Cancel the session").then(function (yes) {
      if (!yes) { return; }
      return asMerchant(Q.cancel, {id: id}).then(function () { tell("The session was cancelled."); return route(true); });
    }).catch(showError);
  });
  $("settings-go-live").addEventListener("click", function (e) {
    e.preventDefault();
    state.mode = "live";
    switchTo().catch(showError);
  });
  $("set-name").addEventListener("input", preview);
  $("set-brand-color").addEventListener("input", preview);
  $("settings-form").addEventListener("submit", function (e) {
    e.preventDefault();
    clear();
    var tokens = [];
    var boxes = $("set-tokens").querySelectorAll("input:checked");
    for (var i = 0; i < boxes.length; i++) { tokens.push({chain: boxes[i].value, token: "USDC"}); }
    var input = {name: $("set-name").value, settlementType: $("set-settlement-type").value,
      settlementAddress: $("set-settlement-address").value.trim(), settlementChain: $("set-settlement-chain").value.trim(),
      brandColor: $("set-brand-color").value, acceptedTokens: tokens};
    var before = state.settlement || {}, routed = before.address !== input.settlementAddress || before.type !== input.settlementType ||
      before.chain !== input.settlementChain;
    (routed ? confirmAction("Change where your money goes?", "From now on, payments settle " +
      (input.settlementType === "FIAT_PIX" ? "by Pix to " : "in USDC to ") + (input.settlementAddress || "no address") +
      (input.settlementChain ? " on " + input.settlementChain : " on the chain each was paid on") +
      ". Payments already settled stay where they went. Check the address: money sent to a wrong one cannot be recovered.", "Change settlement")
      : Promise.resolve(true)).then(function (yes) {
      if (!yes) { return; }
      return asMerchant(Q.saveSettings, {in: input}).then(function () { tell("Saved."); return settings(); });
    }).catch(showError);
  });
  $("invite-form").addEventListener("submit", function (e) {
    e.preventDefault();
    clear();
    asViewer(Q.invite, {m: state.merchant.id, e: $("invite-email").value.trim(), r: $("invite-role").value}).then(function () {
      $("invite-email").value = "";
      tell("Invitation sent.");
      return members();
    }).catch(showError);
  });

  // Start: the merchants the viewer manages.
  asViewer(Q.merchants).then(function (d) {
    state.merchants = d.viewer.merchants;
    if (!state.merchants.length) { $("dash-none").hidden = false; $("dash-tabs").hidden = true; $("dash-bar").hidden = true; return; }
    state.merchants.forEach(function (m) {
      var o = el("option", m.name);
      o.value = m.id;
      picker.appendChild(o);
    });
    var kept = sessionStorage.getItem("dash.merchant");
    state.merchant = state.merchants.filter(function (m) { return m.id === kept; })[0] || state.merchants[0];
    picker.value = state.merchant.id;
    return switchTo();
  }).catch(showError);
})();
