// The signed-in home: everything through the public GraphQL API (viewer,
// decidePairing, decidePairingConsent, startIdentityVerification,
// withdraw, card and spend approvals, viewerEvents), the session's CSRF
// token on every request. Approving and withdrawing take the step-up
// first (stepup.js).
(function () {
  var money = window.agentpayUI.money; // the one money format (ui.js)
  var sentence = window.agentpayUI.sentence; // API errors as sentences (ui.js)
  var root = document.getElementById("app");
  var endpoint = root.dataset.graphql, csrf = root.dataset.csrf;

  function gql(query, variables) {
    return fetch(endpoint, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify({query: query, variables: variables || {}})
    }).then(function (r) { return r.json(); });
  }
  // gqlData is gql for stepup.js: the data, or the first error thrown.
  function gqlData(query, variables) {
    return gql(query, variables).then(function (res) {
      if (res.errors) { throw new Error(res.errors[0].message); }
      return res.data;
    });
  }
  function waiting(list) {
    return list.length ? " (approved by " + list.join(", ") + ")" : "";
  }
  // shown is an enum value as the page shows and compares it: the API
  // spells statuses UPPER_CASE (docs/architecture.md, "GraphQL naming"),
  // the page in the lower-case words REST uses (and the data-status
  // attributes carry).
  function shown(v) { return String(v).toLowerCase(); }
  // The lists render through agentpayUI.keyed: an item that did not
  // change keeps its node across the reloads every live event causes, so
  // nothing moves under a person's pointer or loses its focus.
  var keyed = window.agentpayUI.keyed, setText = window.agentpayUI.setText;
  function item(text, cls) {
    var li = document.createElement("li");
    li.textContent = text;
    if (cls) { li.className = cls; }
    return li;
  }
  function list(id, items, key, render) {
    keyed(document.getElementById(id), items, {key: key, render: render});
  }
  function byID(x) { return x.id; }
  // Pairing decisions say what they did (or why not) in the section's
  // status line, which stays until the next decision replaces it.
  var pairingResult = document.getElementById("pairing-result");
  function pairingShow(text, status) {
    pairingResult.textContent = text;
    pairingResult.dataset.status = status;
    pairingResult.className = status === "error" ? "error" : "note";
  }
  var DECIDED = {
    APPROVE: function (agent) { return "Paired with " + agent + ": it can now ask you to approve what it does, and pay you."; },
    DENY: function (agent) { return "Denied " + agent + "'s request to pair."; },
    REVOKE: function (agent) { return "Unpaired " + agent + ": it can no longer ask you for anything."; }
  };
  function button(li, label, id, decision, agent) {
    cardButton(li, label, "", function () {
      return gql("mutation($id: ID!, $d: PairingDecision!) { decidePairing(id: $id, decision: $d) { status } }", {id: id, d: decision}).then(function (res) {
        if (res.errors) { pairingShow(sentence(res.errors[0].message), "error"); } else { pairingShow(DECIDED[decision](agent), decision.toLowerCase()); }
        return load();
      });
    }).dataset.decision = decision;
  }
  // Consents to a new human likewise.
  var consentResult = document.getElementById("consent-result");
  function consentShow(text, status) {
    consentResult.textContent = text;
    consentResult.dataset.status = status;
    consentResult.className = status === "error" ? "error" : "note";
  }
  // One load renders at a time: a load asked for while one is reading (a
  // live event during an action's reload) runs again once it is done, so
  // what shows last was read after the last change. Two side by side
  // could answer in the other order, and the older answer, rendered last,
  // stayed on screen (as on the dashboard, dashboard.js route).
  var loading = null, loadAgain = false;
  function load() {
    if (loading) { loadAgain = true; return loading; }
    function done() {
      loading = null;
      if (loadAgain) { loadAgain = false; return load(); }
    }
    loading = read().then(done, done);
    return loading;
  }
  function read() {
    // Three operations: together the lists would cost more than one
    // operation may (GraphQL's complexity limit).
    return Promise.all([
      gql("{ viewer { identityStatus balance { totalUsd balances { chain balance address } } pairings { id agentUsername status message } " +
        "pairingConsents { id agentUsername username } " +
        "withdrawals { id chain toAddress amountUsd deliveredUsd status txHash } " +
        "spendingPolicies { agentUsername approvalThreshold perPaymentCap dailyCap allowedRecipients denyByDefault } } }"),
      gql("{ viewer { cardRequests { id agentUsername status amountUsd merchantName description cardLast4 chargedUsd returnedUsd deciders approvedBy viewerDecides } } }"),
      gql("{ viewer { spendApprovals { id agentUsername operation status amountUsd recipient reason error deciders approvedBy viewerDecides " +
        "checkout { merchantName merchantVerified description chain } } } }")
    ]).then(function (rs) {
      if (rs[0].errors || rs[1].errors || rs[2].errors) { return; }
      var v = rs[0].data.viewer;
      v.cardRequests = rs[1].data.viewer.cardRequests;
      v.spendApprovals = rs[2].data.viewer.spendApprovals;
      v.identityStatus = shown(v.identityStatus);
      [v.pairings, v.cardRequests, v.spendApprovals, v.withdrawals].forEach(function (list) {
        list.forEach(function (x) { x.status = shown(x.status); });
      });
      v.spendApprovals.forEach(function (a) { a.operation = shown(a.operation); });
      setText(document.getElementById("total"), money(v.balance.totalUsd));
      setText(document.getElementById("identity-status"), v.identityStatus.replace("_", " "));
      identityRead(v.identityStatus);
      document.getElementById("verify-identity").hidden = v.identityStatus === "verified";
      list("wallets", v.balance.balances, function (b) { return b.chain; }, function (b) {
        return item(b.chain + ": " + money(b.balance, "USDC") + " at " + b.address);
      });
      list("requests", v.pairings.filter(function (p) { return p.status === "pending"; }), byID, function (p) {
        var li = item(p.agentUsername + (p.message ? ": " + p.message : ""), "request");
        li.dataset.id = p.id;
        button(li, "Approve", p.id, "APPROVE", p.agentUsername);
        button(li, "Deny", p.id, "DENY", p.agentUsername);
        return li;
      });
      list("paired", v.pairings.filter(function (p) { return p.status === "approved" || p.status === "awaiting_consent"; }), byID, function (p) {
        if (p.status === "awaiting_consent") {
          return item(p.agentUsername + " (waiting for the consent of its other human)", "awaiting-consent");
        }
        var li = item(p.agentUsername);
        li.dataset.id = p.id;
        button(li, "Revoke", p.id, "REVOKE", p.agentUsername);
        return li;
      });
      list("consent-requests", v.pairingConsents, byID, function (c) {
        var li = item(c.username + " asks to pair with " + c.agentUsername, "consent");
        li.dataset.id = c.id;
        [["Allow", "allow-consent", "APPROVE"], ["Refuse", "refuse-consent", "DENY"]].forEach(function (x) {
          cardButton(li, x[0], x[1], function () {
            return gql("mutation($id: ID!, $d: PairingDecision!) { decidePairingConsent(id: $id, decision: $d) { status } }", {id: c.id, d: x[2]}).then(function (res) {
              if (res.errors) { consentShow(sentence(res.errors[0].message), "error"); } else {
                consentShow(x[2] === "APPROVE" ? "Allowed " + c.username + " to pair with " + c.agentUsername + "." :
                  "Refused " + c.username + "'s request to pair with " + c.agentUsername + ".", x[0].toLowerCase());
              }
              return load();
            });
          });
        });
        return li;
      });
      list("card-requests", v.cardRequests, byID, function (c) {
        var text = c.agentUsername + " asks to pay " + money(c.amountUsd, "USD") + " at " + c.merchantName +
          (c.description ? ": " + c.description : "") + " (" + c.status.replace(/_/g, " ") + ")";
        if (c.cardLast4) { text += ", card ending " + c.cardLast4; }
        if (c.chargedUsd) { text += ", charged " + money(c.chargedUsd, "USD"); }
        if (c.returnedUsd) { text += ", " + money(c.returnedUsd, "USDC") + " returned"; }
        if (c.deciders.length > 1) { text += "; needs " + c.deciders.join(" and ") + waiting(c.approvedBy); }
        var li = item(text, "card-request");
        li.dataset.id = c.id;
        li.dataset.status = c.status;
        if (c.viewerDecides) {
          cardButton(li, "Approve", "approve-card", function () { return approveCard(c.id); });
          cardButton(li, "Deny", "deny-card", function () {
            return gql("mutation($id: ID!) { denyCardRequest(id: $id) { status } }", {id: c.id}).then(cardAnswer("denyCardRequest"));
          });
        }
        return li;
      });
      // The agents to set a policy on: the options are written again
      // only when the paired agents changed (an open picker stays open).
      var agents = document.getElementById("policy-form").elements.agent, chosen = agents.value;
      var names = v.pairings.filter(function (p) { return p.status === "approved"; }).map(function (p) { return p.agentUsername; });
      if (Array.prototype.map.call(agents.options, function (o) { return o.value; }).join("\n") !== names.join("\n")) {
        agents.textContent = "";
        names.forEach(function (n) {
          var o = document.createElement("option");
          o.value = o.textContent = n;
          agents.appendChild(o);
        });
        if (chosen) { agents.value = chosen; }
      }
      savedPolicies = {};
      v.spendingPolicies.forEach(function (p) { savedPolicies[p.agentUsername] = p; });
      if (!policyEdited) { fillPolicy(); }
      list("spending-policies", v.spendingPolicies, function (p) { return p.agentUsername; }, function (p) {
        var parts = [];
        if (p.approvalThreshold !== null) { parts.push("approval above " + money(p.approvalThreshold, "USD")); }
        if (p.perPaymentCap !== null) { parts.push("at most " + money(p.perPaymentCap, "USD") + " a payment"); }
        if (p.dailyCap !== null) { parts.push("at most " + money(p.dailyCap, "USD") + " a day"); }
        if (p.allowedRecipients.length) { parts.push("allowed: " + p.allowedRecipients.join(", ")); }
        if (p.denyByDefault) { parts.push("deny by default"); }
        return item(p.agentUsername + ": " + (parts.join("; ") || "no rules"), "spending-policy");
      });
      list("spend-approvals", v.spendApprovals, byID, function (a) {
        // A held checkout payment names who is paid and for what; a send,
        // its recipient.
        var what = a.checkout
          ? " wants to pay " + money(a.amountUsd, "USD") + " to " + a.checkout.merchantName +
            (a.checkout.merchantVerified ? " (verified merchant)" : " (merchant not verified)") +
            (a.checkout.description ? " for “" + a.checkout.description + "”" : "") +
            (a.checkout.chain ? " on " + a.checkout.chain : "")
          : " wants to " + a.operation.replace(/_/g, " ") + " " + money(a.amountUsd, "USD") + " to " + a.recipient;
        var li = item(a.agentUsername + what +
          " (" + a.status.replace(/_/g, " ") + "). Held by the rule: " + a.reason + (a.error ? " — " + a.error : "") +
          "; decided by " + a.deciders.join(" and ") + waiting(a.approvedBy), "spend-approval");
        li.dataset.id = a.id;
        li.dataset.status = a.status;
        if (a.viewerDecides) {
          cardButton(li, "Approve", "approve-spend", function () { return approveSpend(a.id); });
          cardButton(li, "Deny", "deny-spend", function () {
            return gql("mutation($id: ID!) { denySpendApproval(id: $id) { status } }", {id: a.id}).then(spendAnswer("denySpendApproval"));
          });
        }
        return li;
      });
      list("withdrawals", v.withdrawals, byID, function (w) {
        var li = item(money(w.amountUsd, "USDC") + " to " + w.toAddress + " on " + w.chain + ": " + w.status +
          (w.txHash ? " (" + w.txHash + ")" : ""), "withdrawal");
        li.dataset.id = w.id;
        li.dataset.status = w.status;
        return li;
      });
      window.agentpayUI.empties(root);
    });
  }

  // Card purchases: approving takes the step-up begun for this request (a
  // passkey assertion when the person has a passkey), then sends it.
  var cardResult = document.getElementById("card-result");
  function cardShow(text, status) {
    cardResult.textContent = text;
    cardResult.dataset.status = status;
    cardResult.className = status === "error" ? "error" : "";
  }
  // A list item's button is disabled while its action runs (onClick's
  // promise, which ends after the reload): an item the action changed is
  // rendered anew by then, and one it did not (a refusal, a passkey not
  // used) keeps its node, whose button comes back.
  function cardButton(li, label, cls, onClick) {
    var b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    if (cls) { b.className = cls; }
    b.addEventListener("click", function () {
      b.disabled = true;
      var again = function () { b.disabled = false; };
      Promise.resolve().then(onClick).then(again, again);
    });
    li.appendChild(b);
    return b;
  }
  function cardAnswer(field) {
    return function (res) {
      if (res.errors) { cardShow(sentence(res.errors[0].message), "error"); } else { var st = shown(res.data[field].status); cardShow("Card request " + st.replace(/_/g, " ") + ".", st); }
      return load();
    };
  }
  function approveCard(id) {
    cardShow("Approving…", "sending");
    return window.agentpayStepUp(gqlData, {action: "APPROVE_CARD", id: id}, function (text) { cardShow(text, "confirming"); }).then(function (proof) {
      return gql("mutation($id: ID!, $ceremonyId: ID, $credential: String) { approveCardRequest(id: $id, ceremonyId: $ceremonyId, credential: $credential) { status } }",
        {id: id, ceremonyId: proof.ceremonyId || null, credential: proof.credential || null});
    }).then(cardAnswer("approveCardRequest"), function (err) {
      cardShow(err.message || "The passkey was not used: nothing was approved.", "error");
      return load();
    });
  }

  // Spending approvals: as card approvals, the step-up begun for this
  // approval (bound to it: it approves no other).
  var approvalResult = document.getElementById("approval-result");
  function spendShow(text, status) {
    approvalResult.textContent = text;
    approvalResult.dataset.status = status;
    approvalResult.className = status === "error" ? "error" : "";
  }
  function spendAnswer(field) {
    return function (res) {
      if (res.errors) { spendShow(sentence(res.errors[0].message), "error"); } else { var st = shown(res.data[field].status); spendShow("Payment " + st.replace(/_/g, " ") + ".", st); }
      return load();
    };
  }
  function approveSpend(id) {
    spendShow("Approving…", "sending");
    return window.agentpayStepUp(gqlData, {action: "APPROVE_SPEND", id: id}, function (text) { spendShow(text, "confirming"); }).then(function (proof) {
      return gql("mutation($id: ID!, $ceremonyId: ID, $credential: String) { approveSpendApproval(id: $id, ceremonyId: $ceremonyId, credential: $credential) { status } }",
        {id: id, ceremonyId: proof.ceremonyId || null, credential: proof.credential || null});
    }).then(spendAnswer("approveSpendApproval"), function (err) {
      spendShow(err.message || "The passkey was not used: nothing was approved.", "error");
      return load();
    });
  }
  var policyForm = document.getElementById("policy-form"), policyResult = document.getElementById("policy-result");
  // The form shows the saved policy of the agent picked (saving replaces
  // the whole policy, so what was not edited is sent as it was saved); a
  // reload while someone types leaves their edits alone.
  var savedPolicies = {}, policyEdited = false;
  function fillPolicy() {
    var f = policyForm.elements, p = savedPolicies[f.agent.value] || {allowedRecipients: []};
    f.threshold.value = p.approvalThreshold == null ? "" : p.approvalThreshold;
    f.perPayment.value = p.perPaymentCap == null ? "" : p.perPaymentCap;
    f.daily.value = p.dailyCap == null ? "" : p.dailyCap;
    f.allowed.value = (p.allowedRecipients || []).join(", ");
    f.deny.checked = !!p.denyByDefault;
    policyEdited = false;
  }
  policyForm.addEventListener("input", function (ev) { if (ev.target.name !== "agent") { policyEdited = true; } });
  policyForm.elements.agent.addEventListener("change", fillPolicy);
  policyForm.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var f = policyForm.elements;
    function amount(input) { var x = input.value.trim(); return x === "" ? null : x; }
    gql("mutation($in: SpendingPolicyInput!) { setSpendingPolicy(input: $in) { agentUsername } }", {in: {
      agentUsername: f.agent.value, approvalThreshold: amount(f.threshold), perPaymentCap: amount(f.perPayment),
      dailyCap: amount(f.daily), denyByDefault: f.deny.checked,
      allowedRecipients: f.allowed.value.split(",").map(function (x) { return x.trim(); }).filter(function (x) { return x; })
    }}).then(function (res) {
      policyResult.textContent = res.errors ? window.agentpayUI.sentence(res.errors[0].message) : "Saved the policy on " + res.data.setSpendingPolicy.agentUsername + ".";
      policyResult.dataset.status = res.errors ? "error" : "saved";
      policyResult.className = res.errors ? "error" : "";
      if (!res.errors) { policyEdited = false; }
      return load();
    });
  });

  // Received transfers come from the account events, read forward from the
  // last one seen and kept here newest first: a page of events is at most
  // 100, so reading from the first on every load would stop showing new
  // ones once an account has had 100.
  var lastEvent = 0;
  function loadEvents() {
    return gql("query($after: Int64) { viewer { events(after: $after, limit: 100) { id kind data } } }", {after: lastEvent}).then(function (res) {
      if (res.errors) { return; }
      var events = res.data.viewer.events, list = document.getElementById("received");
      events.forEach(function (e) {
        lastEvent = Math.max(lastEvent, e.id);
        if (e.kind === "transfer.received") {
          var li = document.createElement("li");
          li.textContent = money(e.data.amount_usd, "USDC") + " from " + e.data.from_agent + " on " + e.data.chain;
          li.className = "transfer";
          list.insertBefore(li, list.firstChild);
        }
      });
      if (events.length === 100) { return loadEvents(); }
      window.agentpayUI.empties(root);
    });
  }
  // One read at a time, so two never start from the same last event and
  // show a transfer twice.
  var eventsRead = Promise.resolve();
  function readEvents() {
    eventsRead = eventsRead.then(loadEvents, loadEvents);
    return eventsRead;
  }

  // Identity verification happens on the provider's page, which sends
  // the person back here (?identity=returned). What came of it is said
  // in a sentence then, and whenever it changes while the page is open
  // (the provider's answer can come later: an identity.updated event).
  var IDENTITY = {
    verified: "Your identity is verified.",
    pending: "Your identity is being checked: this page says so as soon as the result is in.",
    requires_input: "The identity check needs more from you: verify your identity again to finish it.",
    rejected: "Your identity could not be verified. You can start again with Verify your identity."
  };
  var identityResult = document.getElementById("identity-result"), identityLast = null;
  var identityReturned = new URLSearchParams(location.search).get("identity") === "returned";
  if (identityReturned) { history.replaceState(null, "", location.pathname + location.hash); }
  function identityRead(status) {
    if (IDENTITY[status] && (identityLast === null ? identityReturned : identityLast !== status)) {
      identityResult.textContent = IDENTITY[status];
      identityResult.dataset.status = status;
      identityResult.className = status === "rejected" ? "error" : "note";
    }
    identityLast = status;
  }
  document.getElementById("verify-identity").addEventListener("click", function () {
    gql("mutation { startIdentityVerification { url } }").then(function (res) {
      if (res.errors) {
        identityResult.textContent = sentence(res.errors[0].message);
        identityResult.dataset.status = "error";
        identityResult.className = "error";
        return;
      }
      location.href = res.data.startIdentityVerification.url;
    });
  });

  // Withdraw: the step-up begun for exactly this withdrawal first (a
  // passkey assertion, or without a passkey a link e-mailed to the person,
  // which this page waits for); one idempotency key per attempt, kept
  // until an answer comes back, so a retry after a lost answer never
  // withdraws twice.
  var form = document.getElementById("withdraw-form"), result = document.getElementById("withdraw-result");
  var attemptKey = null;
  function newKey() {
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return "app-" + Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join("");
  }
  function show(text, status) {
    result.textContent = text;
    result.dataset.status = status;
    result.className = status === "error" ? "error" : "";
  }
  // A withdrawal's answer as a person reads it: what went where, and
  // whether it arrived, is on its way or failed (and why), with the
  // transaction on the chain's explorer once there is one.
  function short(address) { return address.length > 14 ? address.slice(0, 6) + "…" + address.slice(-4) : address; }
  function showWithdrawal(w) {
    var what = "Withdrawal of " + money(w.amountUsd, "USDC") + " to " + short(w.toAddress) + " on " + w.chain;
    var text = {
      completed: what + " arrived: " + money(w.deliveredUsd, "USDC") + " delivered, " + money(w.feeUsd, "USDC") + " fee.",
      pending: what + " is on its way: " + money(w.deliveredUsd, "USDC") + " will arrive once the network includes it.",
      failed: what + " failed, and nothing left your balance." + (w.error ? " " + sentence(w.error) : "")
    }[w.status] || what + ": " + w.status + ".";
    show(text, w.status);
    if (w.txUrl) {
      var a = document.createElement("a");
      a.href = w.txUrl;
      a.target = "_blank";
      a.rel = "noopener";
      a.className = "tx-link";
      a.textContent = "See the transaction";
      result.appendChild(document.createTextNode(" "));
      result.appendChild(a);
      result.appendChild(document.createTextNode("."));
    } else if (w.txHash) {
      result.appendChild(document.createTextNode(" Transaction " + w.txHash + "."));
    }
  }
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var submit = form.querySelector("button[type=submit]");
    attemptKey = attemptKey || newKey();
    submit.disabled = true;
    var input = {
      chain: form.elements.chain.value, toAddress: form.elements.address.value.trim(),
      amountUsd: form.elements.amount.value.trim(), idempotencyKey: attemptKey
    };
    function withdraw(proof) {
      show("Withdrawing…", "sending");
      input.ceremonyId = proof.ceremonyId || null;
      input.credential = proof.credential || null;
      return gql("mutation($in: WithdrawInput!) { withdraw(input: $in) { id chain toAddress amountUsd deliveredUsd feeUsd status txHash txUrl error } }", {in: input}).then(function (res) {
        attemptKey = null;
        if (res.errors) {
          show(window.agentpayUI.sentence(res.errors[0].message), "error");
          return;
        }
        var w = res.data.withdraw;
        w.status = shown(w.status);
        showWithdrawal(w);
        if (w.status !== "failed") { form.reset(); }
        return load();
      }, function () {
        show("No answer from the server: submit again to retry the same withdrawal.", "error");
      });
    }
    // Said before anything starts: money sent out cannot be called back.
    window.agentpayUI.confirm("Withdraw " + window.agentpayUI.money(input.amountUsd, "USDC") + "?",
      "This sends " + window.agentpayUI.money(input.amountUsd, "USDC") + " (less the 0.1% fee) from your agentpay balance to " +
      input.toAddress + " on " + input.chain + ". Check the address: money sent to a wrong one cannot be recovered.", "Withdraw").then(function (yes) {
      if (!yes) { attemptKey = null; show("Nothing was withdrawn.", "cancelled"); return; }
      show("Checking…", "checking");
      return window.agentpayStepUp(gqlData, {action: "WITHDRAW", withdrawal: input}, function (text) { show(text, "confirming"); }).then(withdraw, function (err) {
        attemptKey = null;
        show(err.message || "The passkey was not used: nothing was withdrawn.", "error");
      });
    }).then(function () { submit.disabled = false; });
  });

  // Live: viewerEvents over graphql-transport-ws; each event reloads. A
  // watch the service ended (its credential could not be read again) or a
  // dropped socket is subscribed again, and the page reloads once
  // acknowledged: what changed meanwhile sent no message.
  //
  // The subscription starts after the last event the page read (after:
  // lastEvent), so an event committed between that read and the moment the
  // service starts the watch (which it does after answering, on its own
  // goroutine) is sent too. Once it is asked for, the page says so on
  // <body data-live="subscribed"> ("connecting" before): from then on
  // every change reaches it, which is what tests (and anything else
  // driving the page) wait for instead of sleeping.
  var socket = null;
  function live(state) { document.body.dataset.live = state; }
  function subscribe(again) {
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + endpoint;
    var ws = new WebSocket(url, "graphql-transport-ws");
    socket = ws;
    live("connecting");
    var resubscribe = function () {
      if (socket !== ws) { return; }
      ws.onclose = null;
      ws.close();
      subscribe(true);
    };
    ws.onopen = function () { ws.send(JSON.stringify({type: "connection_init", payload: {"X-CSRF-Token": csrf}})); };
    ws.onmessage = function (m) {
      var msg = JSON.parse(m.data);
      if (msg.type === "connection_ack") {
        ws.send(JSON.stringify({id: "events", type: "subscribe", payload: {
          query: "subscription($after: Int64) { viewerEvents(after: $after) { id kind } }", variables: {after: lastEvent}}}));
        live("subscribed");
        if (again === true) { load(); readEvents(); }
      } else if (msg.type === "next") {
        load();
        readEvents();
      } else if (msg.type === "complete" || msg.type === "error") {
        live("connecting");
        setTimeout(resubscribe, 1000);
      } else if (msg.type === "ping") {
        ws.send(JSON.stringify({type: "pong"}));
      }
    };
    ws.onclose = function () { live("connecting"); setTimeout(resubscribe, 3000); };
  }
  load().then(readEvents).then(function () { subscribe(); });
})();
