// Sign in with a passkey: the app's two endpoints (they set the session
// cookie, which a script cannot), the page's form token on each.
(function () {
  var box = document.getElementById("passkey");
  var button = document.getElementById("passkey-signin");
  var error = document.getElementById("passkey-error");
  var wa = window.agentpayWebAuthn;
  function fail(message) { error.textContent = message; error.hidden = false; button.disabled = false; }
  function post(url, fields) {
    var body = new URLSearchParams(fields);
    body.set("form_token", box.dataset.formToken);
    return fetch(url, {method: "POST", credentials: "same-origin", body: body}).then(function (r) {
      return r.json().then(function (res) {
        if (!r.ok) { throw new Error(res.detail || "sign-in failed"); }
        return res;
      });
    });
  }
  if (!wa.supported()) { button.hidden = true; return; }
  button.addEventListener("click", function () {
    error.hidden = true;
    button.disabled = true;
    post(box.dataset.begin, {}).then(function (begun) {
      var rpId = begun.options.publicKey.rpId;
      if (rpId && location.hostname !== rpId && !location.hostname.endsWith("." + rpId)) {
        throw new Error("Passkeys work at " + box.dataset.appUrl + " only: open the app there.");
      }
      return wa.get(begun.options).then(function (credential) {
        return post(box.dataset.finish, {ceremony_id: begun.ceremony_id, credential: credential});
      });
    }).then(function (done) {
      location.href = done.redirect;
    }).catch(function (e) {
      fail(e.name === "NotAllowedError" ? "No passkey was used." : e.message);
    });
  });
})();
