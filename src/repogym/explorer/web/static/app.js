/* repogym explorer: theme toggle, search as you type, line links. No dependencies. */
(function () {
  "use strict";
  var root = document.documentElement, KEY = "repogym-theme";
  try { var saved = localStorage.getItem(KEY); if (saved === "dark" || saved === "light") root.setAttribute("data-theme", saved); } catch (e) { /* storage off */ }

  function currentTheme() {
    var t = root.getAttribute("data-theme");
    if (t) return t;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function setupTheme() {
    var b = document.getElementById("theme");
    if (!b) return;
    b.addEventListener("click", function () {
      var next = currentTheme() === "dark" ? "light" : "dark";
      root.setAttribute("data-theme", next);
      try { localStorage.setItem(KEY, next); } catch (e) { /* storage off */ }
    });
  }

  function setupSearch() {
    var form = document.querySelector("form[data-live]");
    if (!form || !window.fetch || !window.DOMParser) return;
    var input = form.querySelector("input[name=q]"), timer = 0, ctl = null, seq = 0;
    function target() {
      var params = new URLSearchParams();
      new FormData(form).forEach(function (v, k) { if (v !== "") params.append(k, v); });
      var s = params.toString();
      return form.getAttribute("action") + (s ? "?" + s : "");
    }
    function run() {
      var url = target(), mine = ++seq;
      if (ctl) ctl.abort();
      ctl = window.AbortController ? new AbortController() : null;
      fetch(url, { signal: ctl ? ctl.signal : undefined, headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text === null || mine !== seq) return;
          var doc = new DOMParser().parseFromString(text, "text/html");
          var fresh = doc.getElementById("results"), old = document.getElementById("results");
          if (fresh && old) old.replaceWith(document.importNode(fresh, true));
          history.replaceState(null, "", url);
        })
        .catch(function () { /* aborted or offline: keep the current results */ });
    }
    input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(run, 180); });
  }

  var anchor = 0;
  function markLines() {
    var m = /^#L(\d+)(?:-L(\d+))?$/.exec(location.hash), i;
    var old = document.querySelectorAll(".l.hl");
    for (i = 0; i < old.length; i++) old[i].classList.remove("hl");
    if (!m) return;
    var a = +m[1], b = m[2] ? +m[2] : a;
    if (b < a) { var t = a; a = b; b = t; }
    for (i = a; i <= b && i - a < 5000; i++) {
      var el = document.getElementById("L" + i);
      if (el) el.classList.add("hl");
    }
    var first = document.getElementById("L" + a);
    if (first && first.scrollIntoView) first.scrollIntoView({ block: "center" });
  }

  function setupLines() {
    var src = document.querySelector(".src");
    if (!src) return;
    src.addEventListener("click", function (ev) {
      var a = ev.target.closest ? ev.target.closest("a.n") : null;
      if (!a) return;
      ev.preventDefault();
      var n = +a.getAttribute("href").slice(2);
      var hash = ev.shiftKey && anchor ? "#L" + Math.min(anchor, n) + "-L" + Math.max(anchor, n) : "#L" + n;
      if (!ev.shiftKey) anchor = n;
      history.replaceState(null, "", location.pathname + location.search + hash);
      markLines();
    });
    window.addEventListener("hashchange", markLines);
    markLines();
  }

  function setupBanner() {
    var b = document.querySelector("details.banner[data-banner]"), BKEY = "repogym-banner-closed";
    if (!b) return;
    var id = b.getAttribute("data-banner");
    try { if (localStorage.getItem(BKEY) === id) b.removeAttribute("open"); } catch (e) { /* storage off */ }
    b.addEventListener("toggle", function () {
      try { if (b.open) localStorage.removeItem(BKEY); else localStorage.setItem(BKEY, id); } catch (e) { /* storage off */ }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { setupTheme(); setupSearch(); setupLines(); setupBanner(); });
})();
