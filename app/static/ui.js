// The pieces every page of the app shares (docs/humans.md#the-app,
// docs/dashboard.md): one money format, errors shown as sentences, and the
// confirmation asked before an action that cannot be undone or that moves
// or routes money.
(function () {
  // money shows an exact decimal string (never through a float): at
  // least two decimals, more only when they are not zero (USDC has six),
  // thousands separated, the currency named once after it.
  function money(amount, currency) {
    var s = String(amount == null ? "0" : amount), neg = s.charAt(0) === "-";
    if (neg) { s = s.slice(1); }
    var parts = s.split("."), whole = parts[0] || "0", frac = (parts[1] || "").replace(/0+$/, "");
    while (frac.length < 2) { frac += "0"; }
    whole = whole.replace(/^0+(?=\d)/, "").replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return (neg ? "-" : "") + whole + "." + frac + (currency ? " " + currency : "");
  }

  // confirm asks in a modal dialog: what happens (text, one or more
  // sentences) and the action's name on its button; it answers a promise
  // of true once confirmed, false when not (Go back, or Escape). Focus
  // starts on Go back, so Enter alone never confirms.
  var dialog = null;
  function build() {
    dialog = document.createElement("dialog");
    dialog.id = "confirm-dialog";
    dialog.setAttribute("aria-labelledby", "confirm-title");
    dialog.setAttribute("aria-describedby", "confirm-text");
    dialog.innerHTML = '<h2 id="confirm-title"></h2><p id="confirm-text"></p>' +
      '<div class="dialog-actions"><button type="button" id="confirm-cancel">Go back</button> ' +
      '<button type="button" id="confirm-ok" class="danger"></button></div>';
    document.body.appendChild(dialog);
  }
  function confirmAction(title, text, action) {
    if (!dialog) { build(); }
    if (dialog.open) { dialog.close("cancel"); }
    dialog.querySelector("#confirm-title").textContent = title;
    dialog.querySelector("#confirm-text").textContent = text;
    dialog.querySelector("#confirm-ok").textContent = action;
    return new Promise(function (resolve) {
      var ok = dialog.querySelector("#confirm-ok"), cancel = dialog.querySelector("#confirm-cancel");
      function done(answer) {
        ok.onclick = cancel.onclick = dialog.onclose = null;
        if (dialog.open) { dialog.close(); }
        resolve(answer);
      }
      ok.onclick = function () { done(true); };
      cancel.onclick = function () { done(false); };
      // Escape closes the dialog, then its close event says no. A close
      // event that finds it open is the last confirmation's, queued when
      // that one closed and run only after this one opened: it is not
      // this one's answer (it closed a confirmation asked again at once).
      dialog.onclose = function () { if (!dialog.open) { done(false); } };
      dialog.showModal();
      cancel.focus();
    });
  }

  // sentence turns an API error's message into a sentence a person reads:
  // the error class the API puts first ("conflict: ...") goes, a field
  // name ("to_address: ...") becomes words, the first letter is a
  // capital and it ends with a full stop. The API's words are kept: the
  // rule that refused is the service's, and says what to do.
  var CLASSES = /^(conflict|not found|forbidden|unauthorized|unauthenticated|rate limited|insufficient funds|unavailable|invalid|bad request): /i;
  function sentence(message) {
    var s = String(message || "Something went wrong; try again.").trim();
    while (CLASSES.test(s)) { s = s.replace(CLASSES, ""); }
    var field = /^([a-z][a-z0-9]*(?:[_.][a-z0-9]+)*): (.*)$/.exec(s);
    if (field) { s = "The " + field[1].replace(/[_.]/g, " ").replace(/\busd\b/, "(USD)") + " " + field[2]; }
    s = s.charAt(0).toUpperCase() + s.slice(1);
    return /[.!?]$/.test(s) ? s : s + ".";
  }

  // device names a browser session by its User-Agent as a person knows
  // it, "Firefox on Windows", never the raw header. Order matters: Edge
  // and Opera also say Chrome, Chrome also says Safari, Android also says
  // Linux, iOS also says Mac OS X.
  function device(ua) {
    if (!ua) { return "Unknown browser"; }
    var browsers = [["Edge", /Edg(e|A|iOS)?\//], ["Opera", /OPR\/|Opera/], ["Firefox", /Firefox\/|FxiOS/],
      ["Chrome", /Chrome\/|CriOS|HeadlessChrome/], ["Safari", /Safari\//]];
    var systems = [["Android", /Android/], ["iOS", /iPhone|iPad|iPod/], ["Windows", /Windows/],
      ["macOS", /Mac OS X|Macintosh/], ["ChromeOS", /CrOS/], ["Linux", /Linux/]];
    var pick = function (list) {
      for (var i = 0; i < list.length; i++) { if (list[i][1].test(ua)) { return list[i][0]; } }
      return "";
    };
    var b = pick(browsers), sys = pick(systems);
    // Unrecognised: the header itself (shortened) still tells sessions apart.
    if (!b && !sys) { return ua.length > 60 ? ua.slice(0, 60) + "…" : ua; }
    return (b || "A browser") + (sys ? " on " + sys : "");
  }

  // empties keeps the empty state of every list under root that has one
  // (data-empty: what the list holds and what to do to fill it): a
  // paragraph after the list, shown while the list has no item. A page
  // calls it once a list is rendered, so "nothing yet" never shows while
  // the list is still loading.
  function empties(root) {
    var lists = (root || document).querySelectorAll("[data-empty]");
    for (var i = 0; i < lists.length; i++) {
      var list = lists[i], note = list.nextElementSibling;
      if (!note || note.dataset.emptyFor !== list.id) {
        note = document.createElement("p");
        note.className = "empty";
        note.id = list.id + "-empty";
        note.dataset.emptyFor = list.id;
        note.textContent = list.dataset.empty;
        list.parentNode.insertBefore(note, list.nextSibling);
      }
      note.hidden = list.children.length > 0;
    }
  }

  // keyed renders a list's items in place (issue 27): each item is keyed
  // (by its id), and a re-render keeps the node of an item whose
  // signature (by default its data as JSON) did not change, so a live
  // event that changed nothing in a list moves nothing under a person's
  // pointer, and keeps the focus, a half-typed field and an open form.
  // An item that changed is updated in place when update(node, item)
  // says it could, else its node is replaced where it stood (the focus
  // moves to the matching control of the new node); new items are added,
  // gone ones removed. Nodes of the list that are not keyed (a loading
  // note) go. empty, when given, renders the node shown while there is
  // no item (kept like an item).
  //   o: {key: item -> string, render: item -> Node, sig: item -> string,
  //       update: (node, item) -> bool, empty: () -> Node}
  function keyed(list, items, o) {
    var sig = o.sig || function (x) { return JSON.stringify(x); };
    var old = {}, kids = list.children, i;
    for (i = 0; i < kids.length; i++) {
      if (kids[i].agentpayKey !== undefined) { old[kids[i].agentpayKey] = kids[i]; }
    }
    var entries = items.map(function (x) { return {key: "k:" + o.key(x), sig: sig(x), item: x}; });
    if (!items.length && o.empty) { entries = [{key: "empty", sig: "", item: null}]; }
    var wanted = entries.map(function (e) {
      var node = old[e.key];
      delete old[e.key];
      if (node && node.agentpaySig === e.sig) { return node; }
      if (node && e.item !== null && o.update && o.update(node, e.item)) { node.agentpaySig = e.sig; return node; }
      var fresh = e.item === null ? o.empty() : o.render(e.item);
      fresh.agentpayKey = e.key;
      fresh.agentpaySig = e.sig;
      if (node) {
        var focused = node.contains(document.activeElement) ? document.activeElement : null;
        list.replaceChild(fresh, node);
        if (focused) { refocus(focused, fresh); }
      }
      return fresh;
    });
    Array.prototype.slice.call(list.children).forEach(function (n) {
      if (wanted.indexOf(n) < 0) { list.removeChild(n); }
    });
    wanted.forEach(function (n, at) {
      if (list.children[at] !== n) { list.insertBefore(n, list.children[at] || null); }
    });
  }
  // refocus puts the focus, which was on a control of a replaced node, on
  // the control of the same kind and label in its replacement.
  function refocus(was, fresh) {
    var same = fresh.querySelectorAll(was.tagName);
    for (var i = 0; i < same.length; i++) {
      if (same[i].className === was.className && same[i].textContent === was.textContent && !same[i].disabled) { same[i].focus(); return; }
    }
  }
  // setText writes an element's text only when it changed.
  function setText(e, text) { if (e.textContent !== text) { e.textContent = text; } }

  window.agentpayUI = {money: money, confirm: confirmAction, sentence: sentence, device: device, empties: empties, keyed: keyed, setText: setText};
})();
