// didnmf dashboard: the cluster and its jobs, live over server-sent events.
//
// No framework and nothing from the internet. Every string from the API reaches the page
// through textContent or an attribute set by the DOM API, never through innerHTML; links
// from the API are kept only when they are http(s). The page follows /api/v1/events (the
// cluster and the job list) and, for the job the user selects, /api/v1/jobs/{id}/events (its
// history and timeline). When the cluster stream breaks, it says which node went away,
// offers the other members' dashboards, and retries with backoff.
"use strict";

(function () {
  const SVGNS = "http://www.w3.org/2000/svg";
  const ENDED = new Set(["done", "failed", "canceled"]);
  const EVENT_KINDS = ["started", "checkpoint", "failure", "recovered", "takeover", "paused", "resumed", "ended"];
  const MAX_POINTS = 4096; // client-side bound on a followed job's history

  const state = {
    who: null, // {name, role}
    cluster: null, // ClusterView
    jobs: [], // [JobView] without history
    selected: "", // job id followed
    detail: null, // JobView with history and events
    detailMissing: false,
    armed: new Map(), // job id -> time a cancel was armed (second click confirms)
    canceling: new Set(),
    timelineAxis: "time",
    lastUpdate: 0,
  };

  // ---- small DOM helpers (text only) ----

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    if (attrs) for (const k of Object.keys(attrs)) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  // cell makes a table cell labelled for the phone layout (td::before shows the label).
  function cell(label, ...content) {
    const td = el("td");
    td.setAttribute("data-label", label);
    const parts = content.filter((c) => c !== null && c !== undefined && c !== "");
    if (parts.length === 0) return td;
    const holder = parts.length === 1 ? td : el("div");
    for (const c of parts) holder.append(c instanceof Node ? c : document.createTextNode(String(c)));
    if (holder !== td) td.append(holder);
    return td;
  }

  function numCell(label, ...content) {
    const td = cell(label, ...content);
    td.classList.add("num");
    return td;
  }

  // safeURL returns u when it is an absolute http(s) URL, else "".
  function safeURL(u) {
    if (typeof u !== "string" || u === "") return "";
    try {
      const p = new URL(u);
      return p.protocol === "http:" || p.protocol === "https:" ? p.href : "";
    } catch (e) {
      return "";
    }
  }

  function stateBadge(s) {
    const b = el("span", "state", s || "unknown");
    if (s) b.classList.add("state-" + String(s).replace(/[^a-z]/g, ""));
    return b;
  }

  function bar(fraction, title) {
    const b = el("div", "bar");
    const f = el("div", "bar-fill");
    const x = Number.isFinite(fraction) ? Math.max(0, Math.min(1, fraction)) : 0;
    f.style.width = (x * 100).toFixed(1) + "%";
    if (x >= 0.95) f.classList.add("full");
    else if (x >= 0.8) f.classList.add("hot");
    b.append(f);
    if (title) b.title = title;
    return b;
  }

  // ---- formatting ----

  function bytes(n) {
    if (!Number.isFinite(n) || n <= 0) return "0 B";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
  }

  function duration(s) {
    if (!Number.isFinite(s) || s <= 0) return "";
    if (s < 1) return "<1s";
    s = Math.round(s);
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (d > 0) return d + "d " + h + "h";
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m " + sec + "s";
    return sec + "s";
  }

  function sci(x) {
    if (!Number.isFinite(x)) return "";
    if (x === 0) return "0";
    return x.toExponential(3);
  }

  function int(n) {
    return Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "";
  }

  function clock(ms) {
    if (!ms) return "";
    const d = new Date(ms);
    const now = new Date();
    const hms = d.toLocaleTimeString("en-GB", { hour12: false });
    return d.toDateString() === now.toDateString() ? hms : d.toISOString().slice(0, 10) + " " + hms;
  }

  function memberByActor() {
    const m = new Map();
    for (const mem of (state.cluster && state.cluster.members) || []) {
      if (mem.actor) m.set(mem.actor, mem.name);
    }
    return m;
  }

  // shardPlaces lists the nodes a job's shards run on: "n1: 0, 2" per node.
  function shardPlaces(job) {
    const names = memberByActor();
    const by = new Map();
    (job.shard_nodes || []).forEach((addr, i) => {
      const name = names.get(addr) || addr || "?";
      if (!by.has(name)) by.set(name, []);
      by.get(name).push(i);
    });
    const ul = el("ul", "nodes");
    for (const [name, ids] of by) {
      ul.append(el("li", "", name + ": " + (ids.length > 6 ? ids.length + " shards" : "shard " + ids.join(", "))));
    }
    return ul;
  }

  function jobURL(id) { return "/api/v1/jobs/" + encodeURIComponent(id); }

  function outputURL(id, name) {
    return jobURL(id) + "/outputs/" + String(name).split("/").map(encodeURIComponent).join("/");
  }

  // ---- header, banners ----

  function renderHeader() {
    const c = state.cluster;
    $("node-name").textContent = c ? c.self : "…";
    $("node-version").textContent = c && c.version ? c.version : "";
    if (c) document.title = "didnmf · " + c.self;
    $("whoami").textContent = state.who ? state.who.name + " (" + state.who.role + ")" : "";
  }

  function renderWarnings() {
    const ul = $("warnings");
    ul.replaceChildren();
    const ws = (state.cluster && state.cluster.warnings) || [];
    for (const w of ws) ul.append(el("li", "", w));
    ul.hidden = ws.length === 0;
  }

  function setConn(kind, text) {
    const c = $("conn");
    c.className = "conn conn-" + kind;
    c.textContent = text;
  }

  let noticeTimer = 0;
  function notice(text) {
    const n = $("notice");
    n.textContent = text;
    n.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => { n.hidden = true; }, 8000);
  }

  function showAway() {
    const c = state.cluster;
    const self = c ? c.self : location.host;
    $("away-text").textContent = "node " + self + " went away: this page cannot reach it (retrying).";
    const others = $("away-others");
    others.replaceChildren();
    const alive = ((c && c.members) || []).filter((m) => m.name !== self && m.state === "alive" && safeURL(m.http));
    if (alive.length > 0) {
      others.append(document.createTextNode("The cluster's other members serve a dashboard too: "));
      for (const m of alive) {
        const a = el("a", "", m.name);
        a.href = safeURL(m.http);
        a.setAttribute("data-member", m.name);
        others.append(a);
      }
    } else {
      others.textContent = "No other member with a dashboard is known.";
    }
    $("away").hidden = false;
    document.body.classList.add("stale");
  }

  function hideAway() {
    $("away").hidden = true;
    document.body.classList.remove("stale");
  }

  // loggedOut stops the streams and offers the login form: the session expired, or the node
  // restarted and forgot it. (No automatic navigation: a page that reloads itself on 401 could
  // loop.)
  function loggedOut() {
    clearTimeout(retryTimer);
    if (clusterStream) { clusterStream.close(); clusterStream = null; }
    stopFollowing();
    setConn("down", "logged out");
    $("away-text").textContent = "You are not logged in to node " + (state.cluster ? state.cluster.self : location.host) + " (the session ended or the node restarted).";
    const a = el("a", "", "log in again");
    a.href = "/";
    $("away-others").replaceChildren(a);
    $("away").hidden = false;
    document.body.classList.add("stale");
  }

  // ---- members ----

  function renderMembers() {
    const tbody = $("members").tBodies[0];
    tbody.replaceChildren();
    const ms = ((state.cluster && state.cluster.members) || []).slice();
    const order = { alive: 0, suspect: 1, left: 2, dead: 3 };
    ms.sort((a, b) => (order[a.state] ?? 4) - (order[b.state] ?? 4) || a.name.localeCompare(b.name));
    let alive = 0;
    for (const m of ms) {
      if (m.state === "alive") alive++;
      const tr = el("tr", "member-" + String(m.state).replace(/[^a-z]/g, ""));
      tr.setAttribute("data-member", m.name);
      tr.setAttribute("data-state", m.state);
      let name = el("strong", "", m.name);
      const href = safeURL(m.http);
      if (href) {
        const a = el("a", "", m.name);
        a.href = href;
        a.title = "this member's dashboard";
        name = a;
      }
      const self = state.cluster && m.name === state.cluster.self ? el("span", "muted small", " (this node)") : null;
      tr.append(cell("name", name, self));
      tr.append(cell("state", stateBadge(m.state)));
      tr.append(cell("role", m.role));
      const addrs = el("div", "mono");
      addrs.append(el("div", "", "actor " + (m.actor || "?")), el("div", "", "gossip " + (m.gossip || "?")));
      if (m.http) addrs.append(el("div", "", "http " + m.http));
      tr.append(cell("addresses", addrs));
      const mach = el("div");
      if (m.machine) mach.append(el("div", "", m.machine));
      if (m.started_unix_ms && m.state === "alive") mach.append(el("div", "small muted", "up " + duration((Date.now() - m.started_unix_ms) / 1000)));
      tr.append(cell("machine", mach.childNodes.length ? mach : ""));
      tr.append(numCell("cores", m.cores ? m.cores + (m.threads && m.threads !== m.cores ? " (" + m.threads + " threads)" : "") : ""));
      const off = m.memory_offered || 0, res = m.memory_reserved || 0;
      const mem = el("div");
      mem.append(el("div", "small", bytes(res) + " / " + bytes(off)), bar(off > 0 ? res / off : 0, "reserved by shards / offered for job data"));
      tr.append(cell("memory reserved / offered", mem));
      const load = el("div");
      if (m.error) {
        load.append(el("div", "small error-text", m.error));
      } else {
        load.append(el("div", "small", Math.round((m.load || 0) * 100) + " %"), bar(m.load || 0, "CPU seconds over wall seconds × cores"));
      }
      tr.append(cell("load", load));
      tr.append(numCell("jobs / shards", (m.jobs || 0) + " / " + (m.shards || 0)));
      tr.append(cell("version", m.version || ""));
      tbody.append(tr);
    }
    $("members-count").textContent = ms.length ? alive + " of " + ms.length + " alive" : "";
  }

  // ---- jobs ----

  function jobLink(j) {
    const a = el("a", "job-link", j.id);
    a.href = "#job=" + encodeURIComponent(j.id);
    return a;
  }

  function sizeText(j) {
    return j.samples || j.features ? int(j.samples) + " × " + int(j.features) : "";
  }

  function iterationCell(j) {
    const d = el("div");
    d.append(el("div", "small iter", int(j.iteration) + (j.max_iter ? " / " + int(j.max_iter) : "")));
    if (j.max_iter) d.append(bar(j.iteration / j.max_iter));
    return d;
  }

  function cancelButton(j) {
    const b = el("button", "cancel", "cancel");
    b.type = "button";
    b.setAttribute("data-cancel", j.id);
    const armedAt = state.armed.get(j.id);
    if (state.canceling.has(j.id)) {
      b.textContent = "canceling…";
      b.disabled = true;
    } else if (armedAt && Date.now() - armedAt < 5000) {
      b.textContent = "confirm cancel";
      b.classList.add("armed");
    }
    b.addEventListener("click", (ev) => {
      ev.stopPropagation();
      const at = state.armed.get(j.id);
      if (at && Date.now() - at < 5000) {
        state.armed.delete(j.id);
        cancelJob(j.id);
      } else {
        const now = Date.now();
        state.armed.set(j.id, now);
        b.textContent = "confirm cancel";
        b.classList.add("armed");
        // Disarm after 5 s unless confirmed (or re-armed) meanwhile.
        setTimeout(() => {
          if (state.armed.get(j.id) !== now) return;
          state.armed.delete(j.id);
          renderJobs();
        }, 5100);
      }
    });
    return b;
  }

  function errorText(e) {
    if (!e) return "";
    return (e.kind ? e.kind + ": " : "") + (e.message || "") + (e.field ? " (" + e.field + ")" : "");
  }

  function jobRow(j, ended) {
    const tr = el("tr", "selectable");
    tr.setAttribute("data-job", j.id);
    tr.setAttribute("data-state", j.state);
    if (j.id === state.selected) tr.classList.add("selected");
    tr.addEventListener("click", (ev) => {
      if (ev.target.closest("a,button")) return;
      select(j.id);
    });
    tr.append(cell("job", jobLink(j)));
    tr.append(cell("owner", j.owner));
    tr.append(cell("algorithm", j.algorithm));
    tr.append(numCell("samples × features", sizeText(j)));
    tr.append(numCell("rank", j.rank ? String(j.rank) : ""));
    const sh = el("div");
    sh.append(el("div", "small", (j.shards || 0) + (j.shards === 1 ? " shard" : " shards")), shardPlaces(j));
    tr.append(cell("shards on", sh));
    tr.append(numCell(ended ? "iterations" : "iteration", ended ? el("span", "iter", int(j.iteration)) : iterationCell(j)));
    tr.append(numCell("rel_err2", j.rel_err2 ? sci(j.rel_err2) : ""));
    if (ended) {
      tr.append(numCell("ended", clock(j.ended_unix_ms)));
      tr.append(cell("stopped because", j.stop || ""));
      tr.append(cell("state", stateBadge(j.state)));
      tr.append(cell("error", j.error ? el("span", "error-text", errorText(j.error)) : ""));
    } else {
      tr.append(numCell("rate", j.rate ? j.rate.toFixed(j.rate < 10 ? 2 : 1) + " it/s" : ""));
      tr.append(numCell("ETA", duration(j.eta_seconds)));
      tr.append(cell("stop rule", j.stop_rule || ""));
      tr.append(cell("state", stateBadge(j.state)));
      tr.append(cell("", cancelButton(j)));
    }
    return tr;
  }

  function renderJobs() {
    const running = state.jobs.filter((j) => !ENDED.has(j.state));
    const ended = state.jobs.filter((j) => ENDED.has(j.state));
    running.sort((a, b) => (a.submitted_unix_ms || 0) - (b.submitted_unix_ms || 0) || a.id.localeCompare(b.id));
    ended.sort((a, b) => (b.ended_unix_ms || 0) - (a.ended_unix_ms || 0) || a.id.localeCompare(b.id));
    const rb = $("running").tBodies[0], eb = $("ended").tBodies[0];
    rb.replaceChildren(...running.map((j) => jobRow(j, false)));
    eb.replaceChildren(...ended.map((j) => jobRow(j, true)));
    $("running").hidden = running.length === 0;
    $("ended").hidden = ended.length === 0;
    $("running-empty").hidden = running.length !== 0;
    $("ended-empty").hidden = ended.length !== 0;
    $("running-count").textContent = running.length ? String(running.length) : "";
    $("ended-count").textContent = ended.length ? String(ended.length) : "";
  }

  async function cancelJob(id) {
    state.canceling.add(id);
    renderJobs();
    try {
      const r = await fetch(jobURL(id), { method: "DELETE", headers: { "X-Didnmf-CSRF": "1" }, credentials: "same-origin" });
      if (!r.ok) notice("cancel " + id + ": " + (await errorOf(r)));
    } catch (e) {
      notice("cancel " + id + ": " + e.message);
    } finally {
      state.canceling.delete(id);
      renderJobs();
    }
  }

  async function errorOf(r) {
    try {
      const e = await r.json();
      if (e && e.message) return errorText(e);
    } catch (e) { /* not JSON */ }
    return r.status + " " + r.statusText;
  }

  // ---- the followed job ----

  let jobStream = null, jobRetry = 0, jobRetryTimer = 0;

  function select(id) {
    if (id === state.selected) {
      return;
    }
    if (location.hash !== (id ? "#job=" + encodeURIComponent(id) : "")) {
      history.replaceState(null, "", id ? "#job=" + encodeURIComponent(id) : location.pathname + location.search);
    }
    state.selected = id;
    state.detail = null;
    state.detailMissing = false;
    follow();
    renderJobs();
    renderDetail();
    if (id) $("job-detail").scrollIntoView({ block: "nearest" });
  }

  function stopFollowing() {
    if (jobStream) { jobStream.close(); jobStream = null; }
    clearTimeout(jobRetryTimer);
  }

  function follow() {
    stopFollowing();
    const id = state.selected;
    if (!id) return;
    const es = new EventSource(jobURL(id) + "/events");
    jobStream = es;
    const on = (name, fn) => es.addEventListener(name, (ev) => {
      if (jobStream !== es) return;
      let v;
      try { v = JSON.parse(ev.data); } catch (e) { return; }
      jobRetry = 0;
      fn(v);
      renderDetail();
    });
    on("job", (v) => { state.detail = v; trimHistory(v); });
    on("progress", (v) => mergeProgress(v));
    on("end", (v) => {
      state.detail = v;
      trimHistory(v);
      es.close();
      if (jobStream === es) jobStream = null;
    });
    es.onerror = () => {
      if (jobStream !== es) return;
      es.close();
      jobStream = null;
      checkJobGone(id);
    };
  }

  // checkJobGone asks for the job once the stream failed: a 404 ends the following, anything
  // else retries with backoff.
  async function checkJobGone(id) {
    try {
      const r = await fetch(jobURL(id), { credentials: "same-origin" });
      if (state.selected !== id) return;
      if (r.status === 404) {
        state.detailMissing = true;
        renderDetail();
        return;
      }
      if (r.ok) {
        const v = await r.json();
        if (state.selected !== id) return;
        state.detail = v;
        trimHistory(v);
        renderDetail();
        if (ENDED.has(v.state)) return;
      }
    } catch (e) { /* the node is away: the cluster stream says so */ }
    if (state.selected !== id) return;
    jobRetry = Math.min(jobRetry + 1, 5);
    jobRetryTimer = setTimeout(follow, 1000 * Math.pow(2, jobRetry - 1));
  }

  function mergeProgress(v) {
    const d = state.detail;
    if (!d || d.id !== v.id) { state.detail = v; return; }
    const hist = d.history || [];
    const last = hist.length ? hist[hist.length - 1].iteration : -Infinity;
    for (const p of v.history || []) if (p.iteration > last) hist.push(p);
    const evs = d.events || [];
    for (const e of v.events || []) evs.push(e);
    if (evs.length > 512) evs.splice(0, evs.length - 512);
    Object.assign(d, v);
    d.history = hist;
    d.events = evs;
    trimHistory(d);
  }

  // trimHistory keeps a long followed job's history bounded: every other point, the last kept.
  function trimHistory(d) {
    const h = d.history;
    if (!h || h.length <= MAX_POINTS) return;
    const kept = h.filter((_, i) => i % 2 === 0);
    if (kept[kept.length - 1] !== h[h.length - 1]) kept.push(h[h.length - 1]);
    d.history = kept;
  }

  function renderDetail() {
    const sec = $("job-detail");
    const id = state.selected;
    if (!id) { sec.hidden = true; return; }
    sec.hidden = false;
    $("detail-id").textContent = id;
    // The list is fresher for the scalar fields when the job stream lags.
    const listed = state.jobs.find((j) => j.id === id);
    const d = state.detail || listed;
    const st = $("detail-state");
    if (state.detailMissing && !listed) {
      st.replaceChildren();
      $("detail-summary").textContent = "No member knows this job (or it is not yours to see).";
      $("detail-iteration").textContent = "";
      $("detail-bar").style.width = "0";
      $("detail-error").hidden = true;
      $("chart").replaceChildren();
      $("timeline").replaceChildren();
      $("timeline-legend").replaceChildren();
      $("events").tBodies[0].replaceChildren();
      $("outputs-block").hidden = true;
      return;
    }
    if (!d) {
      $("detail-summary").textContent = "loading…";
      return;
    }
    const j = Object.assign({}, d);
    if (listed && state.detail && (listed.iteration > j.iteration || (ENDED.has(listed.state) && !ENDED.has(j.state)))) {
      Object.assign(j, listed, { history: d.history, events: d.events });
    }
    st.replaceChildren(stateBadge(j.state));
    const parts = [
      j.algorithm, "rank " + j.rank, sizeText(j) ? sizeText(j) + " (samples × features)" : "",
      j.shards + (j.shards === 1 ? " shard" : " shards"), "owner " + j.owner,
      j.coordinator ? "coordinated by " + j.coordinator : "", j.stop_rule ? "stop: " + j.stop_rule : "",
      j.stop ? "stopped: " + j.stop : "", j.recoveries ? j.recoveries + " recoveries" : "",
      j.checkpoints ? j.checkpoints + " checkpoints" : "", j.detached ? "detached" + (j.out_shared ? " → " + j.out_shared : "") : "",
    ].filter(Boolean);
    $("detail-summary").textContent = parts.join(" · ");
    const it = $("detail-iteration");
    it.textContent = "iteration " + int(j.iteration) + (j.max_iter ? " / " + int(j.max_iter) : "") +
      (j.rel_err2 ? " · rel_err2 " + sci(j.rel_err2) : "") +
      (!ENDED.has(j.state) && j.rate ? " · " + j.rate.toFixed(2) + " it/s" : "") +
      (!ENDED.has(j.state) && j.eta_seconds ? " · ETA " + duration(j.eta_seconds) : "");
    it.setAttribute("data-iteration", String(j.iteration || 0));
    const frac = j.max_iter ? Math.min(1, (j.iteration || 0) / j.max_iter) : (ENDED.has(j.state) ? 1 : 0);
    $("detail-bar").style.width = (frac * 100).toFixed(1) + "%";
    const de = $("detail-error");
    de.hidden = !j.error;
    de.textContent = errorText(j.error);
    $("detail-spec").hidden = !j.spec;
    $("detail-spec-json").textContent = j.spec ? JSON.stringify(j.spec, null, 2) : "";
    drawConvergence($("chart"), j.history || [], j.events || []);
    drawTimeline($("timeline"), j);
    renderEvents(j.events || []);
    renderOutputs(j);
  }

  function renderEvents(events) {
    const tbody = $("events").tBodies[0];
    tbody.replaceChildren();
    for (const e of events.slice().reverse()) {
      const tr = el("tr", "event-" + eventClass(e.kind));
      tr.setAttribute("data-kind", e.kind);
      tr.append(numCell("time", clock(e.unix_ms)));
      const k = el("span");
      k.append(markerIcon(e.kind), document.createTextNode(e.kind));
      tr.append(cell("event", k));
      tr.append(numCell("iteration", int(e.iteration)));
      tr.append(cell("what", e.text || ""));
      tbody.append(tr);
    }
    $("events").hidden = events.length === 0;
  }

  function renderOutputs(j) {
    const block = $("outputs-block");
    const outs = j.outputs || [];
    if (!ENDED.has(j.state) || outs.length === 0) {
      block.hidden = true;
      return;
    }
    block.hidden = false;
    const ul = $("outputs");
    const figs = $("figures");
    // Pictures load once; replacing them on each update would flicker.
    const key = j.id + "\n" + outs.join("\n");
    if (block.getAttribute("data-key") === key) return;
    block.setAttribute("data-key", key);
    ul.replaceChildren();
    figs.replaceChildren();
    for (const name of outs) {
      const li = el("li");
      const a = el("a", "", name);
      a.href = outputURL(j.id, name);
      // The arrays download; the report and the pictures open in the browser.
      if (name.endsWith(".npy")) a.setAttribute("download", j.id + "-" + name.split("/").pop());
      li.append(a);
      ul.append(li);
      if (/^figures\/[^/]+\.png$/.test(name)) {
        const f = el("figure");
        const img = el("img");
        img.src = outputURL(j.id, name);
        img.alt = name;
        img.loading = "lazy";
        f.append(img, el("figcaption", "", name));
        figs.append(f);
      }
    }
  }

  // ---- charts ----

  function chartWidth(box) {
    return Math.max(260, Math.floor(box.clientWidth || box.getBoundingClientRect().width || 600));
  }

  // niceStep returns a step of 1, 2 or 5 × 10^k giving about n intervals over span.
  function niceStep(span, n) {
    if (!(span > 0)) return 1;
    const raw = span / Math.max(1, n);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function textWidth(s) { return String(s).length * 6.5 + 4; }

  // linearTicks places ticks on [lo, hi] whose labels (format(v)) do not overprint in width px.
  function linearTicks(lo, hi, width, format) {
    let n = Math.max(1, Math.floor(width / 70));
    for (;;) {
      const step = niceStep(hi - lo, n);
      const ticks = [];
      for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
      const widest = Math.max(...ticks.map((v) => textWidth(format(v))), 1);
      if (n === 1 || ticks.length < 2 || (width / (ticks.length - 1 || 1)) * 0.9 >= widest) return ticks;
      n--;
    }
  }

  // timeTicks places ticks on [0, span] ms at round durations (1 s … 1 d), labels apart.
  function timeTicks(span, width) {
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400].map((x) => x * 1000);
    const most = Math.max(1, Math.floor(width / 90));
    const step = steps.find((st) => span / st <= most) || Math.ceil(span / most / 86400000) * 86400000;
    const ticks = [];
    for (let v = 0; v <= span + 1e-6; v += step) ticks.push(v);
    return ticks;
  }

  // decadeLabel writes 10^k as "10" with a raised exponent.
  function decadeLabel(t, k) {
    t.append(document.createTextNode("10"));
    const sup = svg("tspan", { dy: "-5", "font-size": "9" }, String(k));
    t.append(sup);
  }

  function drawConvergence(box, history, events) {
    const width = chartWidth(box);
    const height = width < 500 ? 200 : 260;
    const m = { l: 44, r: 12, t: 20, b: 34 };
    const pw = width - m.l - m.r, ph = height - m.t - m.b;
    const s = svg("svg", { width, height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "rel_err2 over iterations, log scale" });
    s.setAttribute("data-points", String(history.length));
    const train = history.filter((p) => Number.isFinite(p.rel_err2) && p.rel_err2 > 0);
    const test = history.filter((p) => Number.isFinite(p.test_rel_err2) && p.test_rel_err2 > 0);
    if (train.length === 0 && test.length === 0) {
      s.setAttribute("height", "40");
      s.setAttribute("viewBox", "0 0 " + width + " 40");
      s.append(svg("text", { x: 8, y: 24, class: "empty" }, "no convergence history yet"));
      box.replaceChildren(s);
      return;
    }
    const all = train.map((p) => p.rel_err2).concat(test.map((p) => p.test_rel_err2));
    let lo = Math.floor(Math.log10(Math.min(...all)));
    let hi = Math.ceil(Math.log10(Math.max(...all)));
    if (hi <= lo) hi = lo + 1;
    const iters = history.map((p) => p.iteration);
    let x0 = Math.min(...iters), x1 = Math.max(...iters);
    if (x1 <= x0) x1 = x0 + 1;
    const X = (it) => m.l + ((it - x0) / (x1 - x0)) * pw;
    const Y = (v) => m.t + (1 - (Math.log10(v) - lo) / (hi - lo)) * ph;

    // y axis: every decade a grid line; labels on every k-th decade so that they keep 14 px apart;
    // minor lines at 2..9 when decades are far enough apart to show them.
    const decadePx = ph / (hi - lo);
    const every = Math.max(1, Math.ceil(16 / decadePx));
    for (let k = lo; k <= hi; k++) {
      const y = Y(Math.pow(10, k));
      s.append(svg("line", { x1: m.l, x2: m.l + pw, y1: y, y2: y, class: "grid" }));
      if ((k - lo) % every === 0) {
        const t = svg("text", { x: m.l - 6, y: y + 4, "text-anchor": "end", class: "tick-y" });
        decadeLabel(t, k);
        s.append(t);
      }
      if (k < hi && decadePx >= 40) {
        for (let f = 2; f <= 9; f++) {
          const ym = Y(f * Math.pow(10, k));
          s.append(svg("line", { x1: m.l, x2: m.l + pw, y1: ym, y2: ym, class: "grid-minor" }));
        }
      }
    }
    // x axis: iterations.
    for (const v of linearTicks(x0, x1, pw, int)) {
      const x = X(v);
      s.append(svg("line", { x1: x, x2: x, y1: m.t + ph, y2: m.t + ph + 4, class: "axis" }));
      s.append(svg("text", { x, y: m.t + ph + 16, "text-anchor": "middle", class: "tick-x" }, int(v)));
    }
    s.append(svg("line", { x1: m.l, x2: m.l, y1: m.t, y2: m.t + ph, class: "axis" }));
    s.append(svg("line", { x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph, class: "axis" }));
    s.append(svg("text", { x: m.l + pw, y: height - 2, "text-anchor": "end" }, "iteration"));
    s.append(svg("text", { x: 2, y: 11 }, "rel_err2 (log scale)"));

    // failures and recoveries as dashed vertical lines at their iteration.
    for (const e of events) {
      if (!["failure", "recovered", "takeover"].includes(e.kind) || e.iteration < x0 || e.iteration > x1) continue;
      const x = X(e.iteration);
      const l = svg("line", { x1: x, x2: x, y1: m.t, y2: m.t + ph, class: "mark-line ev-" + eventClass(e.kind) });
      l.append(svg("title", {}, e.kind + " at iteration " + e.iteration + (e.text ? ": " + e.text : "")));
      s.append(l);
    }

    const path = (pts, get) => pts.map((p, i) => (i ? "L" : "M") + X(p.iteration).toFixed(1) + " " + Y(get(p)).toFixed(1)).join(" ");
    if (train.length) s.append(svg("path", { d: path(train, (p) => p.rel_err2), class: "series-train" }));
    if (test.length) s.append(svg("path", { d: path(test, (p) => p.test_rel_err2), class: "series-test" }));
    // Legend, top right.
    const series = [["series-train", "training rel_err2", train.length]];
    if (test.length) series.push(["series-test", "test rel_err2", test.length]);
    let ly = m.t + 14;
    for (const [cls, label] of series) {
      const lx = m.l + pw - textWidth(label) - 28;
      s.append(svg("line", { x1: lx, x2: lx + 20, y1: ly - 4, y2: ly - 4, class: cls }));
      s.append(svg("text", { x: lx + 24, y: ly }, label));
      ly += 15;
    }
    box.replaceChildren(s);
  }

  function eventClass(kind) {
    return EVENT_KINDS.includes(kind) ? kind : "other";
  }

  // marker draws an event's marker centred at (x, y): each kind its shape and colour.
  function marker(kind, x, y, r) {
    const cls = "marker ev-" + eventClass(kind);
    switch (eventClass(kind)) {
      case "failure": {
        const g = svg("path", { d: `M${x - r} ${y - r}L${x + r} ${y + r}M${x - r} ${y + r}L${x + r} ${y - r}`, class: cls, "stroke-width": 2.5 });
        return g;
      }
      case "checkpoint":
        return svg("rect", { x: x - r * 0.35, y: y - r, width: r * 0.7, height: r * 2, class: cls });
      case "takeover":
        return svg("path", { d: `M${x} ${y - r}L${x + r} ${y + r}L${x - r} ${y + r}Z`, class: cls });
      case "recovered":
        return svg("circle", { cx: x, cy: y, r, class: cls });
      case "ended":
        return svg("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r, class: cls });
      case "paused":
      case "resumed":
        return svg("path", { d: `M${x - r} ${y}L${x} ${y - r}L${x + r} ${y}L${x} ${y + r}Z`, class: cls });
      default:
        return svg("circle", { cx: x, cy: y, r: r * 0.8, class: cls });
    }
  }

  function markerIcon(kind) {
    const s = svg("svg", { width: 14, height: 14, viewBox: "0 0 14 14" });
    s.append(marker(kind, 7, 7, 5));
    return s;
  }

  // relTime writes a duration in ms as the time axis labels it: 45s, 1m30s, 2h15m, 1d.
  function relTime(ms) {
    const s = Math.round(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60 ? (s % 60) + "s" : "");
    if (s < 86400) return Math.floor(s / 3600) + "h" + (s % 3600 ? Math.round((s % 3600) / 60) + "m" : "");
    return Math.floor(s / 86400) + "d" + (s % 86400 >= 3600 ? Math.floor((s % 86400) / 3600) + "h" : "");
  }

  // drawTimeline puts a job's events on one lane per kind, along time (since submission) or
  // iterations, with a legend that counts each kind.
  function drawTimeline(box, j) {
    const events = j.events || [];
    const legend = $("timeline-legend");
    legend.replaceChildren();
    const width = chartWidth(box);
    if (events.length === 0) {
      const s = svg("svg", { width, height: 30, viewBox: `0 0 ${width} 30` });
      s.append(svg("text", { x: 8, y: 20, class: "empty" }, "no events yet"));
      box.replaceChildren(s);
      return;
    }
    const byIter = state.timelineAxis === "iteration";
    const kinds = EVENT_KINDS.filter((k) => events.some((e) => e.kind === k));
    if (events.some((e) => eventClass(e.kind) === "other")) kinds.push("other");
    const lane = 22;
    const m = { l: 78, r: 14, t: 8, b: 30 };
    const height = m.t + lane * kinds.length + m.b;
    const pw = width - m.l - m.r;
    const s = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "job timeline" });
    let x0, x1, fmt;
    if (byIter) {
      x0 = 0;
      x1 = Math.max(j.iteration || 0, ...events.map((e) => e.iteration || 0), 1);
      fmt = int;
    } else {
      const start = j.submitted_unix_ms || Math.min(...events.map((e) => e.unix_ms));
      const end = j.ended_unix_ms || Math.max(Date.now(), ...events.map((e) => e.unix_ms));
      x0 = 0;
      x1 = Math.max(end - start, 1000, ...events.map((e) => e.unix_ms - start));
      fmt = relTime;
      s.setAttribute("data-start", String(start));
      events.forEach((e) => { e._t = e.unix_ms - start; });
    }
    const X = (v) => m.l + ((v - x0) / (x1 - x0)) * pw;
    kinds.forEach((k, i) => {
      const y = m.t + lane * i + lane / 2;
      s.append(svg("line", { x1: m.l, x2: m.l + pw, y1: y, y2: y, class: "grid" }));
      s.append(svg("text", { x: m.l - 8, y: y + 4, "text-anchor": "end" }, k));
    });
    const axisY = m.t + lane * kinds.length;
    s.append(svg("line", { x1: m.l, x2: m.l + pw, y1: axisY, y2: axisY, class: "axis" }));
    for (const v of byIter ? linearTicks(x0, x1, pw, fmt) : timeTicks(x1, pw)) {
      const x = X(v);
      s.append(svg("line", { x1: x, x2: x, y1: axisY, y2: axisY + 4, class: "axis" }));
      s.append(svg("text", { x, y: axisY + 16, "text-anchor": "middle" }, fmt(v)));
    }
    s.append(svg("text", { x: m.l + pw, y: height - 2, "text-anchor": "end" }, byIter ? "iteration" : "time since submission"));
    for (const e of events) {
      const i = kinds.indexOf(eventClass(e.kind) === "other" ? "other" : e.kind);
      const v = byIter ? e.iteration || 0 : e._t;
      const mk = marker(e.kind, X(Math.max(x0, Math.min(x1, v))), m.t + lane * i + lane / 2, 6);
      mk.setAttribute("data-kind", e.kind);
      mk.append(svg("title", {}, e.kind + " · iteration " + e.iteration + " · " + clock(e.unix_ms) + (e.text ? " · " + e.text : "")));
      s.append(mk);
    }
    box.replaceChildren(s);
    for (const k of kinds) {
      const n = events.filter((e) => (k === "other" ? eventClass(e.kind) === "other" : e.kind === k)).length;
      const li = el("li");
      li.setAttribute("data-kind", k);
      li.append(markerIcon(k), document.createTextNode(k + " (" + n + ")"));
      legend.append(li);
    }
  }

  // ---- the cluster stream, with "went away" and retry ----

  let clusterStream = null, retry = 0, retryTimer = 0;

  function connect() {
    clearTimeout(retryTimer);
    if (clusterStream) clusterStream.close();
    setConn("wait", "connecting");
    const es = new EventSource("/api/v1/events");
    clusterStream = es;
    const live = () => {
      retry = 0;
      hideAway();
      setConn("live", "live");
      state.lastUpdate = Date.now();
    };
    es.addEventListener("cluster", (ev) => {
      let v;
      try { v = JSON.parse(ev.data); } catch (e) { return; }
      live();
      state.cluster = v;
      renderHeader();
      renderWarnings();
      renderMembers();
      renderJobs(); // shard places name members
    });
    es.addEventListener("jobs", (ev) => {
      let v;
      try { v = JSON.parse(ev.data); } catch (e) { return; }
      live();
      state.jobs = (v && v.jobs) || [];
      renderJobs();
      if (state.selected) renderDetail();
    });
    es.onopen = () => { setConn("live", "live"); };
    es.onerror = () => {
      if (clusterStream !== es) return;
      es.close();
      clusterStream = null;
      setConn("down", "offline");
      showAway();
      reconnectLater();
    };
  }

  // reconnectLater asks who we are before reopening the stream: a 401 means the session ended
  // (back to the login form), anything else that fails means the node is still away.
  function reconnectLater() {
    retry = Math.min(retry + 1, 5);
    const wait = 1000 * Math.pow(2, retry - 1); // 1, 2, 4, 8, 16 s
    retryTimer = setTimeout(async () => {
      try {
        const r = await fetch("/api/v1/whoami", { credentials: "same-origin", cache: "no-store" });
        if (r.status === 401) { loggedOut(); return; }
        if (!r.ok) throw new Error(String(r.status));
        state.who = await r.json();
        renderHeader();
        connect();
        if (state.selected && !jobStream && !(state.detail && ENDED.has(state.detail.state))) follow();
      } catch (e) {
        reconnectLater();
      }
    }, wait);
  }

  async function whoami() {
    try {
      const r = await fetch("/api/v1/whoami", { credentials: "same-origin", cache: "no-store" });
      if (r.status === 401) { loggedOut(); return; }
      if (r.ok) { state.who = await r.json(); renderHeader(); }
    } catch (e) { /* the stream's error handling says the node is away */ }
  }

  function fromHash() {
    const mm = /^#job=(.+)$/.exec(location.hash);
    let id = "";
    if (mm) { try { id = decodeURIComponent(mm[1]); } catch (e) { id = ""; } }
    select(id);
  }

  function start() {
    $("logout").addEventListener("click", async () => {
      try {
        await fetch("/logout", { method: "POST", headers: { "Content-Type": "application/json", "X-Didnmf-CSRF": "1" }, body: "{}", credentials: "same-origin" });
      } catch (e) { /* leave anyway */ }
      location.assign("/");
    });
    $("detail-close").addEventListener("click", () => select(""));
    for (const r of document.querySelectorAll("input[name=tl-axis]")) {
      r.addEventListener("change", () => { state.timelineAxis = r.value; renderDetail(); });
    }
    window.addEventListener("hashchange", fromHash);
    // Charts are drawn at their box's width in pixels (so that text keeps its size on a
    // phone): redraw when the width changes.
    let drawnWidth = 0, resizeFrame = 0;
    new ResizeObserver(() => {
      const w = $("chart").clientWidth;
      if (w === drawnWidth || $("job-detail").hidden) return;
      drawnWidth = w;
      cancelAnimationFrame(resizeFrame);
      resizeFrame = requestAnimationFrame(renderDetail);
    }).observe($("chart"));
    setInterval(() => {
      $("updated").textContent = state.lastUpdate ? "updated " + clock(state.lastUpdate) : "";
    }, 1000);
    whoami();
    connect();
    fromHash();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
