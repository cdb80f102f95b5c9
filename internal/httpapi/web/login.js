// didnmf login form. A token the node refused comes back to this form (401) with the token
// still in the address bar: say so, and take the token out of the address bar and history.
"use strict";

(function () {
  const q = new URLSearchParams(location.search);
  if (location.pathname === "/login" && q.has("token")) {
    document.getElementById("login-error").hidden = false;
    history.replaceState(null, "", "/login");
  }
})();
