// Live updates: follow /events and, on a change of this page's environment,
// fetch the page again and swap its <main> (no reload; the URL, scroll
// position, the focus and what was typed into a form there stay).
//
// The console's tabs share one event stream: a browser opens at most six
// HTTP/1.1 connections to one host, and with a stream per tab the seventh
// tab of the console never loaded. One tab (the holder of a Web Lock) reads
// /events and passes each event on to the others over a BroadcastChannel;
// when it goes away another takes over. Without those APIs (a page not in
// a secure context) each tab reads its own stream.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!window.EventSource || !live) { return; }
  var env = document.body.getAttribute("data-env") || "";
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
  // A reconnection (the console restarted, a proxy cut the stream, another
  // tab took the stream over) may have missed changes: the page is read
  // again then, not only on the next change.
  var opened = false;
  function onOpen() {
    live.textContent = "live";
    if (opened) { refresh(); }
    opened = true;
  }
  function onError() { live.textContent = "live updates reconnecting…"; }
  function onChange(envTag) { if (!env || !envTag || envTag === env) { refresh(); } }
  function follow(url, pass) {
    var src = new EventSource(url);
    src.addEventListener("open", function () { pass("open"); onOpen(); });
    src.addEventListener("error", function () { pass("error"); onError(); });
    src.addEventListener("change", function (e) {
      var d = {};
      try { d = JSON.parse(e.data); } catch (err) { d = {}; }
      pass("change", d.envTag || "");
      onChange(d.envTag || "");
    });
  }
  if (!window.BroadcastChannel || !navigator.locks) {
    follow("/events" + (env ? "?env=" + encodeURIComponent(env) : ""), function () {});
    return;
  }
  var ch = new BroadcastChannel("configpub-console-events"), leading = false, state = "";
  ch.onmessage = function (m) {
    var d = m.data || {};
    if (d.kind === "open") { onOpen(); }
    if (d.kind === "error") { onError(); }
    if (d.kind === "change") { onChange(d.envTag); }
    if (d.kind === "status" && !opened) { if (d.state === "open") { onOpen(); } else { onError(); } }
    if (d.kind === "hello" && leading && state) { ch.postMessage({ kind: "status", state: state }); }
  };
  ch.postMessage({ kind: "hello" }); // the tab holding the stream says how it is
  navigator.locks.request("configpub-console-events", function () {
    leading = true;
    follow("/events", function (kind, envTag) {
      if (kind !== "change") { state = kind; }
      ch.postMessage({ kind: kind, envTag: envTag });
    });
    return new Promise(function () {}); // held until this page goes away
  });
}());
