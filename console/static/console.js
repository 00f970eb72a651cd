// Live updates: follow /events and, on a change of this page's environment,
// fetch the page again and swap its <main> (no reload; the URL, scroll
// position and focus stay).
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!window.EventSource || !live) { return; }
  var env = document.body.getAttribute("data-env") || "";
  var src = new EventSource("/events" + (env ? "?env=" + encodeURIComponent(env) : ""));
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main"), cur = document.getElementById("main");
        if (fresh && cur) { cur.innerHTML = fresh.innerHTML; }
        live.textContent = "updated " + new Date().toISOString().slice(11, 19) + "Z";
        live.className = "updated";
      })
      .catch(function () { live.textContent = "update failed; reload the page"; })
      .then(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  src.addEventListener("open", function () { live.textContent = "live"; });
  src.addEventListener("error", function () { live.textContent = "live updates reconnecting…"; });
  src.addEventListener("change", function (e) {
    var d = {};
    try { d = JSON.parse(e.data); } catch (err) { d = {}; }
    if (!env || !d.envTag || d.envTag === env) { refresh(); }
  });
}());
