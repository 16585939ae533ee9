// The support team's desk (contract 24). Every text a customer or the model
// wrote is shown with textContent, never as markup; a link is made only to an
// origin the function lists (the help centre's and the URL templates').
"use strict";

const config = JSON.parse(document.querySelector('meta[name="desk-config"]').content || "{}");
const $ = (id) => document.getElementById(id);
const TOKEN = "desk-id-token";
// Kept for the tab (contract 30): the refresh token renews the ID token
// before it expires, so a working day is one sign-in; "Sign out" revokes it.
const REFRESH = "desk-refresh-token";
const ACCESS = "desk-access-token";
// Renewed this long before the ID token expires.
const RENEW_BEFORE_MS = 5 * 60 * 1000;
const REFRESH_MS = 10000;
const MAX_BACKOFF_MS = 300000;

let token = sessionStorage.getItem(TOKEN);
let renewTimer = null;
let me = null;
let selected = null;
let timer = null;
let live = null; // the desk's live socket (contract 31), while someone is signed in
let backoff = REFRESH_MS;
// What a notification was raised for already: an item's id, or a held
// conversation's id with when its customer last wrote (contract 30).
const notified = new Set();
let firstRead = true;

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

// A link only to an allowed origin; otherwise the address as text.
function link(url, text) {
  try {
    const parsed = new URL(url);
    if ((parsed.protocol === "https:" || parsed.protocol === "http:") &&
        (config.linkOrigins || []).includes(parsed.origin)) {
      const a = el("a", text);
      a.href = parsed.href;
      a.rel = "noopener noreferrer";
      a.target = "_blank";
      return a;
    }
  } catch (_) { /* not a URL */ }
  return el("span", text);
}

function api(path) {
  return new URL(path, window.location.href).href;
}

async function call(method, path, body, key, renewed) {
  const headers = { "Authorization": token || "" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (key) headers["Idempotency-Key"] = key;
  const response = await fetch(api(path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = {};
  try { data = await response.json(); } catch (_) { data = {}; }
  if (response.status === 401) {
    // The click that meets the expiry: renewed once, then sent again (the
    // same key: a decision is never made twice).
    if (!renewed && await renew()) return call(method, path, body, key, true);
    signOut("Your sign-in has ended: sign in again.");
  }
  return { status: response.status, data };
}

// The ID token's expiry (ms), from its payload; 0 when unreadable.
function expiryOf(jwt) {
  try {
    const payload = JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return (payload.exp || 0) * 1000;
  } catch (_) {
    return 0;
  }
}

function scheduleRenewal() {
  clearTimeout(renewTimer);
  if (!token || !sessionStorage.getItem(REFRESH)) return;
  const expires = expiryOf(token);
  const wait = expires ? Math.max(expires - Date.now() - RENEW_BEFORE_MS, 10000) : 60000;
  renewTimer = setTimeout(renew, wait);
}

// A new ID token from the refresh token; false when it cannot be had.
async function renew() {
  const refresh = sessionStorage.getItem(REFRESH);
  if (!refresh || !config.signInUrl) return false;
  try {
    const { ok, data } = await cognito("InitiateAuth", {
      AuthFlow: "REFRESH_TOKEN_AUTH",
      ClientId: config.clientId,
      AuthParameters: { REFRESH_TOKEN: refresh },
    });
    const result = ok && data.AuthenticationResult;
    if (!result || !result.IdToken) return false;
    keepTokens(result);
    return true;
  } catch (_) {
    return false;
  }
}

function keepTokens(result) {
  token = result.IdToken;
  sessionStorage.setItem(TOKEN, token);
  if (result.AccessToken) sessionStorage.setItem(ACCESS, result.AccessToken);
  // A renewal's answer carries no new refresh token: the first one stays.
  if (result.RefreshToken) sessionStorage.setItem(REFRESH, result.RefreshToken);
  scheduleRenewal();
}

// --- Sign-in: Cognito's InitiateAuth, one JSON POST, no SDK. A person's
// first sign-in answers NEW_PASSWORD_REQUIRED: they choose their own
// password here, so nobody else (not whoever made the account) knows it.
let challenge = null;

async function cognito(target, body) {
  const response = await fetch(config.signInUrl, {
    method: "POST",
    headers: {
      "Content-Type": "application/x-amz-json-1.1",
      "X-Amz-Target": "AWSCognitoIdentityProviderService." + target,
    },
    body: JSON.stringify(body),
  });
  let data = {};
  try { data = await response.json(); } catch (_) { data = {}; }
  return { ok: response.ok, data: data || {} };
}

// Cognito's own error type, without its "namespace#" prefix.
function errorType(data) {
  return String(data.__type || "").split("#").pop();
}

function signedIn(data) {
  const idToken = data.AuthenticationResult && data.AuthenticationResult.IdToken;
  if (!idToken) return false;
  keepTokens(data.AuthenticationResult);
  challenge = null;
  for (const id of ["password", "new-password", "new-password-again", "mfa-code", "mfa-setup-code"]) $(id).value = "";
  $("mfa-secret").textContent = "";
  $("mfa-qr").replaceChildren();
  for (const id of ["new-password-form", "mfa-form", "mfa-setup-form"]) $(id).hidden = true;
  start();
  return true;
}

// Shows one of the sign-in's forms, the others hidden.
function showStep(id) {
  for (const form of ["sign-in", "new-password-form", "mfa-form", "mfa-setup-form"]) $(form).hidden = form !== id;
}

// After a password (or a new one): tokens, or the next step Cognito asks for.
async function nextStep(data, username, sayError) {
  if (signedIn(data)) return;
  const params = data.ChallengeParameters || {};
  const user = params.USER_ID_FOR_SRP || params.USERNAME || username;
  if (data.ChallengeName === "NEW_PASSWORD_REQUIRED" && data.Session) {
    challenge = { session: data.Session, username: user };
    $("password").value = "";
    showStep("new-password-form");
    $("new-password-error").textContent = "";
    $("new-password").focus();
  } else if (data.ChallengeName === "SOFTWARE_TOKEN_MFA" && data.Session) {
    challenge = { session: data.Session, username: user };
    showStep("mfa-form");
    $("mfa-error").textContent = "";
    $("mfa-code").focus();
  } else if (data.ChallengeName === "MFA_SETUP" && data.Session) {
    await setUpMfa(data.Session, user);
  } else {
    sayError(data.ChallengeName ? unsupported(data.ChallengeName) : "Sign-in refused: check the user name and the password.");
  }
}

// The QR code of `text` as SVG drawn with the DOM (qrcode.js, Kazuhiko
// Arase's MIT-licensed encoder, is served after this file).
function qrSvg(text) {
  const NS = "http://www.w3.org/2000/svg";
  const qr = qrcode(0, "M");
  qr.addData(text);
  qr.make();
  const count = qr.getModuleCount();
  const quiet = 4;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 " + (count + 2 * quiet) + " " + (count + 2 * quiet));
  svg.setAttribute("width", "200");
  svg.setAttribute("height", "200");
  const background = document.createElementNS(NS, "rect");
  background.setAttribute("width", "100%");
  background.setAttribute("height", "100%");
  background.setAttribute("fill", "#fff");
  svg.append(background);
  for (let row = 0; row < count; row++) {
    for (let col = 0; col < count; col++) {
      if (!qr.isDark(row, col)) continue;
      const module = document.createElementNS(NS, "rect");
      module.setAttribute("x", String(col + quiet));
      module.setAttribute("y", String(row + quiet));
      module.setAttribute("width", "1");
      module.setAttribute("height", "1");
      svg.append(module);
    }
  }
  return svg;
}

// A first sign-in (contract 30): a TOTP key for the person's authenticator
// app, shown as a QR code and as text; nothing of it leaves the browser but
// to Cognito.
async function setUpMfa(session, username) {
  const { ok, data } = await cognito("AssociateSoftwareToken", { Session: session });
  if (!ok || !data.SecretCode) { backToSignIn("The second factor could not be set up: sign in again."); return; }
  challenge = { session: data.Session || session, username };
  const uri = "otpauth://totp/" + encodeURIComponent("Support desk:" + username) +
    "?secret=" + encodeURIComponent(data.SecretCode) + "&issuer=" + encodeURIComponent("Support desk");
  $("mfa-secret").textContent = data.SecretCode;
  $("mfa-qr").replaceChildren(qrSvg(uri));
  showStep("mfa-setup-form");
  $("mfa-setup-error").textContent = "";
  $("mfa-setup-code").focus();
}

async function confirmMfaSetup(event) {
  event.preventDefault();
  const sayHere = (text) => { $("mfa-setup-error").textContent = text; };
  const code = $("mfa-setup-code").value.trim();
  if (!challenge) { backToSignIn("Sign in again."); return; }
  if (!/^[0-9]{6}$/.test(code)) { sayHere("Type the six digits your authenticator app shows."); return; }
  try {
    const verified = await cognito("VerifySoftwareToken", { Session: challenge.session, UserCode: code, FriendlyDeviceName: "desk" });
    if (!verified.ok || verified.data.Status !== "SUCCESS") {
      const type = errorType(verified.data);
      if (type === "NotAuthorizedException" || type === "ExpiredCodeException") backToSignIn("The first sign-in took too long: sign in again.");
      else sayHere("That code was refused: type the one your app shows now.");
      return;
    }
    const { ok, data } = await cognito("RespondToAuthChallenge", {
      ChallengeName: "MFA_SETUP",
      ClientId: config.clientId,
      Session: verified.data.Session || challenge.session,
      ChallengeResponses: { USERNAME: challenge.username },
    });
    if (ok) { await nextStep(data, challenge.username, sayHere); return; }
    backToSignIn("The first sign-in took too long: sign in again.");
  } catch (_) {
    sayHere("The sign-in service could not be reached. Try again.");
  }
}

async function answerMfa(event) {
  event.preventDefault();
  const sayHere = (text) => { $("mfa-error").textContent = text; };
  const code = $("mfa-code").value.trim();
  if (!challenge) { backToSignIn("Sign in again."); return; }
  if (!/^[0-9]{6}$/.test(code)) { sayHere("Type the six digits your authenticator app shows."); return; }
  try {
    const { ok, data } = await cognito("RespondToAuthChallenge", {
      ChallengeName: "SOFTWARE_TOKEN_MFA",
      ClientId: config.clientId,
      Session: challenge.session,
      ChallengeResponses: { USERNAME: challenge.username, SOFTWARE_TOKEN_MFA_CODE: code },
    });
    if (ok) { await nextStep(data, challenge.username, sayHere); return; }
    const type = errorType(data);
    if (type === "CodeMismatchException") sayHere("That code was refused: type the one your app shows now.");
    else backToSignIn("The sign-in took too long: sign in again.");
  } catch (_) {
    sayHere("The sign-in service could not be reached. Try again.");
  }
}

function unsupported(name) {
  return "This account asks for a sign-in step the desk does not offer (" + name +
    "): ask whoever runs the desk.";
}

async function signIn(event) {
  event.preventDefault();
  $("sign-in-error").textContent = "";
  if (!config.signInUrl || !config.clientId) {
    $("sign-in-error").textContent = "This desk has no sign-in configured.";
    return;
  }
  try {
    const { ok, data } = await cognito("InitiateAuth", {
      AuthFlow: "USER_PASSWORD_AUTH",
      ClientId: config.clientId,
      AuthParameters: { USERNAME: $("username").value, PASSWORD: $("password").value },
    });
    if (ok) {
      await nextStep(data, $("username").value, (text) => { $("sign-in-error").textContent = text; });
      return;
    }
    $("sign-in-error").textContent = "Sign-in refused: check the user name and the password.";
  } catch (_) {
    $("sign-in-error").textContent = "The sign-in service could not be reached. Try again.";
  }
}

function backToSignIn(why) {
  challenge = null;
  showStep("sign-in");
  $("sign-in-error").textContent = why;
  $("password").focus();
}

async function setNewPassword(event) {
  event.preventDefault();
  const say = (text) => { $("new-password-error").textContent = text; };
  say("");
  const password = $("new-password").value;
  if (!challenge) { backToSignIn("Sign in again with the password you were sent."); return; }
  if (!password) { say("Choose a password first."); return; }
  if (password !== $("new-password-again").value) { say("The two passwords differ: type the same one twice."); return; }
  try {
    const { ok, data } = await cognito("RespondToAuthChallenge", {
      ChallengeName: "NEW_PASSWORD_REQUIRED",
      ClientId: config.clientId,
      Session: challenge.session,
      ChallengeResponses: { USERNAME: challenge.username, NEW_PASSWORD: password },
    });
    if (ok) { await nextStep(data, challenge.username, say); return; }
    const type = errorType(data);
    if (type === "InvalidPasswordException") {
      say("The password was refused: " + (data.message || "it does not meet the rules above."));
    } else if (type === "NotAuthorizedException" || type === "CodeMismatchException" || type === "ExpiredCodeException") {
      // Cognito's session for the challenge lasts minutes; start again.
      backToSignIn("The first sign-in took too long: sign in again with the password you were sent.");
    } else {
      say("The password could not be set. Try again.");
    }
  } catch (_) {
    say("The sign-in service could not be reached. Try again.");
  }
}

// "Sign out" (contract 30): the refresh token revoked (Cognito's
// RevokeToken); where the service has no such call (moto), the person's
// sessions are signed out with the access token (GlobalSignOut).
async function revoke() {
  const refresh = sessionStorage.getItem(REFRESH);
  const access = sessionStorage.getItem(ACCESS);
  if (!config.signInUrl) return;
  try {
    if (refresh) {
      const { ok } = await cognito("RevokeToken", { Token: refresh, ClientId: config.clientId });
      if (ok) return;
    }
    if (access) await cognito("GlobalSignOut", { AccessToken: access });
  } catch (_) { /* signed out here all the same */ }
}

function signOut(why) {
  clearTimeout(renewTimer);
  sessionStorage.removeItem(REFRESH);
  sessionStorage.removeItem(ACCESS);
  token = null;
  me = null;
  savedReplies = [];
  $("saved-replies-manage").hidden = true;
  sessionStorage.removeItem(TOKEN);
  clearTimeout(timer);
  if (live) live.close();
  live = null;
  challenge = null;
  $("desk").hidden = true;
  showStep("sign-in");
  $("sign-out").hidden = true;
  $("whoami").textContent = "";
  if (why) $("sign-in-error").textContent = why;
}

// Live pokes (contract 31): while someone is signed in the desk hears the
// desk's channel, where every conversation's pokes arrive, and reads the
// queue (and the open conversation with it) again on each and on every
// (re)connection; the 10 s poll becomes the slow safety net while the
// socket is up.
function listen() {
  if (live || !window.RefundChatLive) return;
  RefundChatLive.configure({ url: config.liveUrl, host: config.liveHost, pollSeconds: config.livePollSeconds });
  if (!RefundChatLive.enabled) return;
  live = RefundChatLive.open({
    channel: "/desk/queue",
    token: () => token,
    onRead: () => refresh(),
    onState: () => schedule(refreshMs()),
  });
}
const refreshMs = () => (live && live.up() ? RefundChatLive.POLL_SECONDS * 1000 : REFRESH_MS);

function start() {
  $("sign-in").hidden = true;
  $("desk").hidden = false;
  $("sign-out").hidden = false;
  listen();
  refresh();
}

// --- The queue: at most every 10 s, backing off on failure, and when the tab is shown again.
function schedule(ms) {
  clearTimeout(timer);
  timer = setTimeout(refresh, ms);
}

// A time as a person at the desk reads it (contract 36): relative while
// recent ("4 min ago"), with the local time; the day beyond a day.
function when(iso) {
  if (!iso) return iso;
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  const secs = Math.round((Date.now() - at) / 1000);
  const clock = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (secs >= 0 && secs < 60) return "just now (" + clock + ")";
  if (secs >= 0 && secs < 86400) return waited(secs) + " ago (" + clock + ")";
  return at.toLocaleString([], { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
}

function waited(secs) {
  if (secs < 60) return secs + " s";
  if (secs < 3600) return Math.floor(secs / 60) + " min";
  return Math.floor(secs / 3600) + " h " + Math.floor((secs % 3600) / 60) + " min";
}

// What this person has read of each conversation: the customer's last
// message's time when they last opened it (contract 36's unread marks).
const READ = "desk-read";
function readTimes() {
  try { return JSON.parse(localStorage.getItem(READ) || "{}"); } catch (_) { return {}; }
}
function unread(item) {
  if (!item.customer_wrote_at || !item.conversation_id) return false;
  const read = readTimes()[item.conversation_id];
  return !read || read < item.customer_wrote_at;
}
function markRead(item) {
  if (!item.customer_wrote_at || !item.conversation_id) return;
  const times = readTimes();
  times[item.conversation_id] = item.customer_wrote_at;
  // The newest 500: the queue's pages, and more.
  const kept = Object.entries(times).sort((a, b) => (a[1] < b[1] ? 1 : -1)).slice(0, 500);
  localStorage.setItem(READ, JSON.stringify(Object.fromEntries(kept)));
}

// When a person owes the first reply (contract 32), in words: due in, or
// overdue by, with the local time; or when the first reply came.
function dueLine(item) {
  const local = (at) => new Date(at).toLocaleString([], { weekday: "short", hour: "2-digit", minute: "2-digit" });
  if (item.first_reply_at) return el("span", "first answered " + local(item.first_reply_at), "hint due");
  if (!item.due_at) return null;
  const secs = Math.round((new Date(item.due_at) - Date.now()) / 1000);
  return item.overdue
    ? el("span", "overdue by " + waited(Math.max(0, -secs)) + " (due " + local(item.due_at) + ")", "due overdue")
    : el("span", "due in " + waited(Math.max(0, secs)) + " (" + local(item.due_at) + ")", "hint due");
}

function queueEntry(item) {
  const li = el("li");
  const button = el("button");
  button.type = "button";
  button.dataset.id = item.id;
  button.dataset.kind = item.kind;
  // Reasons and labels in words, from the function (contract 36).
  const reasons = item.reasons_in_words.join("; ");
  const head = item.kind === "handoff"
    ? reasons + " · " + item.customer + (item.who && item.who !== "customer" ? " (" + item.who + ")" : "")
    : item.amount + " · order " + item.order_id + " · " + item.customer;
  button.append(el("strong", head), el("br"), el("span", "waiting " + waited(item.waited_secs), "hint"));
  if (item.kind !== "handoff" && reasons) button.append(el("br"), el("span", reasons, "hint"));
  if (item.router_in_words) button.append(el("br"), el("span", "router: " + item.router_in_words, "hint"));
  for (const line of item.summary || []) button.append(el("br"), el("span", line, "hint"));
  if (item.kind === "handoff") {
    const holder = item.held_by ? "with " + item.held_by.name : "nobody has it";
    const wrote = item.customer_wrote_at ? " · customer wrote " + when(item.customer_wrote_at) : "";
    button.append(el("br"), el("span", holder + wrote, "holder"));
    // The start of the customer's last message, and whether this person has
    // read it (kept in this browser: what the person opened, when).
    if (item.last_words) button.append(el("br"), el("span", "“" + item.last_words + "”", "last-words"));
    // The open conversation is being read.
    if (selected && selected.id === item.id) markRead(item);
    if (unread(item)) {
      button.classList.add("unread");
      button.prepend(el("span", "New ", "unread-mark"));
    }
    const due = dueLine(item);
    if (due) button.append(el("br"), due);
    if (item.overdue) button.classList.add("overdue");
  }
  if (selected && selected.id === item.id) button.setAttribute("aria-current", "true");
  button.addEventListener("click", () => open(item));
  li.append(button);
  return li;
}

async function refresh() {
  if (!token) return;
  if (document.hidden) return; // refreshed again when the tab is shown
  try {
    const { status, data } = await call("GET", "queue");
    if (status !== 200) throw new Error(data.detail || ("HTTP " + status));
    if (!me) {
      me = data.you;
      $("saved-replies-manage").hidden = !me.approver;
      loadSavedReplies();
    }
    me = data.you;
    $("whoami").textContent = "Signed in as " + me.name + (me.approver ? " (approver)" : "");
    const mineOnly = $("mine").checked;
    // Which holds are one's own, the server says (two people may share a name).
    const visitorHandoffs = data.visitor_handoffs || [];
    const more = data.more || {};
    const own = (items) => (mineOnly ? items.filter((h) => h.held_by && h.held_by.yours === true) : items);
    // The handoffs come a page at a time (oldest first), visitors' apart,
    // with how many more wait: the queue stays readable however many are open.
    for (const [list, items, beyond] of [
      ["approvals", data.approvals, 0],
      ["handoffs", own(data.handoffs), more.handoffs || 0],
      ["visitor-handoffs", own(visitorHandoffs), more.visitor_handoffs || 0],
      ["unknown", data.unknown_outcomes, 0],
    ]) {
      const ul = $(list);
      ul.replaceChildren(...items.map(queueEntry));
      if (!items.length) ul.append(el("li", "Nothing waits.", "hint"));
      if (beyond > 0) ul.append(el("li", (beyond >= 1000 ? "1000 or more" : beyond) + " more wait behind these.", "hint"));
    }
    const all = [...data.approvals, ...data.handoffs, ...visitorHandoffs, ...data.unknown_outcomes];
    const unclaimed = all.filter((item) => !item.held_by).length;
    document.title = (unclaimed ? "(" + unclaimed + ") " : "") + "Support desk";
    notify(all);
    // The open conversation, read again with the queue: a customer's new
    // message shows without a click, the reply being written kept.
    if (selected && selected.kind === "handoff") reread(selected);
    $("queue-status").textContent = "Updated " + new Date().toLocaleTimeString();
    backoff = REFRESH_MS;
    schedule(refreshMs());
  } catch (error) {
    if (!token) return;
    $("queue-status").textContent = "The queue could not be read (" + error.message + "); trying again.";
    backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    schedule(backoff);
  }
}

// A notification where the person allowed them, once per new item and once
// per new customer message in a conversation they have; none for what
// waited when the page was opened.
function notify(items) {
  const raise = (key, text) => {
    if (notified.has(key)) return;
    notified.add(key);
    if (firstRead || !("Notification" in window) || Notification.permission !== "granted") return;
    try { new Notification("Support desk", { body: text, tag: key }); } catch (_) { /* not allowed here */ }
  };
  for (const item of items) {
    raise(item.id, item.kind === "handoff" ? "A conversation waits for a person" : "A refund waits for a person");
    if (item.kind === "handoff" && item.held_by && item.held_by.yours === true && item.customer_wrote_at) {
      raise(item.id + "@" + item.customer_wrote_at, "The customer wrote again");
    }
  }
  firstRead = false;
}

document.addEventListener("visibilitychange", () => { if (!document.hidden && token) refresh(); });

// --- An item, opened beside the queue.
function facts(pairs) {
  const dl = el("dl", null, "facts");
  for (const [name, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    dl.append(el("dt", name));
    const dd = el("dd");
    if (value instanceof Node) dd.append(value); else dd.textContent = String(value);
    dl.append(dd);
  }
  return dl;
}

function passages(cited) {
  const box = el("div");
  for (const p of cited || []) {
    box.append(el("h4", "Help centre: " + p.title + " (" + p.article_id + "@" + p.version + ")"));
    box.append(el("blockquote", p.passage));
    box.append(link(p.url, p.url));
  }
  return box;
}

function transcript(view) {
  const box = el("div");
  if (view.handoff) {
    const h = view.handoff;
    box.append(el("h3", "Handed off: " + h.reason_in_words));
    box.append(facts([["at", when(h.at)], ["router", h.router_in_words], ["closed", h.closed_by ? h.closed_by + ", " + when(h.closed_at) : "open"]]));
    const due = dueLine(h);
    if (due) box.append(due);
    if (h.model_summary) {
      const summary = el("p", null, "who-model_summary");
      summary.append(el("strong", "The model's summary (the model's words): "), el("span", h.model_summary));
      box.append(summary);
    }
  }
  if (view.rating) {
    const answer = el("p", null, "rating");
    answer.append(el("strong", "Did this solve it? " + (view.rating.solved ? "Yes" : "No") + " (" + when(view.rating.at) + ")"));
    if (view.rating.comment) answer.append(el("br"), el("span", "The customer's words: " + view.rating.comment));
    box.append(answer);
  }
  box.append(el("p", view.held_by
    ? "With " + view.held_by.name + " since " + when(view.held_by.since) + (view.held_by.taken_over_from ? " (taken over from " + view.held_by.taken_over_from + ")" : "")
    : "Nobody has this conversation.", "holder"));
  for (const v of view.verdicts || []) box.append(el("p", "Verdict: " + v.intent + " by " + v.by + ", " + when(v.at), "hint"));
  if ((view.orders || []).length) {
    const p = el("p", "Orders: ");
    for (const o of view.orders) { p.append(o.url ? link(o.url, o.order_id) : el("span", o.order_id), " "); }
    box.append(p);
  }
  const ol = el("ol", null, "transcript");
  ol.setAttribute("aria-label", "Transcript");
  for (const x of view.exchanges || []) {
    const meta = el("li", null, "hint");
    // When, and the router's labels, in words; the request only as a link to its trace or to copy (contract 36).
    meta.append(when(x.at) + (x.router_in_words ? " · router: " + x.router_in_words : ""));
    if (x.request_id) {
      meta.append(" · ");
      if (x.trace_url) meta.append(link(x.trace_url, "trace"));
      else meta.append("request", copyButton(x.request_id));
    }
    ol.append(meta);
    for (const line of x.lines) {
      const who = { customer: "Customer", agent: "Agent", person: "Person" + (line.by ? " (" + line.by + ")" : ""), tool: "Code" }[line.who] || line.who;
      const li = el("li", null, "who-" + line.who);
      li.append(el("strong", who + ": "), el("span", line.text));
      ol.append(li);
    }
    if ((x.cited || []).length) { const li = el("li"); li.append(passages(x.cited)); ol.append(li); }
  }
  box.append(ol);
  if ((view.internal_notes || []).length) {
    const notes = el("ul", null, "internal-notes");
    notes.setAttribute("aria-label", "Internal notes");
    for (const n of view.internal_notes) {
      const li = el("li", null, "who-internal");
      li.append(el("strong", "Internal note (" + n.by + ", " + when(n.at) + "), not shown to the customer: "), el("span", n.text));
      notes.append(li);
    }
    box.append(notes);
  }
  if ((view.refunds || []).length) {
    box.append(el("h3", "Refunds"));
    const ul = el("ul");
    for (const r of view.refunds) ul.append(recordLine(r));
    box.append(ul);
  }
  return box;
}

function say(text) {
  $("outcome").textContent = text;
}

// A button that sends one decision: one Idempotency-Key per click, kept for a
// re-send of the same body until a definite answer comes (a 5xx, or no answer,
// may have landed: the same key never decides or posts twice), and the button
// disabled while it is sent. `clears`: the box a sent one empties.
function decision(label, path, bodyOf, className, clears) {
  const button = el("button", label, className);
  button.type = "button";
  let key = null;
  let keyFor = null;
  button.addEventListener("click", async () => {
    if (button.disabled) return;
    const body = bodyOf();
    if (body === null) return;
    button.disabled = true;
    const sent = JSON.stringify(body);
    if (!key || keyFor !== sent) {
      key = crypto.randomUUID();
      keyFor = sent;
    }
    say("Sending…");
    try {
      const { status, data } = await call("POST", path, body, key);
      if (status < 500) key = null;
      if (status === 200) say(data.text);
      else if (status === 409 && data.held_by) say(data.held_by + " has this conversation" + (data.held_since ? " since " + when(data.held_since) : "") + ": take it over to answer.");
      else if (status === 409 && data.decided_by) say("Already decided by " + data.decided_by + (data.decided_at ? " at " + data.decided_at : "") + ". " + (data.detail || ""));
      else if (status === 403) say("You may not do this: " + (data.detail || ""));
      else say((data.detail || "HTTP " + status));
      // Sent: its box is emptied before the item is shown anew.
      if (status === 200 && clears && $(clears)) $(clears).value = "";
      // The item as it is now (its state, the buttons that still apply), the outcome kept.
      if (selected && (status === 200 || status === 409)) open(selected, true);
      refresh();
    } catch (_) {
      say("No answer came: press again to send the same decision once more.");
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

// A refund record in a line: in words, the record's id only to copy
// (contract 36), and the order's page where the shop has one.
function recordLine(r) {
  const li = el("li", r.amount + " on order " + r.order_id + ": " + r.state_in_words + " ");
  li.append(copyButton(r.id));
  if (r.order_url) li.append(" ", link(r.order_url, "order page"));
  return li;
}

// Copies an id (the only place an id is offered to a person: contract 36).
function copyButton(id) {
  const button = el("button", "Copy", "secondary copy");
  button.type = "button";
  button.setAttribute("aria-label", "Copy " + id);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(id);
      button.textContent = "Copied";
    } catch (_) {
      button.textContent = "Select it";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  });
  return button;
}

// The keyboard (contract 36): in the box Enter sends and Ctrl+Enter adds a
// note; elsewhere J and K move in the queue.
document.addEventListener("keydown", (event) => {
  const box = $("reply-text");
  if (event.target === box && event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    const label = event.ctrlKey || event.metaKey ? "Add internal note" : "Send reply";
    const button = [...$("actions").querySelectorAll("button")].find((b) => b.textContent === label);
    if (button) button.click();
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (["INPUT", "TEXTAREA", "SELECT"].includes(event.target.tagName)) return;
  const step = event.key === "j" ? 1 : event.key === "k" ? -1 : 0;
  if (!step) return;
  const entries = [...document.querySelectorAll("#approvals li button, #handoffs li button, #visitor-handoffs li button, #unknown li button")];
  if (!entries.length) return;
  const at = entries.findIndex((b) => b.getAttribute("aria-current") === "true");
  const next = entries[Math.min(entries.length - 1, Math.max(0, at < 0 ? 0 : at + step))];
  event.preventDefault();
  next.focus();
  next.click();
});

function field(id, label, multiline) {
  const wrap = el("p", null, "field");
  const l = el("label", label);
  l.htmlFor = id;
  const input = el(multiline ? "textarea" : "input");
  input.id = id;
  if (multiline) input.rows = 3;
  wrap.append(l, input);
  return wrap;
}

// --- Finding things (contract 30): an exact id; each result opens as from the queue.
function conversationItem(line) {
  return { kind: "handoff", id: "h_" + line.id.replace(/^c_/, ""), conversation_id: line.id };
}

function conversationButton(line) {
  const button = el("button", null, "secondary");
  button.type = "button";
  button.append(el("strong", "Conversation " + line.id), el("br"),
    el("span", "last " + when(line.updated_at) + " · " + line.exchanges + " exchange(s)" + (line.handoff ? " · handoff " + line.handoff : ""), "hint"));
  button.addEventListener("click", () => open(conversationItem(line)));
  return button;
}

async function find(event) {
  event.preventDefault();
  const q = $("search-q").value.trim();
  const list = $("search-results");
  if (!q) { list.hidden = true; return; }
  const { status, data } = await call("GET", "search?q=" + encodeURIComponent(q));
  list.hidden = false;
  if (status !== 200) { list.replaceChildren(el("li", data.detail || ("HTTP " + status), "error")); return; }
  const items = [];
  for (const line of data.conversations) { const li = el("li"); li.append(conversationButton(line)); items.push(li); }
  for (const r of data.refunds) {
    const li = el("li");
    const button = el("button", null, "secondary");
    button.type = "button";
    button.append(el("strong", "Refund " + r.amount + " · order " + r.order_id), el("br"), el("span", r.state + " (" + r.id + ")", "hint"));
    button.addEventListener("click", () => open({ kind: r.state === "unknown" ? "unknown_outcome" : "approval", id: r.id }));
    li.append(button);
    items.push(li);
  }
  list.replaceChildren(...items);
  if (!items.length) list.append(el("li", "Nothing has that id.", "hint"));
}

function customerPanel(panel) {
  const box = el("aside", null, "customer-panel");
  box.setAttribute("aria-label", "The customer");
  // Who, in words where the order system says (their e-mail); the id to copy (contract 36).
  const who = el("h3", panel.email ? panel.email : "Customer " + panel.customer);
  box.append(who, el("p", null, "hint"));
  box.lastChild.append(panel.who + " ", el("span", panel.customer, "id"), copyButton(panel.customer));
  box.append(el("p", panel.refunds.count + " refund record(s), " + panel.refunds.refunded + " refunded", "hint"));
  // Their orders and refunds with amounts, in words (contract 36).
  if ((panel.orders || []).length) {
    const orders = el("p", "Orders: ", "hint");
    for (const id of panel.orders) orders.append(el("span", id, "id"), " ");
    box.append(orders);
  }
  if ((panel.records || []).length) {
    const list = el("ul", null, "panel-refunds");
    for (const r of panel.records) list.append(recordLine(r));
    box.append(list);
  }
  if (panel.conversations.length) {
    const ul = el("ul", null, "items");
    for (const line of panel.conversations) { const li = el("li"); li.append(conversationButton(line)); ul.append(li); }
    box.append(ul);
  } else {
    box.append(el("p", "No other conversation.", "hint"));
  }
  return box;
}

// --- Saved replies (contract 30): read with the queue's first read and
// after each change; one is put into the reply box, never sent by itself.
let savedReplies = [];

async function loadSavedReplies() {
  const { status, data } = await call("GET", "saved-replies");
  if (status !== 200) return;
  savedReplies = data.saved_replies || [];
  const pick = $("saved-pick");
  const chosen = pick.value;
  pick.replaceChildren(new Option("A new saved reply", ""), ...savedReplies.map((r) => new Option(r.title, r.id)));
  pick.value = savedReplies.some((r) => r.id === chosen) ? chosen : "";
  const insert = $("saved-insert-pick");
  if (insert) insert.replaceChildren(new Option("Pick a saved reply", ""), ...savedReplies.map((r) => new Option(r.title, r.id)));
}

function savedReplyPicker() {
  const wrap = el("p", null, "field inline");
  const label = el("label", "Saved reply");
  label.htmlFor = "saved-insert-pick";
  const pick = el("select");
  pick.id = "saved-insert-pick";
  pick.append(new Option("Pick a saved reply", ""), ...savedReplies.map((r) => new Option(r.title, r.id)));
  const insert = el("button", "Insert", "secondary");
  insert.type = "button";
  insert.addEventListener("click", () => {
    const reply = savedReplies.find((r) => r.id === pick.value);
    if (!reply) { say("Pick a saved reply first."); return; }
    const box = $("reply-text");
    box.value = box.value.trim() ? box.value.trimEnd() + "\n\n" + reply.text : reply.text;
    box.focus();
  });
  wrap.append(label, pick, insert);
  return wrap;
}

// A title's slug: the saved reply's id.
function slug(title) {
  return title.toLowerCase().normalize("NFKD").replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 64) || "reply";
}

async function changeSavedReply(method) {
  const sayHere = (text) => { $("saved-outcome").textContent = text; };
  const chosen = $("saved-pick").value;
  const title = $("saved-title-text").value.trim();
  const text = $("saved-text").value.trim();
  if (method === "DELETE" && !chosen) { sayHere("Pick the saved reply to delete."); return; }
  if (method === "PUT" && (!title || !text)) { sayHere("Give a title and a text."); return; }
  const id = method === "DELETE" || chosen ? chosen : slug(title);
  const { status, data } = await call(method, "saved-replies/" + encodeURIComponent(id), method === "PUT" ? { title, text } : undefined);
  sayHere(status === 200 ? data.text : (data.detail || "HTTP " + status));
  if (status === 200) {
    if (method === "DELETE") { $("saved-title-text").value = ""; $("saved-text").value = ""; }
    await loadSavedReplies();
  }
}

// The open conversation as last shown: its exchanges and notes, and who has it.
let seen = null;
// The customer panel as the conversation opened with it (re-reads skip it).
let shownPanel = null;
function shown(view) {
  return { words: view.exchanges.length + "/" + (view.internal_notes || []).length, holder: JSON.stringify(view.held_by) };
}

// Reads the open conversation again; shows it anew only when it changed,
// leaving what the person is writing where it is.
async function reread(item) {
  // Without the customer panel: it was read when the conversation opened.
  const { status, data } = await call("GET", "conversations/" + encodeURIComponent(item.conversation_id) + "?panel=false");
  if (status !== 200 || selected !== item) return;
  const now = shown(data);
  if (seen && now.words === seen.words && now.holder === seen.holder) return;
  if (!data.customer_panel) data.customer_panel = shownPanel;
  // Who has it decides the buttons: shown anew, the outcome kept.
  if (!seen || now.holder !== seen.holder) { open(item, true); return; }
  seen = now;
  $("item-body").replaceChildren(transcript(data));
}

// A reply being written when someone else took the conversation, by item:
// put back in the box once this person has it.
const drafts = new Map();

async function open(item, keepOutcome) {
  // Shown anew (after a click's answer, or when who has it changed): what
  // the person was writing stays; a sent reply or note cleared its own box.
  const writing = keepOutcome && selected && selected.id === item.id
    ? { reply: $("reply-text") && $("reply-text").value }
    : {};
  selected = item;
  markRead(item);
  document.querySelectorAll(".items button").forEach((b) => {
    b.setAttribute("aria-current", String(b.dataset.id === item.id));
    if (b.dataset.id === item.id) { b.classList.remove("unread"); const mark = b.querySelector(".unread-mark"); if (mark) mark.remove(); }
  });
  if (!keepOutcome) say("");
  // The title in words; the id only where a person copies it (contract 36).
  $("item-title").replaceChildren(
    item.kind === "handoff" ? "Conversation " : "Refund ",
    el("span", item.kind === "handoff" ? item.conversation_id : item.id, "id"),
    copyButton(item.kind === "handoff" ? item.conversation_id : item.id),
  );
  $("context-body").replaceChildren();
  $("item-body").replaceChildren(el("p", "Reading…", "hint"));
  $("actions").replaceChildren();
  const body = $("item-body");
  if (item.kind === "handoff") {
    const { status, data } = await call("GET", "conversations/" + encodeURIComponent(item.conversation_id));
    if (status !== 200) { body.replaceChildren(el("p", data.detail || ("HTTP " + status), "error")); return; }
    body.replaceChildren(transcript(data));
    seen = shown(data);
    shownPanel = data.customer_panel;
    if (data.customer_panel) $("context-body").replaceChildren(customerPanel(data.customer_panel));
    const actions = $("actions");
    const conversation = "conversations/" + encodeURIComponent(item.conversation_id);
    const mine = data.held_by && data.held_by.yours === true;
    // Someone else has it (contract 30): only taking it over is offered, not
    // a reply or a close the function would refuse (contract 36).
    const theirs = Boolean(data.held_by) && !mine;
    if (!data.held_by) actions.append(decision("Claim", conversation + "/claim", () => ({}), "secondary"));
    else if (mine) actions.append(decision("Release", conversation + "/release", () => ({}), "secondary"));
    else actions.append(decision("Take over from " + data.held_by.name, conversation + "/claim", () => ({ take_over: true }), "secondary"));
    // One box at the chat's foot (contract 36): a reply to the customer, or
    // a note for the team as its second mode. Someone else's conversation
    // takes a note, and a reply only once it is taken over.
    if (theirs) {
      actions.append(el("p", data.held_by.name + " has this conversation: take it over to answer.", "hint"));
      // What was being written when someone else took it waits for a take-over.
      if (writing.reply) drafts.set(item.id, writing.reply);
    } else {
      actions.append(savedReplyPicker());
    }
    actions.append(field("reply-text", theirs ? "A note for the team (never the customer's)" : "Reply to the customer, or a note for the team", true));
    const text = (what) => () => {
      const written = $("reply-text").value.trim();
      if (!written) { say("Write the " + what + " first."); return null; }
      return { text: written };
    };
    if (!theirs) {
      actions.append(decision("Send reply", "conversations/" + encodeURIComponent(item.conversation_id) + "/reply", text("reply"), undefined, "reply-text"));
    }
    actions.append(decision("Add internal note", conversation + "/notes", text("note"), "secondary", "reply-text"));
    if (!theirs && data.handoff && !data.handoff.closed_by) {
      actions.append(decision("Close handoff", "handoffs/" + encodeURIComponent(item.id) + "/close", () => ({}), "secondary"));
    }
    const draft = writing.reply || (!theirs && drafts.get(item.id));
    if (draft) { $("reply-text").value = draft; if (!theirs) drafts.delete(item.id); }
  } else {
    const { status, data } = await call("GET", "refunds/" + encodeURIComponent(item.id));
    if (status !== 200) { body.replaceChildren(el("p", data.detail || ("HTTP " + status), "error")); return; }
    const r = data.record;
    const order = data.order_now || {};
    const orderNow = order.read === "found"
      ? order.status + ", paid " + order.paid + " " + order.currency + ", refunded " + order.refunded + (order.delivered_at ? ", delivered " + order.delivered_at : "")
      : order.read === "not_found" ? "no such order for this customer now" : "could not be read now (" + (order.why || "") + ")";
    body.replaceChildren(
      facts([
        ["amount", data.amount], ["state", data.state_in_words], ["customer", r.user_id], ["order", r.order_id],
        ["the order now", orderNow], ["reasons", data.reasons_in_words.join("; ")],
        ["router", data.router_in_words], ["verdict", data.verdict], ["customer's message", r.customer_message],
        ["decided by", r.decided_by],
      ]),
      passages(data.cited),
    );
    // The customer and the refund's conversation, which opens with a click (contract 36).
    const context = [el("h3", "Customer " + r.user_id)];
    if (data.conversation_id) {
      const opens = el("button", "Open the conversation", "secondary");
      opens.type = "button";
      opens.addEventListener("click", () => open(conversationItem({ id: data.conversation_id })));
      context.push(opens);
    }
    $("context-body").replaceChildren(...context);
    const actions = $("actions");
    if (me && me.approver && data.state === "awaiting_approval") {
      actions.append(decision("Approve", "refunds/" + encodeURIComponent(item.id) + "/approve", () => ({})));
      actions.append(field("reject-reason", "Reason to reject (kept for the audit trail)"));
      actions.append(decision("Reject", "refunds/" + encodeURIComponent(item.id) + "/reject", () => {
        const reason = $("reject-reason").value.trim();
        if (!reason) { say("Give a reason to reject."); return null; }
        return { reason };
      }, "danger"));
    } else if (me && me.approver && item.kind === "unknown_outcome") {
      actions.append(field("refund-id", "Refund id payments confirmed"));
      actions.append(decision("Resolve: executed", "refunds/" + encodeURIComponent(item.id) + "/resolve", () => {
        const executed = $("refund-id").value.trim();
        if (!executed) { say("Give the refund id payments confirmed."); return null; }
        return { executed };
      }));
      actions.append(decision("Resolve: not executed", "refunds/" + encodeURIComponent(item.id) + "/resolve", () => ({ not_executed: true }), "secondary"));
    } else if (me && !me.approver) {
      actions.append(el("p", "Only an approver decides refunds.", "hint"));
    }
  }
  if (!keepOutcome) $("item").focus();
}

$("sign-in").addEventListener("submit", signIn);
$("new-password-form").addEventListener("submit", setNewPassword);
$("sign-out").addEventListener("click", async () => { await revoke(); signOut(); });
$("mfa-form").addEventListener("submit", answerMfa);
$("mfa-setup-form").addEventListener("submit", confirmMfaSetup);
if (token) { scheduleRenewal(); start(); }
$("mine").addEventListener("change", () => refresh());
$("allow-notifications").addEventListener("click", () => {
  if ("Notification" in window) Notification.requestPermission();
});
$("saved-pick").addEventListener("change", () => {
  const reply = savedReplies.find((r) => r.id === $("saved-pick").value);
  $("saved-title-text").value = reply ? reply.title : "";
  $("saved-text").value = reply ? reply.text : "";
});
$("saved-save").addEventListener("click", () => changeSavedReply("PUT"));
$("saved-delete").addEventListener("click", () => changeSavedReply("DELETE"));
$("search").addEventListener("submit", find);
