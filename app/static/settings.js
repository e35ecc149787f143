// Settings: everything through the public GraphQL API (viewer { passkeys
// sessions }, updateViewer, beginPasskeyRegistration /
// finishPasskeyRegistration, deletePasskey, revokeSession), the session's
// CSRF token on every request. Adding a passkey when the account has one,
// and removing one, first take the step-up (stepup.js): an assertion of a
// passkey the account has.
(function () {
  var root = document.getElementById("settings");
  var endpoint = root.dataset.graphql, csrf = root.dataset.csrf;
  var errorBox = document.getElementById("settings-error");
  var statusBox = document.getElementById("settings-status");
  var wa = window.agentpayWebAuthn;
  function say(text) { statusBox.textContent = text; }

  function gql(query, variables) {
    return fetch(endpoint, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify({query: query, variables: variables || {}})
    }).then(function (r) { return r.json(); }).then(function (res) {
      if (res.errors) {
        if (res.errors[0].extensions && res.errors[0].extensions.code === "UNAUTHENTICATED") {
          location.href = root.dataset.signin;
        }
        throw new Error(res.errors[0].message);
      }
      return res.data;
    });
  }
  function showError(e) {
    say("");
    errorBox.textContent = e.name === "NotAllowedError" ? "The passkey was not used: nothing changed." :
      e.name === "InvalidStateError" ? "This device holds a passkey for your account already." : window.agentpayUI.sentence(e.message);
    errorBox.hidden = false;
  }
  function when(t) { return t ? new Date(t).toLocaleString() : "never"; }
  function row(list, text, buttonLabel, buttonClass, onClick) {
    var li = document.createElement("li");
    var span = document.createElement("span");
    span.textContent = text;
    li.appendChild(span);
    if (buttonLabel) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = buttonClass;
      b.textContent = buttonLabel;
      b.addEventListener("click", function () { errorBox.hidden = true; onClick().catch(showError); });
      li.appendChild(b);
    }
    list.appendChild(li);
    return li;
  }

  function load() {
    return gql("{ viewer { displayName passkeys { id name createdAt lastUsedAt } " +
      "sessions { id userAgent createdAt expiresAt current } } }").then(function (data) {
      var v = data.viewer;
      var name = document.getElementById("display-name");
      if (document.activeElement !== name) { name.value = v.displayName; }
      var passkeys = document.getElementById("passkeys");
      if (passkeys) {
        passkeys.textContent = "";
        v.passkeys.forEach(function (p) {
          var li = row(passkeys, p.name + " · added " + when(p.createdAt) + " · last used " + when(p.lastUsedAt),
            "Delete", "delete-passkey", function () {
              return window.agentpayUI.confirm("Delete the passkey " + p.name + "?", "You can no longer sign in or approve payments with it; " +
                "the device keeps it, but this account no longer accepts it. Add it again from this page if you need it.", "Delete the passkey").then(function (yes) {
                if (!yes) { return; }
                return window.agentpayStepUp(gql, {action: "REMOVE_PASSKEY", id: p.id}, say).then(function (proof) {
                  return gql("mutation($id: ID!, $c: ID, $cred: String) { deletePasskey(id: $id, ceremonyId: $c, credential: $cred) }",
                    {id: p.id, c: proof.ceremonyId || null, cred: proof.credential || null});
                }).then(function () { say("Passkey removed."); return load(); });
              });
            });
          li.dataset.id = p.id;
        });
      }
      var sessions = document.getElementById("sessions");
      sessions.textContent = "";
      v.sessions.forEach(function (s) {
        var li = row(sessions, (s.current ? "This browser · " : "") + agentpayUI.device(s.userAgent) +
          " · signed in " + when(s.createdAt) + " · until " + when(s.expiresAt),
          s.current ? "Sign out" : "Revoke", "revoke-session", function () {
            return gql("mutation($id: ID!) { revokeSession(id: $id) }", {id: s.id}).then(function () {
              if (s.current) { location.href = root.dataset.signin; return; }
              return load();
            });
          });
        li.dataset.id = s.id;
        if (s.current) { li.className = "current"; }
      });
      window.agentpayUI.empties(root);
    });
  }

  document.getElementById("display-name-form").addEventListener("submit", function (e) {
    e.preventDefault();
    errorBox.hidden = true;
    var saved = document.getElementById("display-name-saved");
    saved.hidden = true;
    gql("mutation($n: String!) { updateViewer(displayName: $n) { displayName } }",
      {n: document.getElementById("display-name").value}).then(function (data) {
      document.getElementById("display-name").value = data.updateViewer.displayName;
      saved.hidden = false;
    }).catch(showError);
  });

  var addForm = document.getElementById("add-passkey-form");
  if (addForm) {
    var add = document.getElementById("add-passkey");
    if (!wa.supported()) { add.disabled = true; add.textContent = "This browser has no passkeys"; }
    addForm.addEventListener("submit", function (e) {
      e.preventDefault();
      errorBox.hidden = true;
      add.disabled = true;
      var name = document.getElementById("passkey-name").value.trim() || "Passkey";
      window.agentpayStepUp(gql, {action: "ADD_PASSKEY"}, say).then(function (proof) {
        return gql("mutation($c: ID, $cred: String) { beginPasskeyRegistration(ceremonyId: $c, credential: $cred) { ceremonyId options } }",
          {c: proof.ceremonyId || null, cred: proof.credential || null});
      }).then(function (data) {
        say("Make the new passkey…");
        var begun = data.beginPasskeyRegistration;
        return wa.create(begun.options).then(function (credential) {
          return gql("mutation($c: ID!, $n: String!, $cred: String!) { finishPasskeyRegistration(ceremonyId: $c, name: $n, credential: $cred) { id } }",
            {c: begun.ceremonyId, n: name, cred: credential});
        });
      }).then(function () { say("Passkey added."); return load(); }).catch(showError).then(function () { add.disabled = false; });
    });
  }
  load().catch(showError);
})();
