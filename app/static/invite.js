// Accepts an invitation through the public GraphQL API (acceptInvitation).
(function () {
  var b = document.getElementById("accept");
  b.addEventListener("click", function () {
    fetch(b.dataset.graphql, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": b.dataset.csrf},
      body: JSON.stringify({query: "mutation($t: String!) { acceptInvitation(token: $t) { status } }", variables: {t: b.dataset.token}})
    }).then(function (r) { return r.json(); }).then(function (res) {
      if (res.errors) { b.insertAdjacentHTML("afterend", "<p class=error></p>"); b.nextSibling.textContent = res.errors[0].message; return; }
      location.href = b.dataset.home;
    });
  });
})();
