// the review page's script (/static/review.js, after /static/common.js): an expert answers
// the tasks `labelq gold audit` drew and `labelq gold suggest` listed, one at a time; each
// answer is gold of the task's kind (through /review/api, the path of `labelq gold mark`)
"use strict";
const TOKEN_KEY = "labelq-review-token";
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let projects = [];    // what /me lists
let project = null;   // the one under review
let queue = [];       // tasks fetched, not answered or skipped yet
let current = null;   // the task on screen
let busy = false;     // one answer at a time: no double marks
const skipped = new Set();

const call = apiCaller({ token: () => token, signOutOn: [401], onSignOut: () => signOut(),
                         base: "/review/api" });
const enc = encodeURIComponent;

function signOut(text) {
  token = ""; current = null; queue = []; project = null;
  sessionStorage.removeItem(TOKEN_KEY);
  for (const id of ["who", "pick", "pick-kind", "left", "signout", "work"]) $(id).hidden = true;
  $("signin").hidden = false;
  if (text) say(text);
}

async function signIn(event) {
  if (event) event.preventDefault();
  if (!token) token = $("token").value.trim();
  try {
    const me = await call("GET", "/me");
    projects = me.projects;
    $("reviewer").textContent = me.reviewer;
    const pick = $("project");
    pick.replaceChildren(...projects.map((p) => {
      const o = document.createElement("option"); o.value = p.name; o.textContent = p.name;
      return o;
    }));
    $("signin").hidden = true;
    for (const id of ["who", "pick", "pick-kind", "left", "signout", "work"]) $(id).hidden = false;
    $("token").value = "";
    sessionStorage.setItem(TOKEN_KEY, token);
    say(projects.length ? "" : "no project to review");
    await choose();
  } catch (err) {
    signOut();
    say(err.message, true);
  }
}

async function choose() {
  project = projects.find((p) => p.name === $("project").value) || null;
  queue = []; skipped.clear();
  if (!project) { showEmpty(); return; }
  renderMarkdown($("instructions-text"), project.instructions || "");
  $("instructions").hidden = !project.instructions;
  await refill();
}

async function refill() {
  if (!project) return;
  const q = new URLSearchParams({ limit: "50" });
  if ($("kind").value) q.set("kind", $("kind").value);
  for (const id of skipped) q.append("skip", id);
  try {
    const out = await call("GET", "/projects/" + enc(project.name) + "/queue?" + q);
    $("left-audit").textContent = out.left.audit;
    $("left-suggested").textContent = out.left.suggested;
    queue = out.tasks;
    showNext();
  } catch (err) {
    showEmpty();
    say(err.message, true);
  }
}

function showNext() {
  const t = queue.shift();
  if (t) show(t); else showEmpty();
}

function showEmpty() {
  current = null;
  $("task").hidden = true;
  $("empty").hidden = false;
}

function show(t) {
  current = t;
  $("empty").hidden = true;
  $("task").hidden = false;
  $("task").dataset.task = t.id;
  $("task").dataset.kind = t.kind;
  $("task-kind").textContent = t.kind;
  $("task-id").textContent = t.id;
  $("task-category").textContent = t.category ? " · " + t.category : "";
  showPayload(t.payload || {});
  // the annotators' answers stay hidden until asked for: they would sway the answer
  $("answers").hidden = true;
  $("answers-list").replaceChildren();
  const names = project.label_names || [];
  const buttons = $("buttons");
  buttons.replaceChildren();
  project.labels.forEach((label, i) => {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.label = label;
    b.textContent = (i < 9 ? (i + 1) + " · " : "") + (names[i] || label);
    b.addEventListener("click", () => answer(label));
    buttons.append(b);
  });
  $("last-key").textContent = String(Math.min(project.labels.length, 9));
}

async function answer(label) {
  if (!current || busy) return;
  busy = true;
  document.body.dataset.busy = "1";
  const t = current;
  try {
    const out = await call("POST", "/projects/" + enc(project.name) + "/answers",
                           { task: t.id, answer: label, kind: t.kind });
    say(t.id + ": " + label + (out.state === "queued"
      ? " — queued: an annotator has it right now; it becomes gold when that assignment ends"
      : out.state === "skipped" ? " — gold already with that answer"
      : " — gold (" + out.kind + ")")
      + (out.replaced ? " (it replaced the answer " + out.replaced + " queued earlier)" : ""));
    const left = $("left-" + t.kind);
    left.textContent = Math.max(0, Number(left.textContent) - 1);
    if (queue.length) showNext(); else await refill();
  } catch (err) {
    say(t.id + ": " + err.message, true);
  } finally {
    busy = false;
    document.body.dataset.busy = "";
  }
}

async function skip() {
  if (!current || busy) return;
  skipped.add(current.id);
  say("skipped " + current.id);
  if (queue.length) showNext(); else await refill();
}

async function reveal() {
  if (!current) return;
  const t = current;
  try {
    const out = await call("GET", "/projects/" + enc(project.name) + "/tasks/" + enc(t.id)
                           + "/answers");
    if (current !== t) return;
    const names = Object.fromEntries(project.labels.map((l, i) =>
      [l, (project.label_names || [])[i] || l]));
    $("answers-list").replaceChildren(...out.answers.map((a) => {
      const li = document.createElement("li");
      li.textContent = a.worker + ": " + (names[a.label] || a.label);
      return li;
    }));
    $("answers-none").hidden = out.answers.length > 0;
    $("answers").hidden = false;
  } catch (err) {
    say(err.message, true);
  }
}

document.addEventListener("keydown", (e) => {
  if (!current || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement) return;
  const i = Number(e.key);
  if (e.key === "0" || e.key === "s") { e.preventDefault(); skip(); return; }
  if (e.key === "a") { e.preventDefault(); reveal(); return; }
  if (Number.isInteger(i) && i >= 1 && i <= 9 && i <= project.labels.length) {
    e.preventDefault();
    answer(project.labels[i - 1]);
  }
});
$("signin").addEventListener("submit", signIn);
$("signout").addEventListener("click", () => signOut("signed out"));
$("project").addEventListener("change", choose);
$("kind").addEventListener("change", () => { queue = []; refill(); });
$("skip").addEventListener("click", skip);
$("reveal").addEventListener("click", reveal);
$("retry").addEventListener("click", () => { skipped.clear(); refill(); });
if (token) signIn();
