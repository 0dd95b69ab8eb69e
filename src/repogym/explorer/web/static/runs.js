/* repogym explorer: runs from the browser. The run panel of task pages (start form, live view,
   the task's runs to compare), live run pages, and the compare picks of run lists.
   Rules: data only ever goes into the page through textContent and attribute values; the API
   key a visitor types lives in its input and in the body of POST /api/runs, nowhere else
   (no URL, no storage, no cookie, inputs have no name so no form can send them). */
(function () {
  "use strict";

  var PHASES = { environment_setup: "Environment", agent_execution: "Agent", verifier: "Verifier" };
  var AGENTS = {
    oracle: "oracle: the reference solution",
    nop: "nop: does nothing",
    command: "command: a shell command",
    llm: "llm: a model with tools"
  };
  var PROVIDERS = {
    openai: "https://api.openai.com/v1",
    anthropic: "https://api.anthropic.com",
    vllm: "http://your-host:8000/v1",
    sglang: "http://your-host:30000/v1",
    ollama: "http://your-host:11434/v1"
  };
  var FINAL = { done: 1, error: 1 };

  // -- small DOM helpers (textContent only)

  function el(tag, attrs, kids) {
    var node = document.createElement(tag), k;
    for (k in attrs || {}) {
      if (!Object.prototype.hasOwnProperty.call(attrs, k) || attrs[k] === null || attrs[k] === undefined) continue;
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }

  function swap(old, fresh) { old.replaceWith(fresh); return fresh; }

  function field(label, input, cls) {
    var id = input.id;
    return el("div", { cls: "field" + (cls ? " " + cls : "") }, [el("label", { "for": id, text: label }), input]);
  }

  // -- texts as pages_runs.event_html writes them (keep both in step)

  function txt(v) { return v === null || v === undefined ? "" : String(v); }
  function json(v, indent) { return JSON.stringify(v, null, indent || undefined); }
  function filled(v) {
    if (!v) return false;
    if (Array.isArray(v)) return v.length > 0;
    if (typeof v === "object") return Object.keys(v).length > 0;
    return true;
  }

  function rewardText(r) { return typeof r === "number" ? String(+r.toPrecision(6)) : "—"; }
  function rewardClass(r) { return typeof r !== "number" ? "none" : r >= 1 ? "full" : r <= 0 ? "zero" : "part"; }

  function eventParts(ev) {
    var kind = txt(ev.kind), d = ev.data, head = "", body = "";
    if (!d || typeof d !== "object" || Array.isArray(d)) d = d ? { value: d } : {};
    if (kind === "phase") {
      var phase = txt(d.phase);
      head = (PHASES[phase] || phase) + " " + (d.state === "start" ? "started" : "finished");
      if (d.agent) head += " (" + txt(d.agent) + ")";
    } else if (kind === "status") {
      head = "Run " + txt(d.status);
    } else if (kind === "model") {
      head = "Model: " + ((d.tool_calls || []).map(txt).join(", ") || "no tool call");
      body = txt(d.text);
    } else if (kind === "tool") {
      head = "Tool " + txt(d.name) + (d.is_error ? " (error)" : "");
      body = (filled(d.arguments) ? json(d.arguments, 1) + "\n→ " : "") + txt(d.output);
    } else if (kind === "agent_output") {
      head = "Agent exited " + txt(d.exit_code) + (d.timed_out ? " (timed out)" : "");
      body = txt(d.text);
    } else if (kind === "verifier_output") {
      head = "Verifier exited " + txt(d.exit_code);
      body = txt(d.text);
    } else if (kind === "reward") {
      head = "Reward " + (d.reward === null || d.reward === undefined ? "—" : txt(d.reward));
      if (filled(d.details)) body = json(d.details, 1);
      if (d.error) body = (body ? body + "\n" : "") + txt(d.error);
    } else if (kind === "error") {
      head = "Error: " + txt(d.kind);
      body = txt(d.text);
    } else {
      head = kind;
      body = json(d);
    }
    return { kind: kind, head: head, body: body };
  }

  function eventNode(ev) {
    var p = eventParts(ev);
    var li = el("li", { cls: "ev k-" + p.kind, "data-seq": txt(ev.seq) }, [el("span", { cls: "evhead", text: p.head })]);
    if (p.body.trim()) li.appendChild(el("pre", { cls: "evbody", text: p.body }));
    return li;
  }

  function statusNode(status) {
    return el("span", { cls: "rstatus s-" + txt(status), text: txt(status) });
  }

  function rewardNode(r) {
    return el("span", { cls: "reward r-" + rewardClass(r), text: rewardText(r) });
  }

  function setBigReward(node, r) {
    if (!node) return;
    node.className = "bigreward r-" + rewardClass(r);
    var val = node.querySelector(".val");
    if (val) val.textContent = rewardText(r);
  }

  function when(ts) {
    return typeof ts === "number" ? new Date(ts * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC" : "";
  }

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
        return body;
      });
    });
  }

  // -- following a run's events (Server-Sent Events; resumes after the last seq shown)

  function follow(runId, after, handlers) {
    if (!window.EventSource) { handlers.end({ status: "" }, true); return null; }
    var last = after || 0;
    var src = new EventSource("/api/runs/" + encodeURIComponent(runId) + "/events?after=" + last);
    src.addEventListener("run", function (m) {
      var ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (typeof ev.seq === "number") {
        if (ev.seq <= last) return;
        last = ev.seq;
      }
      handlers.event(ev);
    });
    src.addEventListener("end", function (m) {
      src.close();
      var data = {};
      try { data = JSON.parse(m.data) || {}; } catch (e) { /* keep {} */ }
      handlers.end(data, false);
    });
    src.addEventListener("error", function () {
      // The browser reconnects by itself (Last-Event-ID); a closed source will not come back.
      if (src.readyState === 2) handlers.end({ status: "" }, true);
    });
    return src;
  }

  // -- the run panel of a task page

  function setupPanel(panel) {
    var env = panel.getAttribute("data-env"), task = panel.getAttribute("data-task");
    var formBox = panel.querySelector(".runform"), live = panel.querySelector(".runlive");
    var listBox = panel.querySelector(".runlist");
    var session = null, current = null, source = null;

    function message(text) {
      formBox.textContent = "";
      formBox.appendChild(el("p", { cls: "runoff", text: text }));
    }

    getJSON("/api/runs/session").then(function (s) {
      session = s;
      if (!s.enabled) { message("Runs are not available here: " + (s.reason || "turned off") + "."); return; }
      buildForm(s.limits || {});
      loadList();
    }).catch(function (err) { message("Runs are not available: " + err.message); });

    function buildForm(limits) {
      var agents = limits.agents || ["oracle", "nop"];
      var agent = el("select", { id: "run-agent" }, agents.map(function (a) {
        return el("option", { value: a, text: AGENTS[a] || a });
      }));
      var command = el("textarea", { id: "run-command", rows: "3", spellcheck: "false", autocomplete: "off",
        placeholder: "e.g. sed -i 's/old/new/' src/module.py" });
      var provider = el("select", { id: "run-provider" }, Object.keys(PROVIDERS).map(function (p) {
        return el("option", { value: p, text: p });
      }));
      var model = el("input", { id: "run-model", type: "text", autocomplete: "off", spellcheck: "false",
        placeholder: "e.g. gpt-4o-mini" });
      var endpoint = el("input", { id: "run-endpoint", type: "url", autocomplete: "off", spellcheck: "false",
        placeholder: PROVIDERS.openai });
      var key = el("input", { id: "run-key", type: "password", autocomplete: "off", spellcheck: "false",
        placeholder: "sent with this run only; never stored" });
      var maxSteps = limits.max_steps || 50;
      var steps = el("input", { id: "run-steps", type: "number", min: "1", max: String(maxSteps),
        value: String(Math.min(20, maxSteps)), inputmode: "numeric" });
      var cmdBox = el("div", { cls: "agentopts f-command" }, [field("Command (run in the task's working folder)", command, "wide")]);
      var llmBox = el("div", { cls: "agentopts f-llm" }, [
        field("Provider", provider), field("Model", model), field("Endpoint URL", endpoint, "wide"),
        field("API key", key), field("Max steps (≤ " + maxSteps + ")", steps)
      ]);
      var start = el("button", { type: "submit", cls: "btn primary", text: "Start run" });
      var err = el("p", { cls: "runerr", role: "alert", hidden: "" });
      var caps = "Limits: " + Math.round(limits.time_limit_s || 0) + " s per run, " +
        (limits.per_visitor_per_hour || 0) + " runs per hour" +
        (agents.indexOf("llm") >= 0 ? "; model runs stop at " + maxSteps + " steps or $" + (limits.budget_usd || 0) : "") + ".";
      // No name on any input and a POST method: nothing typed here can land in a URL.
      var form = el("form", { cls: "runstart", method: "post", action: "/api/runs", novalidate: "" }, [
        el("div", { cls: "fields" }, [field("Agent", agent)]), cmdBox, llmBox,
        el("div", { cls: "runactions" }, [start, el("span", { cls: "runcaps", text: caps })]), err
      ]);

      function sync() {
        cmdBox.hidden = agent.value !== "command";
        llmBox.hidden = agent.value !== "llm";
      }
      agent.addEventListener("change", sync);
      provider.addEventListener("change", function () { endpoint.placeholder = PROVIDERS[provider.value] || ""; });
      sync();

      form.addEventListener("submit", function (ev) {
        ev.preventDefault();
        if (start.disabled) return;
        err.hidden = true;
        var body = { env: env, task: task, agent: agent.value };
        if (agent.value === "command") body.command = command.value;
        if (agent.value === "llm") {
          body.provider = provider.value;
          body.model = model.value.trim();
          body.endpoint = endpoint.value.trim();
          if (key.value) body.api_key = key.value;
          if (steps.value) body.max_steps = parseInt(steps.value, 10);
        }
        start.disabled = true;
        start.textContent = "Starting…";
        fetch("/api/runs", {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": session.csrf, "Accept": "application/json" },
          body: JSON.stringify(body)
        }).then(function (r) {
          return r.json().catch(function () { return {}; }).then(function (answer) {
            if (!r.ok) throw new Error(answer.error || "the explorer answered HTTP " + r.status);
            return answer;
          });
        }).then(function (answer) {
          start.textContent = "Running…";
          showLive(answer.id, agent.value, function () { start.disabled = false; start.textContent = "Start run"; });
          loadList();
        }).catch(function (e) {
          err.textContent = e.message || "could not start the run";
          err.hidden = false;
          start.disabled = false;
          start.textContent = "Start run";
        });
      });
      formBox.textContent = "";
      formBox.appendChild(form);
    }

    function showLive(runId, agentName, done) {
      if (source) source.close();
      current = runId;
      var status = statusNode("queued");
      var big = el("p", { cls: "bigreward r-none" }, [el("span", { cls: "lbl", text: "Reward" }), document.createTextNode(" "),
        el("span", { cls: "val", text: "…" })]);
      var events = el("ol", { cls: "events" });
      live.textContent = "";
      live.setAttribute("data-run", runId);
      live.appendChild(el("div", { cls: "livehead" }, [
        el("span", { cls: "liveagent", text: agentName }), status,
        el("a", { href: "/r/" + encodeURIComponent(runId), cls: "runlink", text: "run " + runId }), big
      ]));
      live.appendChild(events);
      live.hidden = false;
      source = follow(runId, 0, {
        event: function (ev) {
          var atBottom = events.scrollHeight - events.scrollTop - events.clientHeight < 40;
          events.appendChild(eventNode(ev));
          if (atBottom) events.scrollTop = events.scrollHeight;
          var d = ev.data || {};
          if (ev.kind === "status") status = swap(status, statusNode(d.status));
          if (ev.kind === "reward") setBigReward(big, d.reward);
        },
        end: function (data, lost) {
          source = null;
          if (lost) live.appendChild(el("p", { cls: "runerr", role: "alert", text: "Lost the connection to the run: open the run page to see how it ends." }));
          else if (data.status && !FINAL[status.textContent]) status = swap(status, statusNode(data.status));
          if (big.querySelector(".val").textContent === "…") setBigReward(big, null);
          live.setAttribute("data-done", "1");
          if (current === runId) done();
          loadList();
        }
      });
    }

    var picked = {};
    function loadList() {
      getJSON("/api/runs?env=" + encodeURIComponent(env) + "&task=" + encodeURIComponent(task)).then(function (answer) {
        drawList(answer.runs || []);
      }).catch(function () { /* keep the list shown */ });
    }

    function drawList(runs) {
      var all = listBox.getAttribute("data-all");
      var compare = el("button", { type: "button", cls: "btn", text: "Compare selected" });
      var hint = el("span", { cls: "runcaps", text: "Pick two or more runs to compare." });
      function update() {
        var ids = Object.keys(picked).filter(function (id) { return picked[id]; });
        compare.disabled = ids.length < 2;
      }
      var box = el("div", { cls: "runlistbox" }, [el("h3", { text: "Runs of this task" })]);
      if (!runs.length) {
        box.appendChild(el("p", { cls: "empty", text: "No runs yet." }));
      } else {
        var known = {};
        var rows = runs.map(function (r) {
          known[r.id] = 1;
          var pick = el("input", { type: "checkbox", cls: "pick", value: r.id, "aria-label": "Compare run " + r.id });
          pick.checked = !!picked[r.id];
          pick.addEventListener("change", function () { picked[r.id] = pick.checked; update(); });
          return el("tr", { "data-run": r.id }, [
            el("td", { cls: "pickc" }, [pick]),
            el("td", { cls: "rid" }, [el("a", { href: "/r/" + encodeURIComponent(r.id), text: r.id })]),
            el("td", { cls: "agent", text: txt(r.agent) }),
            el("td", {}, [statusNode(r.status)]),
            el("td", {}, [rewardNode(r.reward)]),
            el("td", { cls: "when", text: when(r.created) })
          ]);
        });
        Object.keys(picked).forEach(function (id) { if (!known[id]) delete picked[id]; });
        var head = el("tr", {}, [el("th", { cls: "pickc" }, [el("span", { cls: "sr", text: "Compare" })])].concat(
          ["Run", "Agent", "Status", "Reward"].map(function (h) { return el("th", { text: h }); }),
          [el("th", { cls: "when", text: "Started" })]));
        box.appendChild(el("div", { cls: "tablewrap" }, [el("table", { cls: "runs" }, [el("thead", {}, [head]), el("tbody", {}, rows)])]));
        compare.addEventListener("click", function () {
          var ids = runs.map(function (r) { return r.id; }).filter(function (id) { return picked[id]; });
          if (ids.length >= 2) location.href = "/compare?ids=" + ids.map(encodeURIComponent).join(",");
        });
        box.appendChild(el("div", { cls: "runactions" }, [compare, hint]));
        update();
      }
      if (all) box.appendChild(el("p", {}, [el("a", { href: all, text: "All runs of this task" })]));
      listBox.textContent = "";
      listBox.appendChild(box);
    }
  }

  // -- a run page: follow the run while it runs, then take the server's final summary

  function setupRunPage(section) {
    var runId = section.getAttribute("data-run"), list = document.getElementById("events");
    if (section.getAttribute("data-live") !== "1" || !list || !runId) return;
    var last = 0, items = list.querySelectorAll("li[data-seq]");
    if (items.length) last = parseInt(items[items.length - 1].getAttribute("data-seq"), 10) || 0;
    follow(runId, last, {
      event: function (ev) {
        list.appendChild(eventNode(ev));
        var d = ev.data || {};
        var cell;
        if (ev.kind === "status" && (cell = section.querySelector("[data-f=status]"))) {
          cell.textContent = "";
          cell.appendChild(statusNode(d.status));
        }
        if (ev.kind === "reward") {
          if ((cell = section.querySelector("[data-f=reward]"))) { cell.textContent = ""; cell.appendChild(rewardNode(d.reward)); }
          setBigReward(section.querySelector("[data-f=bigreward]"), d.reward);
        }
      },
      end: function (data, lost) {
        var note = section.querySelector("[data-f=livenote]");
        if (lost) { if (note) note.textContent = "Lost the connection to the run: reload the page to see how it ends."; return; }
        // The server's own rendering of the finished run: summary (duration, error) and details.
        fetch(location.pathname, { credentials: "same-origin", headers: { "Accept": "text/html" } })
          .then(function (r) { return r.ok ? r.text() : null; })
          .then(function (text) {
            if (text === null || !window.DOMParser) throw new Error("no page");
            var doc = new DOMParser().parseFromString(text, "text/html");
            var fresh = doc.getElementById("run"), details = doc.getElementById("details");
            if (!fresh) throw new Error("no run");
            if (details && !document.getElementById("details")) section.after(document.importNode(details, true));
            section.replaceWith(document.importNode(fresh, true));
          })
          .catch(function () {
            section.setAttribute("data-live", "0");
            if (note) note.remove();
          });
      }
    });
  }

  // -- run lists: the checked runs go into ids=a,b when the compare form is sent

  function setupCompareForm(form) {
    var ids = form.querySelector("input[name=ids]"), err = form.querySelector(".runerr");
    if (!ids) return;
    form.addEventListener("change", function () { if (err) err.hidden = true; });
    form.addEventListener("submit", function (ev) {
      var picked = Array.prototype.map.call(form.querySelectorAll("input.pick:checked"), function (c) { return c.value; });
      if (picked.length < 2) {
        ev.preventDefault();
        if (err) { err.textContent = "Pick two or more runs to compare."; err.hidden = false; }
        return;
      }
      ids.value = picked.join(",");
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!window.fetch) return;
    var panel = document.querySelector("section#runs[data-env][data-task]");
    if (panel) setupPanel(panel);
    var run = document.querySelector("section#run[data-run]");
    if (run) setupRunPage(run);
    var forms = document.querySelectorAll("form.compare");
    for (var i = 0; i < forms.length; i++) setupCompareForm(forms[i]);
  });
})();
