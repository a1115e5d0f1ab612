// What the labeling page (label.html) and the operator's dashboard (dashboard.html) share:
// served at /static/common.js and loaded by both before their own script. Plain
// JavaScript, no build step; the names below are the pages' globals.
"use strict";
const API = "/api/v1";
const $ = (id) => document.getElementById(id);

// the line under the header: a note, or an error (in red)
function say(text, isError) {
  $("message").textContent = text || "";
  $("message").className = isError ? "error" : "";
}

// The page's `call(method, path, body, { raw })`: the API at `path` with the bearer token
// `token()`; answers the JSON body, or with `raw` the Response itself (a file to download).
// A refused token (a status in `signOutOn`: the labeling page 401, the dashboard 401 and
// 403) calls `onSignOut()` first. Every failure is thrown as `{ status, code, message }`,
// `message` fit to show: the API's own error message, a network failure, or what a
// non-JSON answer (a proxy's error page, say) was.
function apiCaller({ token, signOutOn, onSignOut }) {
  return async function call(method, path, body, { raw = false } = {}) {
    const init = { method, headers: { "Authorization": "Bearer " + token() } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let resp;
    try { resp = await fetch(API + path, init); }
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
