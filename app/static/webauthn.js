// WebAuthn's JSON forms: the server's options carry binary members as
// base64url strings, which navigator.credentials wants as ArrayBuffers;
// the credential it answers goes back as JSON with base64url members (the
// shape of PublicKeyCredential.toJSON, written out for browsers without
// it).
(function () {
  function toBuffer(s) {
    s = s.replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) { s += "="; }
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { out[i] = bin.charCodeAt(i); }
    return out.buffer;
  }
  function toBase64url(buf) {
    var bytes = new Uint8Array(buf), bin = "";
    for (var i = 0; i < bytes.length; i++) { bin += String.fromCharCode(bytes[i]); }
    return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function descriptors(list) {
    return (list || []).map(function (d) { return Object.assign({}, d, {id: toBuffer(d.id)}); });
  }
  function common(cred) {
    return {
      id: cred.id, rawId: toBase64url(cred.rawId), type: cred.type,
      authenticatorAttachment: cred.authenticatorAttachment || undefined,
      clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {}
    };
  }
  window.agentpayWebAuthn = {
    // create makes a passkey with registration options ({publicKey}).
    create: function (options) {
      var pk = Object.assign({}, options.publicKey);
      pk.challenge = toBuffer(pk.challenge);
      pk.user = Object.assign({}, pk.user, {id: toBuffer(pk.user.id)});
      pk.excludeCredentials = descriptors(pk.excludeCredentials);
      return navigator.credentials.create({publicKey: pk}).then(function (cred) {
        var out = common(cred), r = cred.response;
        out.response = {
          clientDataJSON: toBase64url(r.clientDataJSON),
          attestationObject: toBase64url(r.attestationObject),
          transports: r.getTransports ? r.getTransports() : []
        };
        return JSON.stringify(out);
      });
    },
    // get signs a sign-in's options ({publicKey}) with a passkey the
    // person picks.
    get: function (options) {
      var pk = Object.assign({}, options.publicKey);
      pk.challenge = toBuffer(pk.challenge);
      pk.allowCredentials = descriptors(pk.allowCredentials);
      return navigator.credentials.get({publicKey: pk}).then(function (cred) {
        var out = common(cred), r = cred.response;
        out.response = {
          clientDataJSON: toBase64url(r.clientDataJSON),
          authenticatorData: toBase64url(r.authenticatorData),
          signature: toBase64url(r.signature),
          userHandle: r.userHandle ? toBase64url(r.userHandle) : undefined
        };
        return JSON.stringify(out);
      });
    },
    supported: function () { return !!(window.PublicKeyCredential && navigator.credentials); }
  };
})();
