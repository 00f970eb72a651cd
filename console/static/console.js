// Live updates: follow /events and, on a change of this page's environment,
// fetch the page again and swap its <main> (no reload; the URL, scroll
// position, the focus and what was typed into a form there stay).
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
        if (fresh && cur) {
          var kept = keep(cur);
          cur.innerHTML = fresh.innerHTML;
          restore(cur, kept);
        }
        live.textContent = "updated " + new Date().toISOString().slice(11, 19) + "Z";
        live.className = "updated";
      })
      .catch(function () { live.textContent = "update failed; reload the page"; })
      .then(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  // Swapping <main> replaces every element in it: what the operator typed
  // into a form there and the element that had the keyboard focus are
  // carried over to their counterparts (same id, else same place).
  var focusable = "a[href], button, input, select, textarea, [tabindex]";
  function fields(root) {
    var out = {}, n = {};
    Array.prototype.forEach.call(root.querySelectorAll("input, select, textarea"), function (el) {
      var base = el.id ? "#" + el.id : "@" + (el.name || el.tagName);
      n[base] = (n[base] || 0) + 1;
      out[el.id ? base : base + ":" + n[base]] = el;
    });
    return out;
  }
  function dirty(el) {
    if (el.type === "hidden") { return false; }
    if (el.type === "checkbox" || el.type === "radio") { return el.checked !== el.defaultChecked; }
    if (el.tagName === "SELECT") {
      return Array.prototype.some.call(el.options, function (o) { return o.selected !== o.defaultSelected; });
    }
    return el.value !== el.defaultValue;
  }
  function keep(root) {
    var k = { values: {}, focus: null };
    var fs = fields(root);
    Object.keys(fs).forEach(function (key) {
      var el = fs[key];
      if (dirty(el)) { k.values[key] = (el.type === "checkbox" || el.type === "radio") ? el.checked : el.value; }
    });
    var a = document.activeElement;
    if (a && a !== root && root.contains(a)) {
      var all = root.querySelectorAll(focusable);
      k.focus = { id: a.id, href: a.getAttribute("href"), tag: a.tagName, index: Array.prototype.indexOf.call(all, a) };
      Object.keys(fs).forEach(function (key) { if (fs[key] === a) { k.focus.field = key; } });
      try { k.focus.sel = [a.selectionStart, a.selectionEnd]; } catch (e) { k.focus.sel = null; }
    }
    return k;
  }
  function restore(root, k) {
    var fs = fields(root);
    Object.keys(k.values).forEach(function (key) {
      var el = fs[key];
      if (!el) { return; }
      if (el.type === "checkbox" || el.type === "radio") { el.checked = k.values[key]; } else { el.value = k.values[key]; }
    });
    var f = k.focus, el = null;
    if (!f) { return; }
    if (f.field) { el = fs[f.field] || null; }
    if (!el && f.id) { el = document.getElementById(f.id); }
    if (!el) {
      var all = root.querySelectorAll(focusable), c = all[f.index];
      if (c && c.tagName === f.tag && c.getAttribute("href") === f.href) { el = c; }
      for (var i = 0; !el && f.href && i < all.length; i++) {
        if (all[i].getAttribute("href") === f.href) { el = all[i]; }
      }
    }
    if (el && root.contains(el)) {
      el.focus({ preventScroll: true });
      if (f.sel && f.sel[0] !== null) { try { el.setSelectionRange(f.sel[0], f.sel[1]); } catch (e) { /* not a text field */ } }
    }
  }
  // A reconnection (the console restarted, a proxy cut the stream) may
  // have missed changes: the page is read again then, not only on the
  // next change.
  var opened = false;
  src.addEventListener("open", function () {
    live.textContent = "live";
    if (opened) { refresh(); }
    opened = true;
  });
  src.addEventListener("error", function () { live.textContent = "live updates reconnecting…"; });
  src.addEventListener("change", function (e) {
    var d = {};
    try { d = JSON.parse(e.data); } catch (err) { d = {}; }
    if (!env || !d.envTag || d.envTag === env) { refresh(); }
  });
}());
