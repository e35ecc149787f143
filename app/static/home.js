// The signed-in home: everything through the public GraphQL API (viewer,
// decidePairing, startIdentityVerification, viewerEvents), the session's CSRF token on every request.
(function () {
  var root = document.getElementById("app");
  var endpoint = root.dataset.graphql, csrf = root.dataset.csrf;

  function gql(query, variables) {
    return fetch(endpoint, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify({query: query, variables: variables || {}})
    }).then(function (r) { return r.json(); });
  }
  function item(list, text) {
    var li = document.createElement("li");
    li.textContent = text;
    document.getElementById(list).appendChild(li);
    return li;
  }
  function button(li, label, id, decision) {
    var b = document.createElement("button");
    b.textContent = label;
    b.dataset.decision = decision;
    b.addEventListener("click", function () {
      gql("mutation($id: ID!, $d: PairingDecision!) { decidePairing(id: $id, decision: $d) { status } }", {id: id, d: decision}).then(load);
    });
    li.appendChild(b);
  }
  function load() {
    return gql("{ viewer { identityStatus balance { totalUsd balances { chain balance address } } pairings { id agentUsername status message } " +
      "events { id kind data } } }").then(function (res) {
      if (res.errors) { return; }
      var v = res.data.viewer;
      ["wallets", "requests", "paired", "received"].forEach(function (id) { document.getElementById(id).textContent = ""; });
      document.getElementById("total").textContent = v.balance.totalUsd;
      document.getElementById("identity-status").textContent = v.identityStatus.replace("_", " ");
      document.getElementById("verify-identity").hidden = v.identityStatus === "verified";
      v.balance.balances.forEach(function (b) { item("wallets", b.chain + ": " + b.balance + " USDC at " + b.address); });
      v.pairings.forEach(function (p) {
        if (p.status === "pending") {
          var li = item("requests", p.agentUsername + (p.message ? ": " + p.message : ""));
          li.className = "request";
          button(li, "Approve", p.id, "APPROVE");
          button(li, "Deny", p.id, "DENY");
        } else if (p.status === "approved") {
          button(item("paired", p.agentUsername), "Revoke", p.id, "REVOKE");
        }
      });
      v.events.forEach(function (e) {
        if (e.kind === "transfer.received") {
          item("received", e.data.amount_usd + " USDC from " + e.data.from_agent + " on " + e.data.chain).className = "transfer";
        }
      });
    });
  }

  // Identity verification happens on the provider's page, which sends
  // the person back here.
  document.getElementById("verify-identity").addEventListener("click", function () {
    gql("mutation { startIdentityVerification { url } }").then(function (res) {
      if (res.errors) { document.getElementById("identity-status").textContent = res.errors[0].message; return; }
      location.href = res.data.startIdentityVerification.url;
    });
  });

  // Live: viewerEvents over graphql-transport-ws; each event reloads.
  function subscribe() {
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + endpoint;
    var ws = new WebSocket(url, "graphql-transport-ws");
    ws.onopen = function () { ws.send(JSON.stringify({type: "connection_init", payload: {"X-CSRF-Token": csrf}})); };
    ws.onmessage = function (m) {
      var msg = JSON.parse(m.data);
      if (msg.type === "connection_ack") {
        ws.send(JSON.stringify({id: "events", type: "subscribe", payload: {query: "subscription { viewerEvents { id kind } }"}}));
      } else if (msg.type === "next") {
        load();
      } else if (msg.type === "ping") {
        ws.send(JSON.stringify({type: "pong"}));
      }
    };
    ws.onclose = function () { setTimeout(subscribe, 3000); };
  }
  load().then(subscribe);
})();
