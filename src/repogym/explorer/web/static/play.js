/* repogym explorer: the OpenEnv playground (/play/<env>). Draws the Reset and action forms from
   GET <api>/schema, relays reset/step/state through the explorer's own API (never to another
   origin) and logs every answer as text. The CSRF token is the rg_csrf cookie, echoed in a
   header. No dependencies; DOM built with textContent only. */
(function () {
  "use strict";

  function start() {
    var root = document.getElementById("play");
    if (!root || !window.fetch || !window.JSON) return;
    var api = root.getAttribute("data-api");
    var statusEl = document.getElementById("play-status");
    var logEl = document.getElementById("play-log");
    var resetForm = document.getElementById("play-reset");
    var actionsEl = document.getElementById("play-actions");
    var session = null, busy = false, seq = 0;

    function el(tag, cls, text) {
      var node = document.createElement(tag);
      if (cls) node.className = cls;
      if (text !== undefined && text !== null) node.textContent = String(text);
      return node;
    }

    function csrf() {
      var m = /(?:^|;\s*)rg_csrf=([^;]+)/.exec(document.cookie);
      return m ? decodeURIComponent(m[1]) : "";
    }

    function request(method, path, body, keepalive) {
      var headers = { "Accept": "application/json", "X-CSRF-Token": csrf() };
      if (session) headers["X-Play-Session"] = session;
      var init = { method: method, headers: headers, credentials: "same-origin", cache: "no-store" };
      if (keepalive) init.keepalive = true;
      if (body !== undefined) {
        headers["Content-Type"] = "application/json";
        init.body = JSON.stringify(body);
      }
      return fetch(api + "/" + path, init).then(function (r) {
        return r.text().then(function (text) {
          var data = null;
          try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
          if (!r.ok) {
            var err = new Error((data && data.error) || "HTTP " + r.status);
            err.status = r.status;
            throw err;
          }
          return data;
        });
      });
    }

    function setStatus(text, bad) {
      statusEl.textContent = text;
      statusEl.classList.toggle("bad", !!bad);
    }

    function setBusy(on) {
      busy = on;
      root.classList.toggle("busy", on);
      var buttons = root.querySelectorAll("button");
      for (var i = 0; i < buttons.length; i++) {
        if (buttons[i].id !== "play-clear") buttons[i].disabled = on;
      }
    }

    function log(title, data, isError) {
      var li = el("li", "play-entry" + (isError ? " err" : ""));
      li.id = "play-entry-" + (++seq);
      var head = el("div", "play-entry-head");
      head.appendChild(el("span", "play-what", title));
      if (!isError && data && typeof data === "object" && ("reward" in data || "done" in data)) {
        var reward = data.reward === undefined ? null : data.reward;
        head.appendChild(el("span", "play-tag play-reward", "reward: " + JSON.stringify(reward)));
        head.appendChild(el("span", "play-tag play-done" + (data.done ? " on" : ""), "done: " + String(!!data.done)));
      }
      head.appendChild(el("time", "play-time", new Date().toLocaleTimeString()));
      li.appendChild(head);
      if (isError) li.appendChild(el("p", "play-err", data));
      else li.appendChild(el("pre", "play-json", JSON.stringify(data, null, 2)));
      logEl.insertBefore(li, logEl.firstChild);
      if (li.scrollIntoView) li.scrollIntoView({ block: "nearest" });
    }

    function run(title, work) {
      if (busy) return;
      setBusy(true);
      setStatus("Waiting for the server…");
      work()
        .then(function (data) {
          log(title, data, false);
          setStatus(session ? "Episode open. Send an action, or Reset for a new episode." : "No episode open: press Reset.");
        })
        .catch(function (err) {
          log(title, err.message || String(err), true);
          setStatus(err.message || String(err), true);
        })
        .then(function () { setBusy(false); });
    }

    // -- forms

    function fieldNode(f, formId) {
      var id = formId + "-" + f.name;
      var wrap = el("div", "play-field play-" + f.widget);
      var label = el("label", null, f.label + (f.required ? " *" : ""));
      label.htmlFor = id;
      var input, i;
      if (f.widget === "textarea" || f.widget === "json") {
        input = el("textarea", f.widget === "json" ? "mono" : null);
        input.rows = f.widget === "json" ? 3 : (f.name === "content" ? 6 : 2);
        input.spellcheck = false;
        if (f.widget === "json") input.placeholder = f.shape === "array" ? "[]" : "{}";
      } else if (f.widget === "select") {
        input = el("select");
        if (!f.required) input.appendChild(el("option", null, "—")).value = "";
        for (i = 0; i < f.options.length; i++) {
          var v = f.options[i];
          var opt = el("option", null, typeof v === "string" ? v : JSON.stringify(v));
          opt.value = String(i);
          if (f.default !== undefined && JSON.stringify(f.default) === JSON.stringify(v)) opt.selected = true;
          input.appendChild(opt);
        }
      } else if (f.widget === "const") {
        input = el("input");
        input.type = "text";
        input.readOnly = true;
        input.value = typeof f.value === "string" ? f.value : JSON.stringify(f.value);
      } else {
        input = el("input");
        input.type = f.widget === "number" ? "number" : f.widget === "checkbox" ? "checkbox" : "text";
        if (f.widget === "number") {
          input.step = String(f.step);
          if (f.min !== undefined) input.min = String(f.min);
          if (f.max !== undefined) input.max = String(f.max);
        }
        if (f.widget === "checkbox") input.checked = f.default === true;
        if (f.widget === "text" && f.options && f.options.length) {
          var list = el("datalist");
          list.id = id + "-list";
          for (i = 0; i < f.options.length; i++) list.appendChild(el("option")).value = String(f.options[i]);
          wrap.appendChild(list);
          input.setAttribute("list", list.id);
          input.autocomplete = "off";
        }
      }
      input.id = id;
      input.name = f.name;
      if (f.required && f.widget !== "checkbox") input.required = true;
      if (f.default !== undefined && f.default !== null && f.widget !== "checkbox" && f.widget !== "select") {
        input.value = f.widget === "json" ? JSON.stringify(f.default) : String(f.default);
      }
      if (f.widget === "checkbox") { wrap.appendChild(input); wrap.appendChild(label); } else { wrap.appendChild(label); wrap.appendChild(input); }
      if (f.description) {
        var hint = el("small", "play-hint", f.description);
        hint.id = id + "-hint";
        input.setAttribute("aria-describedby", hint.id);
        wrap.appendChild(hint);
      }
      return wrap;
    }

    function readFields(form, fields) {
      var out = {};
      fields.forEach(function (f) {
        var input = form.elements.namedItem(f.name);
        if (!input) return;
        var raw = f.widget === "checkbox" ? null : String(input.value);
        if (f.widget === "checkbox") { out[f.name] = !!input.checked; return; }
        if (f.widget === "const") { out[f.name] = f.value; return; }
        var blank = raw === "" || (raw.trim() === "" && f.widget !== "text" && f.widget !== "textarea");
        if (blank) {
          if (f.required) throw new Error(f.label + " is required");
          return;
        }
        if (f.widget === "number") {
          var n = Number(raw);
          if (!isFinite(n) || (f.step === 1 && Math.floor(n) !== n)) throw new Error(f.label + ": not a valid number");
          out[f.name] = n;
        } else if (f.widget === "select") {
          out[f.name] = f.options[Number(raw)];
        } else if (f.widget === "json") {
          try { out[f.name] = JSON.parse(raw); } catch (e) { throw new Error(f.label + ": not valid JSON"); }
        } else {
          out[f.name] = raw;
        }
      });
      return out;
    }

    function ensureSession() {
      if (session) return Promise.resolve();
      return request("POST", "session", {}).then(function (d) { session = d.session; });
    }

    function reset(args) {
      return ensureSession()
        .then(function () { return request("POST", "reset", args); })
        .catch(function (err) {
          if (err.status !== 404 || !session) throw err;
          session = null; // the episode ended (idle, or the server dropped it): a new one
          return ensureSession().then(function () { return request("POST", "reset", args); });
        });
    }

    function drawActions(forms) {
      actionsEl.textContent = "";
      forms.forEach(function (spec, n) {
        var box = el("details", "play-act");
        if (n === 0) box.open = true;
        var summary = el("summary", null, spec.kind);
        box.appendChild(summary);
        var form = el("form", "play-form");
        form.noValidate = true;
        form.setAttribute("data-kind", spec.kind);
        if (spec.description) form.appendChild(el("p", "play-about", spec.description));
        var formId = "play-act-" + n;
        spec.fields.forEach(function (f) { form.appendChild(fieldNode(f, formId)); });
        var btns = el("div", "play-btns");
        var send = el("button", null, "Send " + spec.kind);
        send.type = "submit";
        btns.appendChild(send);
        form.appendChild(btns);
        form.addEventListener("submit", function (ev) {
          ev.preventDefault();
          var action;
          try {
            action = Object.assign({}, spec.fixed, readFields(form, spec.fields));
          } catch (err) {
            log("step " + spec.kind, err.message, true);
            return;
          }
          if (!session) { log("step " + spec.kind, "No episode open: press Reset first.", true); return; }
          run("step " + spec.kind, function () { return request("POST", "step", { action: action }); });
        });
        box.appendChild(form);
        actionsEl.appendChild(box);
      });
      if (!forms.length) actionsEl.appendChild(el("p", "empty", "The server's action schema has no fields to show."));
    }

    var resetFields = [];
    resetForm.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var args;
      try { args = readFields(resetForm, resetFields); } catch (err) { log("reset", err.message, true); return; }
      run("reset", function () { return reset(args); });
    });
    document.getElementById("play-state").addEventListener("click", function () {
      if (!session) { log("state", "No episode open: press Reset first.", true); return; }
      run("state", function () { return request("GET", "state"); });
    });
    document.getElementById("play-end").addEventListener("click", function () {
      if (!session) { log("end", "No episode open.", true); return; }
      run("end", function () {
        return request("DELETE", "session").then(function (d) { session = null; return d; }, function (err) { session = null; throw err; });
      });
    });
    document.getElementById("play-clear").addEventListener("click", function () { logEl.textContent = ""; });
    window.addEventListener("pagehide", function () {
      if (session) request("DELETE", "session", undefined, true).catch(function () { /* gone */ });
      session = null;
    });

    setBusy(true);
    request("GET", "schema")
      .then(function (schema) {
        resetFields = schema.reset || [];
        var holder = resetForm.querySelector(".play-fields");
        resetFields.forEach(function (f) { holder.appendChild(fieldNode(f, "play-reset")); });
        drawActions(schema.forms || []);
        setStatus("Ready: press Reset to start an episode.");
        root.classList.add("ready");
      })
      .catch(function (err) {
        setStatus("Cannot read the server's schema: " + (err.message || String(err)), true);
      })
      .then(function () { setBusy(false); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
