// the labeling page's script (/static/label.js, after /static/common.js):
// a file served by labelq, not inline, so the page's CSP allows scripts from 'self' only
"use strict";
const TOKEN_KEY = "labelq-token";  // (sessionStorage: this tab only)
const SIGNED_IN = ["who", "progress", "signout", "work"];  // shown while signed in
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let current = null;   // the assignment on screen
let busy = false;     // one request at a time: no double submissions
let timer = null;
let names = {};       // label -> what its button shows (the project's display names)
let retry = null;     // while there is nothing to label: ask again every RETRY_MS
const RETRY_MS = 10000;
// the project worked in, for an annotator enrolled in several (null: their only one; then
// no request names a project, as before)
let project = null;

// a refused token (401) signs out; a 403 (not yours, paused, removed) is shown as an error
const call0 = apiCaller({ token: () => token, signOutOn: [401], onSignOut: () => signOut() });
// every call names the project chosen, when there is a choice (?project=NAME)
const call = (method, path, body, opts) => call0(method, project === null ? path
  : path + (path.includes("?") ? "&" : "?") + "project=" + encodeURIComponent(project),
  body, opts);

function signOut(text) {
  token = ""; current = null; names = {}; project = null;
  clearTimeout(retry);
  sessionStorage.removeItem("labelq-project");
  showSignedOut(TOKEN_KEY, [...SIGNED_IN, "picker", "choose"], text);
}

// the projects of an annotator enrolled in several: a picker; the one worked in is the one
// picked on this page before, else the operator's default, else the annotator chooses
async function pickProject() {
  const mine = await call0("GET", "/me/projects");
  const open = mine.projects.filter((p) => p.status !== "removed").map((p) => p.name);
  if (open.length < 2) { project = null; $("picker").hidden = true; return true; }
  const kept = sessionStorage.getItem("labelq-project");
  project = open.includes(kept) ? kept : (open.includes(mine.current) ? mine.current : null);
  const select = $("project-picker");
  select.replaceChildren(new Option("choose a project…", ""),
                         ...open.map((name) => new Option(name, name)));
  select.value = project || "";
  $("picker").hidden = false;
  return project !== null;
}

async function chooseProject() {
  const name = $("project-picker").value;
  if (!name || name === project) return;
  project = name;
  sessionStorage.setItem("labelq-project", name);
  // (the other project's task leaves the screen; its lease waits for them there: asking
  // for the next task in that project again gives it back)
  current = null;
  clearInterval(timer);
  clearTimeout(retry);
  $("task").hidden = true;
  await enter();
}

async function signIn(event) {
  if (event) event.preventDefault();
  if (!token) token = $("token").value.trim();
  try {
    showSignedIn(TOKEN_KEY, token, ["signout"]);  // (the rest once a project is chosen)
    if (!(await pickProject())) {  // several projects and none chosen yet: ask
      for (const id of ["who", "progress", "work"]) $(id).hidden = true;
      $("choose").hidden = false;
      say("");
      return;
    }
    await enter();
  } catch (err) {
    signOut();
    say(err.message, true);
  }
}

// the chosen project's page: who I am there, my progress there, its next task
async function enter() {
  try {
    $("choose").hidden = true;
    const me = await call("GET", "/me");
    $("handle").textContent = me.handle;
    $("project").textContent = me.project;
    names = Object.fromEntries(me.labels.map((l, i) => [l, (me.label_names || [])[i] || l]));
    // the instructions: Markdown rendered as DOM nodes, never parsed as HTML
    // (renderMarkdown, common.js), open until the annotator folds them
    renderMarkdown($("instructions-text"), me.instructions || "");
    $("instructions").hidden = !me.instructions;
    showSignedIn(TOKEN_KEY, token, SIGNED_IN);
    say("");
    await refreshProgress();
    await next();
  } catch (err) {
    if (!token) return;  // signed out (401)
    showEmpty(err.message);
    say(err.message, true);
  }
}

async function refreshProgress() {
  const p = await call("GET", "/me/progress");
  $("progress-labels").textContent = p.labels;
  // gold as of the last whole batch of labels (labelq.api.progress): it never moves on
  // the answer just given, so it tells no one which item was gold
  $("progress-gold").textContent = p.gold.answered
    ? p.gold.correct + "/" + p.gold.answered + " right (of your first " + p.gold.as_of +
      " labels)" : "–";
  $("progress-remaining").textContent =
    p.remaining_capacity === null ? "no limit" : p.remaining_capacity;
}

// (showPayload: common.js, shared with the review page)

function showAssignment(a) {
  current = a;
  clearTimeout(retry);
  $("empty").hidden = true;
  $("task").hidden = false;
  $("task").dataset.assignment = a.assignment_id;  // opaque; quote it to report a problem
  $("task-category").textContent = a.category ? a.category + " · " : "";
  showPayload(a.payload || {});
  // the model's answer, only where the project shows suggestions (off by default: a shown
  // answer pulls labels towards it; issue 42, docs/models.md)
  $("suggestion").hidden = !a.suggestion;
  $("suggestion-label").textContent = a.suggestion ? (names[a.suggestion] || a.suggestion) : "";
  const answers = $("answers");
  answers.replaceChildren();
  a.labels.forEach((label, i) => {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.label = label;
    b.dataset.key = i < 9 ? String(i + 1) : "";
    b.textContent = (i < 9 ? (i + 1) + " · " : "") + (names[label] || label);
    b.addEventListener("click", () => submit(label));
    answers.append(b);
  });
  $("last-key").textContent = String(Math.min(a.labels.length, 9));
  clearInterval(timer);
  const tick = () => {
    const s = Math.max(0, Math.round((a.expires_ms - Date.now()) / 1000));
    $("expires").textContent = Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
  };
  tick();
  timer = setInterval(tick, 1000);
}

// the idle reasons of a project that will give no more work until its operator acts
// (labelq.service.Service.idle_reason): no point in asking again by itself
const OVER = /^(finished|stalled):/;

function showEmpty(text, again) {
  current = null;
  clearInterval(timer);
  clearTimeout(retry);
  retry = null;
  $("task").hidden = true;
  $("empty").hidden = false;
  $("empty-text").textContent = text || "Nothing to label right now.";
  const over = OVER.exec(text || "");
  $("empty").dataset.state = over ? over[1] : "";
  // nothing now (not an error): look again by itself, as a task may come back to the pool;
  // not when the project is finished or stalled ("Check again" still asks)
  if (again && token && !over) retry = setTimeout(next, RETRY_MS);
}

function showNext(out) {
  if (out && out.assignment) showAssignment(out.assignment);
  else showEmpty(out && out.message, true);
}

async function next() {
  try {
    showNext(await call("POST", "/assignments/next"));
  } catch (err) {
    showEmpty(err.message);
    if (token) say(err.message, true);
  }
}

async function act(path, body, done) {
  if (!current || busy) return;
  busy = true;
  document.body.dataset.busy = "1";
  const a = current;
  try {
    // a label takes the next assignment in the same request (?next=true)
    const out = await call("POST", "/assignments/" + encodeURIComponent(a.assignment_id) + path,
                           body);
    say(done);
    await refreshProgress();
    if (path === "/label?next=true") showNext(out.next); else await next();
  } catch (err) {
    say(err.message, true);
    if (["lease_expired", "lease_lost", "not_found", "assignment_unknown"].includes(err.code)) await next();
  } finally {
    busy = false;
    document.body.dataset.busy = "";
  }
}

const submit = (label) => act("/label?next=true", { label }, "saved: " + (names[label] || label));
const decline = () => act("/decline", undefined, "declined");

document.addEventListener("keydown", (e) => {
  if (!current || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.target instanceof HTMLInputElement) return;
  const i = Number(e.key);
  if (Number.isInteger(i) && i >= 1 && i <= 9 && i <= current.labels.length) {
    e.preventDefault();
    submit(current.labels[i - 1]);
  }
});
$("signin").addEventListener("submit", signIn);
$("signout").addEventListener("click", () => signOut("signed out"));
$("decline").addEventListener("click", decline);
$("retry").addEventListener("click", next);
$("project-picker").addEventListener("change", chooseProject);
if (token) signIn();
