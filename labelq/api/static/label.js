// the labeling page's script (/static/label.js, after /static/common.js):
// a file served by labelq, not inline, so the page's CSP allows scripts from 'self' only
"use strict";
const IMAGE = /\.(png|jpe?g|gif|webp|svg|bmp|avif)(\?.*)?$/i;
const TOKEN_KEY = "labelq-token";  // (sessionStorage: this tab only)
const SIGNED_IN = ["who", "progress", "signout", "work"];  // shown while signed in
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let current = null;   // the assignment on screen
let busy = false;     // one request at a time: no double submissions
let timer = null;
let names = {};       // label -> what its button shows (the project's display names)
let retry = null;     // while there is nothing to label: ask again every RETRY_MS
const RETRY_MS = 10000;

// a refused token (401) signs out; a 403 (not yours, paused, removed) is shown as an error
const call = apiCaller({ token: () => token, signOutOn: [401], onSignOut: () => signOut() });

function signOut(text) {
  token = ""; current = null; names = {};
  clearTimeout(retry);
  showSignedOut(TOKEN_KEY, SIGNED_IN, text);
}

async function signIn(event) {
  if (event) event.preventDefault();
  if (!token) token = $("token").value.trim();
  try {
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
    signOut();
    say(err.message, true);
  }
}

async function refreshProgress() {
  const p = await call("GET", "/me/progress");
  $("progress-labels").textContent = p.labels;
  $("progress-gold").textContent = p.gold.answered
    ? p.gold.correct + "/" + p.gold.answered + " right" : "–";
  $("progress-remaining").textContent =
    p.remaining_capacity === null ? "no limit" : p.remaining_capacity;
}

function showPayload(payload) {
  const text = payload.text ?? payload.question ?? payload.body ?? "";
  $("payload-text").textContent = typeof text === "string" ? text : JSON.stringify(text);
  const url = ["image", "image_url", "url"].map((k) => payload[k])
    .find((v) => typeof v === "string" && /^https?:\/\//i.test(v) && IMAGE.test(v));
  $("payload-image").hidden = !url;
  if (url) $("payload-image").src = url; else $("payload-image").removeAttribute("src");
  const fields = $("payload-fields");
  fields.replaceChildren();
  for (const [k, v] of Object.entries(payload)) {
    if (["text", "question", "body"].includes(k) || v === url) continue;
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = typeof v === "string" ? v : JSON.stringify(v);
    fields.append(dt, dd);
  }
}

function showAssignment(a) {
  current = a;
  clearTimeout(retry);
  $("empty").hidden = true;
  $("task").hidden = false;
  $("task").dataset.assignment = a.assignment_id;  // opaque; quote it to report a problem
  $("task-category").textContent = a.category ? a.category + " · " : "";
  showPayload(a.payload || {});
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
if (token) signIn();
