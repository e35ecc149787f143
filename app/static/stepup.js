// The one step-up of every sensitive action (docs/security.md, "Step-up"):
// approving a held payment or a card purchase, withdrawing, adding a
// passkey when the account has one, removing one. beginStepUp says what
// the action needs: nothing, a passkey assertion (signed here with the
// person's passkey), or a link e-mailed to them (opened in any browser;
// this page waits until it is confirmed). It resolves to the
// {ceremonyId, credential} the action then sends.
//
// call(query, variables) answers the data or throws the first error's
// message; say(text) shows what the person must do meanwhile.
(function () {
  window.agentpayStepUp = function (call, input, say) {
    return call("mutation($in: StepUpInput!) { beginStepUp(input: $in) { id method options sentTo expiresAt } }", {in: input}).then(function (data) {
      var up = data.beginStepUp;
      if (!up.method) { return {}; }
      if (up.method === "PASSKEY") {
        say("Confirm with your passkey…");
        return window.agentpayWebAuthn.get(up.options).then(function (credential) {
          return {ceremonyId: up.id, credential: credential};
        });
      }
      say("We e-mailed a confirmation link to " + up.sentTo + ": open it and confirm; this page goes on by itself.");
      var deadline = Date.parse(up.expiresAt);
      return new Promise(function (resolve, reject) {
        (function poll() {
          call("query($id: ID!) { viewer { stepUp(id: $id) { confirmed } } }", {id: up.id}).then(function (d) {
            if (d.viewer.stepUp.confirmed) { resolve({ceremonyId: up.id}); return; }
            if (Date.now() > deadline) { reject(new Error("The confirmation link expired: nothing was done.")); return; }
            setTimeout(poll, 1000);
          }, reject);
        })();
      });
    });
  };
})();
