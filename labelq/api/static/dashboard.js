// the dashboard's script (/static/dashboard.js, after /static/common.js):
// a file served by labelq, not inline, so the page's CSP allows scripts from 'self' only
"use strict";
const REFRESH_MS = 10000;
const STATES = ["unlabeled", "in_progress", "complete", "gold"];
const STALE_APPLY_S = 60;  // as labelq status: the applier folds labels within a second or so
const COLORS = { unlabeled: "#ccc", in_progress: "#7aa6d8", complete: "#3b7d3b", gold: "#d8b04a" };
const SVGNS = "http://www.w3.org/2000/svg";
const TOKEN_KEY = "labelq-operator-token";  // (sessionStorage: this tab only)
const SIGNED_IN = ["board", "pick", "refresh", "signout"];  // shown while signed in
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let timer = null;
let busy = false;

// a missing (401) or wrong (403) operator token signs out
const call = apiCaller({ token: () => token, signOutOn: [401, 403], onSignOut: () => signOut() });

// numbers as `labelq status` prints them: '-' for none, integers as such, else 4 digits
function fmt(v) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(+v.toPrecision(4));
  return String(v);
}

function put(key, value) {
  for (const el of document.querySelectorAll(`[data-k="${key}"]`)) {
    el.textContent = fmt(value);
    el.dataset.v = JSON.stringify(value === undefined ? null : value);
  }
}

function svg(tag, attrs, parent) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (parent) parent.append(el);
  return el;
}

function text(parent, x, y, s, anchor) {
  const t = svg("text", { x, y, "text-anchor": anchor || "start" }, parent);
  t.textContent = s;
  return t;
}

// a line chart of points [[x, y], ...] with its ranges written on the axes
function lineChart(host, points, opts) {
  host.replaceChildren();
  const W = 360, H = 150, L = 38, R = 8, T = 8, B = 22;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" }, host);
  if (!points.length) { text(root, W / 2, H / 2, "no labels yet", "middle"); return; }
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs);
  const y0 = opts.y0 ?? Math.min(0, ...ys), y1 = opts.y1 ?? Math.max(...ys, 1e-9);
  const sx = (x) => L + (x1 === x0 ? (W - L - R) / 2 : (x - x0) / (x1 - x0) * (W - L - R));
  const sy = (y) => H - B - (y1 === y0 ? 0 : (y - y0) / (y1 - y0) * (H - T - B));
  svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" }, root);
  svg("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" }, root);
  text(root, L - 3, sy(y1) + 4, fmt(y1), "end");
  text(root, L - 3, sy(y0), fmt(y0), "end");
  text(root, L, H - 8, opts.xfmt(x0));
  text(root, W - R, H - 8, opts.xfmt(x1), "end");
  svg("path", { d: points.map((p, i) => (i ? "L" : "M") + sx(p[0]).toFixed(1) + " "
                                  + sy(p[1]).toFixed(1)).join(" "),
                fill: "none", stroke: opts.color || "#36c", "stroke-width": 2 }, root);
  for (const p of points) svg("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 2.2,
                                          fill: opts.color || "#36c" }, root);
}

// one horizontal bar split into parts [[name, value, color], ...]
function stackedBar(host, parts) {
  host.replaceChildren();
  const W = 360, H = 26;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H + 16}`, role: "img" }, host);
  const total = parts.reduce((s, p) => s + Math.max(p[1], 0), 0);
  let x = 0;
  for (const [name, value, color] of parts) {
    const w = total ? Math.max(value, 0) / total * W : 0;
    const r = svg("rect", { x, y: 0, width: w, height: H, fill: color }, root);
    svg("title", {}, r).textContent = name + ": " + fmt(value);
    x += w;
  }
  text(root, 0, H + 12, parts.map((p) => p[0] + " " + fmt(p[1])).join(" · "));
}

function cell(row, value, cls) {
  const td = document.createElement("td");
  td.textContent = fmt(value);
  if (cls) td.className = cls;
  row.append(td);
  return td;
}

function figuresAge(f) {
  if (f.pending) return "not computed yet: the workers' beat computes it (labelq run-worker)";
  if (f.source === "request" || f.age_s === null || f.age_s === undefined) return "";
  const age = f.age_s < 120 ? `${Math.round(f.age_s)} s` : `${Math.round(f.age_s / 60)} min`;
  return `computed ${age} ago (${f.computed})` +
    (f.behind_labels ? `, ${f.behind_labels} labels since` : "");
}

function show(d) {
  const st = d.status, th = d.throughput, q = d.quality;
  for (const k of ["labels", "unapplied", "budget", "spent", "left"]) put(k, st[k]);
  for (const k of ["recent_labels_per_min", "recent_minutes", "bucket_minutes"]) put(k, th[k]);
  for (const k of ["estimate", "tasks_labelled", "chosen", "curve_method"]) put(k, q[k]);
  // the interval and what it rests on: held-out gold questions, or only the models' belief
  // (without random gold answers there is no interval: the figure is the models' belief)
  put("estimate_interval", q.estimate_basis === "gold" && q.estimate_low != null
      ? `95% interval ${fmt(q.estimate_low)}–${fmt(q.estimate_high)} (exact, from ` +
        `${q.estimate_gold} random gold answers, held out)`
      : q.estimate_basis === "models"
      ? "the models' belief, unchecked: no random gold answers. " +
        (q.estimate_audit_n != null
         ? `An audit of ${q.estimate_audit_n} answers (labelq gold audit NAME --n ` +
           `${q.estimate_audit_n}) would bound it to ±0.03 if it is near this belief` +
           (q.estimate_audit_n_floor != null && q.estimate_audit_n_floor !== q.estimate_audit_n
            ? ` (${q.estimate_audit_n_floor} if it is as low as one label's accuracy, ` +
              `${fmt(q.estimate_floor)})` : "")
         : "No audit of these tasks bounds it to ±0.03")
      : "");
  put("calibration", !q.calibration ? ""
      : q.calibration.calibrated
      ? `confidences calibrated on ${q.calibration.answers} random gold answers`
      : `confidences not calibrated (${q.calibration.answers} random gold answers, 50 calibrate)`);
  put("krippendorff_alpha", q.agreement.krippendorff_alpha);
  put("fleiss_kappa", q.agreement.fleiss_kappa);
  // these figures read every label: computed in the background (labelq run-worker's beat)
  // and shown with their age, or computed for this request on a small project
  put("quality_age", figuresAge(q));
  put("agreement_age", figuresAge(q));
  put("throughput_age", figuresAge(th));
  // progress: finished (no label will be asked for again), all tasks, then each category;
  // the tasks a finished project left below their cap are not "in progress"
  const done = st.finished;
  const below = st.tasks.in_progress;
  $("finished").hidden = !done;
  $("finished").dataset.reason = done || "";
  $("finished").textContent = !done ? ""
    : "Finished: " + (done === "budget spent" ? "the budget is spent" : "every task is at its cap")
      + (below ? ` — ${below} task${below === 1 ? "" : "s"} stay below the cap` : "") + ".";
  // stalled: open tasks no active annotator can serve, with the ways out (labelq status)
  const stall = st.stalled && st.stalled.all ? st.stalled : null;
  $("stalled").hidden = !stall;
  $("stalled-text").textContent = !stall ? ""
    : `Stalled: ${stall.tasks} task${stall.tasks === 1 ? " needs" : "s need"} a label no `
      + "active annotator can give.";
  $("stalled-why").textContent = stall ? "Why: " + stall.reasons.join("; ") + "." : "";
  $("stalled-ways").replaceChildren(...(stall ? stall.ways_out : []).map((text) => {
    const li = document.createElement("li");
    li.textContent = text;
    return li;
  }));
  const stateName = (s) => s === "in_progress" && done ? "below cap" : s.replace("_", " ");
  $("in-progress-head").textContent = stateName("in_progress");
  stackedBar($("tasks-bar"), STATES.map((s) => [stateName(s), st.tasks[s], COLORS[s]]));
  const body = $("tasks").tBodies[0];
  body.replaceChildren();
  const rows = [["all", st.tasks, "tasks"]].concat(
    st.categories.length > 1 ? st.categories.map((c) => [c.category || "-", c, "cat"]) : []);
  for (const [name, counts, kind] of rows) {
    const tr = document.createElement("tr");
    tr.dataset.kind = kind;
    tr.dataset.category = name;
    cell(tr, name);
    for (const s of STATES) cell(tr, counts[s], "n").dataset.state = s;
    body.append(tr);
  }
  // labels/min
  lineChart($("rate-chart"), th.points.map((p) => [Date.parse(p.t), p.labels_per_min]),
            { xfmt: (t) => new Date(t).toISOString().slice(11, 16) + "Z", color: "#36c" });
  // budget
  if (st.budget === null) {
    $("budget-bar").replaceChildren();
    $("projection").textContent = "no budget set";
  } else {
    stackedBar($("budget-bar"), [["spent", st.spent, "#c65"], ["left", Math.max(st.left, 0), "#ddd"]]);
    $("projection").textContent = st.left <= 0 ? "the budget is spent"
      : st.finished === "budget spent" ? "the budget is spent: what is left pays for no "
        + "annotator's next label"
      : st.finished ? `the project is finished: ${fmt(st.left)} of the budget stays unspent`
      : stall ? "the project is stalled: nothing can be spent until an annotator can label"
      : th.work_ends_in_s !== null && th.work_ends_in_s !== undefined
      ? `the open tasks need at most ${fmt(st.spendable)} of the ${fmt(st.left)} left: at `
        + `${fmt(th.recent_spend_per_min)}/min (last ${th.recent_minutes} min) they are done `
        + `within ${Math.round(th.work_ends_in_s / 60)} min`
      : th.runs_out_at
      ? `at ${fmt(th.recent_spend_per_min)}/min (last ${th.recent_minutes} min) it runs out in `
        + `${Math.round(th.runs_out_in_s / 60)} min, about ${th.runs_out_at}`
      : `nothing spent in the last ${th.recent_minutes} min: no projection`;
  }
  $("projection").dataset.runsOutAt = th.runs_out_at || "";
  // the accuracy estimate against labels spent
  const curve = q.curve.filter((p) => p.estimate !== null).map((p) => [p.labels, p.estimate]);
  lineChart($("curve-chart"), curve,
            { xfmt: (n) => n + " labels", y0: Math.min(0.5, ...curve.map((p) => p[1])), y1: 1,
              color: "#3b7d3b" });
  // warnings, in their own place above the cards (as `labelq status` prints them)
  const warnings = st.gold_warnings.map((w) =>
    `${w.worker} has seen ${w.gold_seen} of the ${w.gold_pool} gold questions: load more gold ` +
    `(labelq gold load)`);
  if (st.gold_unscheduled)
    warnings.push(`${st.gold_unscheduled} gold question${st.gold_unscheduled === 1 ? " is" : "s are"}`
                  + " loaded but the project has no gold schedule: never served; set one: "
                  + `labelq project update ${st.project} --gold-schedule fixed:rate=0.1`);
  warnings.push(...(st.suggestion_warnings || []));  // (labelq.reporting.suggestion_leak)
  if (st.stalled && !st.stalled.all)
    warnings.push(`${st.stalled.tasks} task${st.stalled.tasks === 1 ? " needs" : "s need"} a `
                  + "label no active annotator can give (categor"
                  + `${st.stalled.categories.length === 1 ? "y" : "ies"} `
                  + `${st.stalled.categories.map((c) => c || "-").join(", ")}): `
                  + st.stalled.ways_out[0]);
  if ((st.oldest_unapplied_s || 0) > STALE_APPLY_S)
    warnings.push(`${st.unapplied} labels wait to be applied, the oldest for ` +
                  `${Math.round(st.oldest_unapplied_s)} s: is a labelq run-worker running?`);
  $("warning-list").replaceChildren(...warnings.map((text) => {
    const li = document.createElement("li");
    li.textContent = text;
    return li;
  }));
  $("warnings").hidden = !warnings.length;
  // annotators
  const agg = Object.fromEntries(q.agreement.workers.map((w) => [w.worker, w]));
  const wb = $("workers").tBodies[0];
  wb.replaceChildren();
  // the column of gold answered with a suggestion shown: only where there are any (a
  // project that shows no suggestions has none, and its table keeps to its card)
  const suggestedGold = st.workers.some(w => (d.gold[w.handle] || {}).gold_with_suggestion);
  document.getElementById("gold-suggested-head").hidden = !suggestedGold;
  for (const w of st.workers) {
    const g = d.gold[w.handle] || {}, a = agg[w.handle] || {};
    const tr = document.createElement("tr");
    tr.dataset.handle = w.handle;
    cell(tr, w.handle);
    const s = cell(tr, w.status);
    s.className = "status-" + w.status;
    s.dataset.field = "status";
    // the pause's trail: by which rule, on what evidence (when: on hover)
    const pause = w.status === "paused" ? (d.pauses || {})[w.handle] : null;
    const pc = cell(tr, pause ? (pause.rule === "quality" ? "quality rule: " + pause.gold_right
      + " of " + pause.gold_answered + " gold right" : "operator") : null);
    pc.dataset.field = "pause";
    if (pause) pc.title = pause.at + ": " + pause.text;
    for (const [f, v] of [["cost", w.cost], ["labels", w.labels], ["gold_answered", w.gold_answered],
                          ["gold_accuracy", g.gold_accuracy]]) cell(tr, v, "n").dataset.field = f;
    cell(tr, g.gold_smoothed === null || g.gold_smoothed === undefined ? null
         : `${fmt(g.gold_smoothed)} [${fmt(g.gold_interval[0])}, ${fmt(g.gold_interval[1])}]`, "n")
      .dataset.field = "gold_smoothed";
    cell(tr, !g.disputed ? null
         : `${fmt(g.disputed_agreement)} [${fmt(g.disputed_interval[0])}, ${fmt(g.disputed_interval[1])}] of ${g.disputed}`, "n")
      .dataset.field = "disputed_agreement";
    if (suggestedGold)
      cell(tr, !g.gold_with_suggestion ? null
           : `${g.gold_with_suggestion_correct} of ${g.gold_with_suggestion}`, "n")
        .dataset.field = "gold_with_suggestion";
    cell(tr, a.aggregate_accuracy, "n").dataset.field = "aggregate_accuracy";
    cell(tr, w.declined, "n").dataset.field = "declined";
    cell(tr, w.expired, "n").dataset.field = "expired";
    const td = document.createElement("td");
    if (w.status !== "removed") {
      const b = document.createElement("button");
      b.type = "button";
      const to = w.status === "paused" ? "active" : "paused";
      b.textContent = to === "paused" ? "Pause" : "Resume";
      b.dataset.action = to === "paused" ? "pause" : "resume";
      b.addEventListener("click", () => setStatus(w.handle, to));
      td.append(b);
    }
    tr.append(td);
    wb.append(tr);
  }
  showModels(q.models);
  $("board").dataset.project = st.project;
  $("board").dataset.loaded = String(Date.now());
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}

// the models' measured accuracy per class, beside the annotators' (issue 42)
function interval(v, lo, hi) {
  return v === null || v === undefined ? null : `${fmt(v)} [${fmt(lo)}, ${fmt(hi)}]`;
}

function showModels(m) {
  $("models-part").hidden = !m;
  const body = $("models").tBodies[0];
  body.replaceChildren();
  if (!m) return;
  for (const [name, model] of Object.entries(m.models)) {
    for (const [cls, v] of Object.entries(model.classes)) {
      const tr = document.createElement("tr");
      tr.dataset.model = name;
      tr.dataset.cls = cls;
      cell(tr, name);
      cell(tr, cls);
      const r = v.reading;
      cell(tr, r ? `${interval(r.accuracy, r.low, r.high)} ${r.basis}` : null, "n")
        .dataset.field = "reading";
      cell(tr, interval(v.accuracy, v.low, v.high), "n").dataset.field = "accuracy";
      cell(tr, v.answers, "n").dataset.field = "answers";
      cell(tr, v.gold, "n").dataset.field = "gold";
      cell(tr, interval(v.gold_accuracy, v.gold_low, v.gold_high), "n")
        .dataset.field = "gold_accuracy";
      body.append(tr);
    }
  }
  const alone = m.model_alone;
  $("model-alone").textContent = alone
    ? `${alone} answers rest on a model alone: only random gold checks them (labelq gold audit).`
    : "No answer rests on a model alone.";
  // the human labels the models saved (labelq/modelsavings.py, docs/models.md)
  const sv = m.saved;
  const more = sv && sv.at_least ? "at least " : "";
  $("model-saved").textContent = sv
    ? `Human labels the models saved: ${more}${Math.round(sv.saved)} ± ${Math.round(sv.saved_se)} ` +
      `(auto without them would need ${more}${Math.round(sv.labels_without)} labels to reach ` +
      `the accuracy ${fmt(sv.accuracy_with)} it reaches with them at the ${sv.labels} ` +
      `labels given; ${sv.seeds} simulated twins of the project).`
    : "";
}

// gold suggestions cost about a second per 100k labels: their own request, made when a
// project is opened and on Refresh, not on every timed refresh (the server keeps them a
// minute while labels arrive)
let suggested = "";

function showSuggestions(d) {
  const body = $("suggestions").tBodies[0];
  body.replaceChildren();
  for (const r of d.tasks) {
    const tr = document.createElement("tr");
    tr.dataset.task = r.id;
    cell(tr, r.id);
    cell(tr, r.category);
    cell(tr, r.current).title = r.current_method;
    cell(tr, r.confidence, "n");
    cell(tr, r.candidates.join(" | "));
    cell(tr, Object.entries(r.labels).map(([k, c]) => k + ":" + c).join(" "));
    cell(tr, r.score, "n");
    cell(tr, r.reason);
    body.append(tr);
  }
  $("suggest-state").textContent = !d.computed
    ? "Not computed yet: the workers' beat computes them (labelq run-worker)."
    : d.tasks.length
    ? `Computed ${new Date(d.computed).toLocaleTimeString()} from ${d.labels} labels.`
    : "No labelled task to suggest yet.";
  $("suggest-card").dataset.loaded = String(Date.now());
}

async function loadSuggestions(name) {
  for (const el of document.querySelectorAll(".pname")) el.textContent = name;
  $("suggest-state").textContent = "Computing…";
  try {
    showSuggestions(await call("GET", "/projects/" + encodeURIComponent(name)
                                      + "/gold-suggestions?n=10"));
    suggested = name;
  } catch (err) {
    $("suggest-state").textContent = err.message;
  }
}

async function load(event) {
  clearTimeout(timer);
  const name = $("project").value;
  if (!token || !name) return;
  try {
    show(await call("GET", "/projects/" + encodeURIComponent(name) + "/dashboard"));
    say("");
    if (event || suggested !== name) loadSuggestions(name);  // not awaited: its own pace
  } catch (err) {
    if (token) say(err.message, true);
  }
  if (token) timer = setTimeout(load, REFRESH_MS);
}

async function setStatus(handle, status) {
  if (busy) return;
  busy = true;
  try {
    const out = await call("POST", "/workers/" + encodeURIComponent(handle) + "/status", { status });
    say(`${out.handle}: ${out.status}`);
    await load();
  } catch (err) {
    say(err.message, true);
  } finally {
    busy = false;
  }
}

async function exportJob(spec) {
  const name = $("project").value;
  const state = $("export-state");
  try {
    let job = await call("POST", "/projects/" + encodeURIComponent(name) + "/exports", spec);
    while (job.state === "queued" || job.state === "running") {
      state.textContent = `export ${job.id}: ${job.state} (${job.done}/${job.total || "?"})`;
      await new Promise((r) => setTimeout(r, 700));
      job = await call("GET", "/exports/" + job.id);
    }
    if (job.state !== "done") throw { message: `export ${job.id} ${job.state}: ${job.error || ""}` };
    const resp = await call("GET", "/exports/" + job.id + "/result", undefined, { raw: true });
    const blob = await resp.blob();
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = `${name}-${job.id.slice(0, 8)}.${job.format}`;
    document.body.append(a);
    a.click();
    a.remove();
    state.textContent = `export ${job.id}: done, ${job.done} rows downloaded`;
    state.dataset.done = job.id;
  } catch (err) {
    state.textContent = err.message;
  }
}

function signOut(text) {
  token = "";
  clearTimeout(timer);
  showSignedOut(TOKEN_KEY, SIGNED_IN, text);
}

async function signIn(event) {
  if (event) event.preventDefault();
  if (!token) token = $("token").value.trim();
  try {
    const projects = await call("GET", "/projects");
    const sel = $("project");
    const keep = sel.value || new URLSearchParams(location.search).get("project");
    sel.replaceChildren(...projects.map((p) => {
      const o = document.createElement("option");
      o.value = o.textContent = p.name;
      return o;
    }));
    if (keep && projects.some((p) => p.name === keep)) sel.value = keep;
    showSignedIn(TOKEN_KEY, token, SIGNED_IN);
    if (!projects.length) { say("no project yet: labelq project create NAME --labels ..."); return; }
    say("");
    await load();
  } catch (err) {
    signOut();
    say(err.message, true);
  }
}

$("signin").addEventListener("submit", signIn);
$("signout").addEventListener("click", () => signOut("signed out"));
$("refresh").addEventListener("click", load);
$("project").addEventListener("change", load);
for (const b of document.querySelectorAll("[data-export]"))
  b.addEventListener("click", () => exportJob(JSON.parse(b.dataset.export)));
if (token) signIn();
