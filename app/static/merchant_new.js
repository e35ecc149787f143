// Signing a merchant up (docs/dashboard.md#signing-up-a-merchant): the form
// is posted with the session's CSRF token; the answer's keys are shown
// here and kept nowhere (the service stores only their hashes), so a
// reload shows the empty form and never the keys again.
(function () {
  var root = document.getElementById("merchant-new"), form = document.getElementById("merchant-form");
  var errorBox = document.getElementById("merchant-error"), keysBox = document.getElementById("merchant-keys");
  var LABELS = [["live_public_key", "Live public key"], ["live_secret_key", "Live secret key"], ["test_public_key", "Test public key"],
    ["test_secret_key", "Test secret key"], ["webhook_secret", "Live webhook secret"], ["test_webhook_secret", "Test webhook secret"]];
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    errorBox.hidden = true;
    var submit = document.getElementById("merchant-submit");
    submit.disabled = true;
    var body = new URLSearchParams(new FormData(form));
    body.set("csrf_token", root.dataset.csrf);
    fetch(root.dataset.action, {method: "POST", credentials: "same-origin", body: body}).then(function (r) {
      return r.json().then(function (d) { if (!r.ok) { throw new Error(d.detail); } return d; });
    }).then(function (d) {
      form.hidden = true;
      document.getElementById("keys-warning").textContent = d.warning;
      document.getElementById("keys-email").textContent = d.name + " is signed up. We e-mailed " + d.email +
        " a link to confirm it as the contact address.";
      var list = document.getElementById("keys-list");
      LABELS.forEach(function (l) {
        var dt = document.createElement("dt"), dd = document.createElement("dd"), code = document.createElement("code");
        dt.textContent = l[0] === "live_secret_key" || l[0] === "test_secret_key" ? l[1] + " (keep it on your server)" : l[1];
        code.textContent = d.keys[l[0]];
        code.id = "key-" + l[0].replace(/_/g, "-");
        dd.appendChild(code);
        list.appendChild(dt);
        list.appendChild(dd);
      });
      document.getElementById("keys-dashboard").href = d.dashboard;
      keysBox.hidden = false;
      keysBox.focus();
    }).catch(function (err) {
      errorBox.textContent = window.agentpayUI.sentence(err.message);
      errorBox.hidden = false;
      submit.disabled = false;
    });
  });
})();
