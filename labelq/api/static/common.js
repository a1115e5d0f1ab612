// What the labeling page (label.html), the operator's dashboard (dashboard.html) and the
// review page (review.html) share: served at /static/common.js and loaded by each before
// its own script. Plain
// JavaScript, no build step; the names below are the pages' globals.
"use strict";
const API = "/api/v1";
const $ = (id) => document.getElementById(id);

// the line under the header: a note, or an error (in red)
function say(text, isError) {
  $("message").textContent = text || "";
  $("message").className = isError ? "error" : "";
}

// Signing in and out, as every page does it: the token is kept for this tab in
// sessionStorage under `key`; while signed in, the elements `shown` are visible and the
// sign-in form (#signin, its field #token emptied) hidden; signed out, the other way round,
// and `text` (if any) said.
function showSignedIn(key, token, shown) {
  sessionStorage.setItem(key, token);
  $("token").value = "";
  $("signin").hidden = true;
  for (const id of shown) $(id).hidden = false;
}

function showSignedOut(key, shown, text) {
  sessionStorage.removeItem(key);
  for (const id of shown) $(id).hidden = true;
  $("signin").hidden = false;
  if (text) say(text);
}

// The page's `call(method, path, body, { raw })`: the API at `base + path` (base: /api/v1
// unless given) with the bearer token
// `token()`; answers the JSON body, or with `raw` the Response itself (a file to download).
// A refused token (a status in `signOutOn`: the labeling page 401, the dashboard 401 and
// 403) calls `onSignOut()` first. Every failure is thrown as `{ status, code, message }`,
// `message` fit to show: the API's own error message, a network failure, or what a
// non-JSON answer (a proxy's error page, say) was.
function apiCaller({ token, signOutOn, onSignOut, base = API }) {
  return async function call(method, path, body, { raw = false } = {}) {
    const init = { method, headers: { "Authorization": "Bearer " + token() } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let resp;
    try { resp = await fetch(base + path, init); }
    catch (e) {
      throw { code: "network",
              message: "cannot reach the server (network error); check the connection and "
                       + "try again" };
    }
    if (resp.ok && raw) return resp;
    const type = (resp.headers.get("content-type") || "").toLowerCase();
    const text = await resp.text().catch(() => "");
    let data;
    if (type.includes("json")) { try { data = JSON.parse(text); } catch (e) { /* below */ } }
    if (signOutOn.includes(resp.status)) onSignOut();
    if (!resp.ok) {
      throw { status: resp.status, code: (data && data.code) || "error",
              message: (data && data.message) || answered(resp, type, text) };
    }
    if (data === undefined) {
      if (!text) return {};  // an empty success
      throw { status: resp.status, code: "not_json",
              message: answered(resp, type, text) + " (expected JSON)" };
    }
    return data;
  };
}

// "the server answered HTTP 502 Bad Gateway: <its title or text>", at most 200 characters
// of it, as text
function answered(resp, type, text) {
  let detail = "";
  if (type.startsWith("text/html")) {
    detail = new DOMParser().parseFromString(text, "text/html").title;  // parsed inert
  } else if (type.startsWith("text/") || type.includes("json")) {
    detail = text;
  }
  detail = (detail || "").replace(/\s+/g, " ").trim();
  if (detail.length > 200) detail = detail.slice(0, 199) + "…";
  const status = ("HTTP " + resp.status + " " + (resp.statusText || "")).trim();
  return "the server answered " + status + (detail ? ": " + detail : "");
}

// Project instructions (Markdown source) as DOM nodes appended to `root`. Safe by
// construction: every piece of the text becomes a text node (createTextNode), elements are
// made by name from a fixed list, so no HTML in the source is ever parsed — `<b>` or
// `<script>` show as the characters they are. A small subset: # to ### headings,
// paragraphs (a blank line between), - * + and 1. lists, > quotes, ``` fenced code,
// **bold**, *italic* or _italic_, `code`, [text](https://…) links (http, https and mailto
// only; they open in a new tab), and a line break where a line ends in two spaces.
function renderMarkdown(root, source) {
  root.replaceChildren();
  const lines = String(source || "").replace(/\r\n?/g, "\n").split("\n");
  const el = (name, parent) => { const e = document.createElement(name); parent.append(e); return e; };
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    if (/^```/.test(line)) {  // fenced code: verbatim to the closing fence
      const code = el("code", el("pre", root));
      const body = [];
      for (i++; i < lines.length && !/^```/.test(lines[i]); i++) body.push(lines[i]);
      code.textContent = body.join("\n");
      i++;
      continue;
    }
    const h = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {  // headings sit below the page's own: # is h3
      inlineMarkdown(el("h" + Math.min(h[1].length + 2, 6), root), h[2]);
      i++;
      continue;
    }
    const item = /^\s*([-*+]|\d{1,9}[.)])\s+/;
    if (item.test(line)) {
      const ordered = /\d/.test(item.exec(line)[1]);
      const list = el(ordered ? "ol" : "ul", root);
      while (i < lines.length && lines[i].trim()) {
        const m = item.exec(lines[i]);
        if (m && /\d/.test(m[1]) !== ordered) break;
        if (m) inlineMarkdown(el("li", list), lines[i].slice(m[0].length));
        else inlineMarkdown(list.lastElementChild, " " + lines[i].trim());  // continued
        i++;
      }
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quote = [];
      for (; i < lines.length && /^\s*>/.test(lines[i]); i++) quote.push(lines[i].replace(/^\s*>\s?/, ""));
      renderMarkdown(el("blockquote", root), quote.join("\n"));
      continue;
    }
    const para = [];  // a paragraph: up to a blank line or another block
    for (; i < lines.length && lines[i].trim() && !/^(#{1,6}\s|```|\s*>)/.test(lines[i])
           && !(para.length && item.test(lines[i])); i++) para.push(lines[i]);
    const p = el("p", root);
    para.forEach((text, k) => {
      inlineMarkdown(p, k < para.length - 1 && / {2,}$/.test(text) ? text.trimEnd() : text);
      if (k < para.length - 1) p.append(/ {2,}$/.test(text) ? document.createElement("br")
                                                           : document.createTextNode(" "));
    });
  }
  return root;
}

// **bold**, *italic*/_italic_, `code` and [text](url) of one line, appended to `parent`
function inlineMarkdown(parent, text) {
  const token = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|\*(?=\S)([^*]*?\S)\*|\b_(?=\S)([^_]*?\S)_\b|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let at = 0;
  for (const m of text.matchAll(token)) {
    if (m.index > at) parent.append(document.createTextNode(text.slice(at, m.index)));
    let e;
    if (m[1]) { e = document.createElement("code"); e.textContent = m[2]; }
    else if (m[3] !== undefined) { e = document.createElement("strong"); inlineMarkdown(e, m[3]); }
    else if (m[4] !== undefined) { e = document.createElement("em"); inlineMarkdown(e, m[4]); }
    else if (m[5] !== undefined) { e = document.createElement("em"); inlineMarkdown(e, m[5]); }
    else if (/^(https?:|mailto:)/i.test(m[7])) {
      e = document.createElement("a");
      e.href = m[7];
      e.rel = "noopener noreferrer";
      e.target = "_blank";
      inlineMarkdown(e, m[6]);
    } else {  // any other scheme (javascript:, data:) stays text
      e = document.createTextNode(m[0]);
    }
    parent.append(e);
    at = m.index + m[0].length;
  }
  if (at < text.length) parent.append(document.createTextNode(text.slice(at)));
}

// A task's payload as the labeling page shows it, into #payload-text, #payload-image and
// #payload-fields: text, question or body as text (never markup), an http(s) image URL as
// an image, every other field as a name and its value (text)
const IMAGE = /\.(png|jpe?g|gif|webp|svg|bmp|avif)(\?.*)?$/i;
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
