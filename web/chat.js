// The refund assistant's chat widget: no framework, no build step.
//
// Every customer message gets one Idempotency-Key (a UUID). A re-send of
// that message (after a dropped connection, a 409 or a 503) reuses it, so
// the function answers it once and replays that answer: a refund is never
// made twice because the network or a double click got in the way. A new
// message gets a new key. After a 200, 4xx, 502 or 504 the page never
// re-sends by itself; it says what happened and offers "Try again".
//
// The function keeps the conversation; the page keeps only its id, for this
// tab (sessionStorage), and sends it with every message. An answer names the
// conversation; a 404 for it means the conversation ended (it expired): the
// page says so, starts a new one and puts the customer's message back in the
// box to send again. "New conversation" starts one on purpose. An answer
// with `handed_off` means a person has the conversation: the page says so,
// keeps the input open (later messages reach the person) and offers a new
// conversation.
//
// While a refund waits for a person (the answer's `awaiting_approval`), or a
// person has the conversation (`handed_off`), the page asks the function
// what is new (GET .../conversations/{id}?after=N): it goes by these flags,
// never by the reply's words, and a reloaded page reads the conversation
// back and picks its polling up from the same flags. Polling:
// at most every `refund-chat-poll-seconds` (10 s as shipped), doubling the
// wait while nothing comes (up to 8 times as long), and not at all while
// the tab is hidden. What a person wrote is shown as a person's message, in
// the log that screen readers announce. Customer and agent messages the
// page shows from its own requests; it takes only a person's from a read
// (a reloaded page shows the whole conversation from one read).
//
// A message is sent in event-stream mode: the reply's words are shown as
// they are written (a draft, outside the log), with a line for the step in
// progress ("Looking up your order…"); a discarded draft is dropped, and
// `done`, which carries what a JSON answer would, becomes the message in the
// log, the one thing screen readers announce. An answer decided before the
// assistant began (an error, a replay, a person's conversation) comes as
// JSON and is shown as before; a stream that breaks off is a dropped answer.
//
// A visitor (the customer picker's "a visitor", contract 27) talks to
// `.../visitor` with no user_id: the first answer hands the page a token
// (`visitor`), kept for this tab and sent back as X-Visitor-Token with every
// later message and read. The first message goes without an
// Idempotency-Key (there is no token yet to scope it by); every later one
// has its key as a customer's does. An answer with `verify` means the
// question needs an account: the page says how to go on.
//
// A visitor may confirm their e-mail instead (contract 27, "Confirm my
// e-mail", offered once the page knows the guest pool's sign-in): the page
// signs them in to the guest pool itself, and goes on as `guest:<sub>`,
// the conversation claimed and the question sent again as for a customer.
//
// Deployed (`refund-chat-identity` is "token", the function's page at
// GET /support/), there is no picker: the page talks as a visitor until the
// shop's own page, which embeds it, hands over the signed-in customer's ID
// token by postMessage ({type: "refund-chat-id-token", token}); only a
// message from `refund-chat-widget-origin` counts, and the token goes to the
// API in Authorization, where the authorizer verifies it. The page reads the
// token's `sub` only to name the customer in the body, never to trust it.
//
// A reply's URL becomes a link only on an origin of the shop's help-centre
// articles (`refund-chat-link-origins`, filled from the articles the
// function loads): any other URL, which a customer or an injected reply
// could have put there, stays text, a return label's origin too. A started
// return's label comes apart from the text (`label`), and is linked as such.
(() => {
  "use strict";
  const endpoint = document.querySelector('meta[name="refund-chat-endpoint"]').content;
  const $ = (id) => document.getElementById(id);
  const log = $("log"), form = $("composer"), input = $("message"), send = $("send");
  const customer = $("customer"), problem = $("problem"), problemText = $("problem-text"), retry = $("retry");
  const fresh = $("new-conversation"), withPerson = $("with-a-person"), personExpected = $("person-expected");
  const CONVERSATION = "refund-chat-conversation";
  const AUTOMATIC_RESENDS = 3; // for 409 and 503, each after its Retry-After
  const waiting = $("waiting");
  const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content || "";
  const IDENTITY = meta("refund-chat-identity") || "pick";
  const WIDGET_ORIGIN = meta("refund-chat-widget-origin");
  const signedIn = $("signed-in");
  let idToken = null; // the signed-in customer's (from the shop's page) or guest's (from the guest pool)
  let idTokenFor = null; // whose it is: sent only while that person talks
  let refreshToken = null; // a guest's, in memory only: renews an expired ID token once
  const tokenNow = () => (!isVisitor() && idToken && customer.value === idTokenFor ? idToken : null);
  let askedToVerify = null; // the visitor's message that needs an account, sent again once signed in
  const VISITOR = "visitor"; // the picker's value for someone not signed in
  const VISITOR_TOKEN = "refund-chat-visitor-token";
  const isVisitor = () => customer.value === VISITOR;
  const base = () => endpoint.replace(/\/+$/, "") + (isVisitor() ? "/visitor" : "");
  const readBase = () => base() + "/conversations/";
  const visitorToken = () => sessionStorage.getItem(VISITOR_TOKEN);
  // Who the request is from: a customer's user_id in the query, or a visitor's token.
  function readRequest(id, after) {
    const query = new URLSearchParams(isVisitor() ? {} : { user_id: customer.value });
    if (after !== null && after !== undefined) query.set("after", String(after));
    const headers = { accept: "application/json" };
    if (isVisitor() && visitorToken()) headers["x-visitor-token"] = visitorToken();
    if (tokenNow()) headers.authorization = tokenNow();
    const suffix = query.toString() ? "?" + query : "";
    return fetch(readBase() + encodeURIComponent(id) + suffix, { headers });
  }
  const POLL_SECONDS =
    Number(document.querySelector('meta[name="refund-chat-poll-seconds"]')?.content) || 10;
  const POLL_BACKOFF_CAP = 8; // the longest wait, in intervals
  const LINK_ORIGINS = new Set(
    (document.querySelector('meta[name="refund-chat-link-origins"]')?.content || "").split(/\s+/).filter(Boolean),
  );

  let current = null; // the message being answered: { key, text, body }
  // What the page polls for, and what it has read: the last seq, and the
  // person's messages it has shown (by seq), so none is shown twice.
  const poll = { timer: null, delay: POLL_SECONDS, after: null, approval: false, person: false, shown: new Set() };

  // The conversation of this tab, for its customer only.
  function conversationId() {
    try {
      const kept = JSON.parse(sessionStorage.getItem(CONVERSATION) || "null");
      return kept && kept.customer === customer.value ? kept.id : null;
    } catch (_) {
      return null;
    }
  }

  function keepConversation(id) {
    if (typeof id === "string" && id) {
      sessionStorage.setItem(CONVERSATION, JSON.stringify({ customer: customer.value, id }));
      listen();
    }
  }

  // Live pokes (contract 31): while the page shows a conversation it hears
  // the conversation's channel, and reads again on every poke and every
  // (re)connection; the poll stays as the safety net, slow while the socket
  // is up. Who listens is who talks: a signed-in customer's or a guest's
  // token, a visitor's token, or (make run's picker) the customer named as
  // the body names them.
  const live = { id: null, handle: null };
  async function liveToken() {
    if (isVisitor()) return visitorToken();
    // A guest's ID token is renewed before it expires (the socket
    // reconnects a minute before): the shop's page renews a customer's.
    const expires = tokenNow() && RefundChatLive.expiresAt(tokenNow());
    if (refreshToken && expires && expires - Date.now() < 120000) await renewGuestToken();
    return tokenNow() || (IDENTITY === "pick" ? "body-user:" + customer.value : null);
  }
  function listen() {
    const id = conversationId();
    if (!window.RefundChatLive || !RefundChatLive.enabled || live.id === id) return;
    stopListening();
    if (!id) return;
    live.id = id;
    live.handle = RefundChatLive.open({
      channel: RefundChatLive.conversationChannel(id),
      token: liveToken,
      onRead: () => readNew(),
      onState: () => schedulePoll(),
    });
  }
  function stopListening() {
    if (live.handle) live.handle.close();
    Object.assign(live, { id: null, handle: null });
  }
  const liveUp = () => Boolean(live.handle && live.handle.up());

  function startNewConversation() {
    sessionStorage.removeItem(CONVERSATION);
    stopListening();
    stopPolling();
    current = null;
    log.replaceChildren();
    problem.hidden = true;
    withPerson.hidden = true;
    document.getElementById("rating").hidden = true;
    personExpected.hidden = true;
  }

  // A person has the conversation: the input stays open (what the customer
  // writes reaches them), and a new conversation is the agent's again.
  function showWithAPerson() {
    withPerson.hidden = false;
  }

  // When a person will answer, in the function's words (contract 32): each
  // answer and read of a handed-off conversation brings it afresh, so a page
  // left open overnight shows the morning's. None once the handoff is closed.
  function showExpected(answer) {
    const sentence = answer.person_expected && answer.person_expected.sentence;
    personExpected.textContent = typeof sentence === "string" ? sentence : "";
    personExpected.hidden = typeof sentence !== "string";
  }

  // A message to a person's conversation that the function answered with
  // no words (it said when a person will answer once already): marked sent.
  function markSent(item) {
    if (!item || item.querySelector(".sent")) return;
    const mark = document.createElement("span");
    mark.className = "sent";
    mark.textContent = "sent to our team";
    item.append(mark);
  }

  // A reply is text, never HTML: a URL on a help-centre origin becomes a
  // link made here, with the text as the link's text; everything else stays text.
  const LINK = /https?:\/\/[^\s<>"']+/g;
  function linkable(url) {
    try {
      return LINK_ORIGINS.has(new URL(url).origin);
    } catch (_) {
      return false;
    }
  }
  function withLinks(text) {
    const parts = [];
    let from = 0;
    for (const match of text.matchAll(LINK)) {
      // A sentence's closing punctuation is not part of the link.
      const url = match[0].replace(/[.,;:!?)]+$/, "");
      if (!linkable(url)) continue;
      parts.push(text.slice(from, match.index));
      const link = document.createElement("a");
      link.href = url;
      link.textContent = url;
      link.rel = "noopener noreferrer";
      link.target = "_blank";
      parts.push(link);
      from = match.index + url.length;
    }
    parts.push(text.slice(from));
    return parts;
  }

  function say(kind, text, tag) {
    const item = document.createElement("li");
    item.className = kind;
    if (tag) {
      const label = document.createElement("span");
      label.className = "tag";
      label.textContent = tag;
      item.append(label);
    }
    item.append(...(kind.startsWith("assistant") ? withLinks(text) : [text]));
    log.append(item);
    item.scrollIntoView({ block: "end" });
    return item;
  }

  // A started return's label (contract 28) comes apart from the reply's
  // text, from code: this one URL is a link, whatever the text says.
  function sayLabel(label) {
    if (!label || typeof label.url !== "string") return;
    let url;
    try {
      url = new URL(label.url);
    } catch (_) {
      return;
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") return;
    const item = document.createElement("li");
    item.className = "return-label";
    const link = document.createElement("a");
    link.href = url.href;
    link.textContent = "Your return label";
    link.rel = "noopener noreferrer";
    link.target = "_blank";
    item.append(link);
    // The function's words, in the shop's zone (contract 36); the raw time only from an older answer.
    const useBy = typeof label.use_by === "string" ? label.use_by : label.expires_at;
    if (typeof useBy === "string") item.append(` (use it by ${useBy})`);
    log.append(item);
    item.scrollIntoView({ block: "end" });
  }

  function stopPolling() {
    clearTimeout(poll.timer);
    Object.assign(poll, { timer: null, delay: POLL_SECONDS, after: null, approval: false, person: false });
    poll.shown.clear();
    waiting.hidden = true;
    showPolling();
  }

  // Something a person will answer: poll from the shortest interval.
  function pollFor(what) {
    poll[what] = true;
    poll.delay = POLL_SECONDS;
    // A refund that waits says so; a person's conversation has its banner.
    waiting.hidden = !poll.approval;
    schedulePoll();
  }

  // The page's polling, for people and tests to see: the next wait in
  // seconds, or "off" (nothing to wait for, or a hidden tab).
  function showPolling() {
    document.body.dataset.polling = poll.timer ? String(pollDelay()) : "off";
  }

  // While the socket is up a poke says when to read: the poll is only the safety net.
  const pollDelay = () => (liveUp() ? RefundChatLive.POLL_SECONDS : poll.delay);

  function schedulePoll() {
    clearTimeout(poll.timer);
    poll.timer = null;
    if ((poll.approval || poll.person) && !document.hidden) {
      poll.timer = setTimeout(readNew, pollDelay() * 1000);
    }
    showPolling();
  }

  function backOff() {
    poll.delay = Math.min(poll.delay * 2, POLL_SECONDS * POLL_BACKOFF_CAP);
    schedulePoll();
  }

  async function readNew() {
    const id = conversationId();
    if (!id) return stopPolling();
    let response, answer;
    try {
      response = await readRequest(id, poll.after);
      answer = await response.json();
    } catch (_) {
      return backOff(); // the network, or a proxy's page: ask again later
    }
    if (id !== conversationId()) return; // a new conversation began meanwhile
    if (response.status !== 200) {
      // Ended, or not this customer's: the next message says so. Else later.
      return [401, 403, 404].includes(response.status) ? stopPolling() : backOff();
    }
    let heard = false;
    for (const message of answer.messages || []) {
      poll.after = poll.after === null ? message.seq : Math.max(poll.after, message.seq);
      if (message.from === "person" && !poll.shown.has(message.seq)) {
        poll.shown.add(message.seq);
        say("person", message.text, "From our support team");
        heard = true;
      }
    }
    if (answer.handed_off === true) {
      poll.person = true;
      // Closed by a person (no time to wait for): the banner no longer holds.
      withPerson.hidden = !answer.person_expected;
      showExpected(answer);
    }
    if (answer.ask_rating === true) askRating(id);
    // The conversation says when nothing waits any more (a decision came).
    if (answer.awaiting_approval === false && poll.approval) {
      poll.approval = false;
      waiting.hidden = true;
    }
    if (!heard) return backOff();
    // A person answered: what waited for approval is decided.
    poll.approval = false;
    poll.delay = POLL_SECONDS;
    waiting.hidden = true;
    schedulePoll();
  }

  // "Did this solve it?" (contract 30): asked once per conversation, after a
  // person closed it or decided a refund; the function keeps the first answer.
  const rating = document.getElementById("rating");
  const RATED = "refund-chat-rated";
  let ratingFor = null;
  function askRating(id) {
    if (sessionStorage.getItem(RATED + ":" + id) || ratingFor === id) return;
    ratingFor = id;
    rating.hidden = false;
  }
  async function sendRating(solved) {
    const id = ratingFor;
    if (!id) return;
    const comment = document.getElementById("rating-comment").value.trim();
    const query = isVisitor() ? "" : "?" + new URLSearchParams({ user_id: customer.value });
    const headers = { "content-type": "application/json" };
    if (isVisitor() && visitorToken()) headers["x-visitor-token"] = visitorToken();
    if (tokenNow()) headers.authorization = tokenNow();
    let response = null;
    try {
      response = await fetch(readBase() + encodeURIComponent(id) + "/rating" + query, {
        method: "POST",
        headers,
        body: JSON.stringify(comment ? { solved, comment } : { solved }),
      });
    } catch (_) {
      say("status", "Your answer could not be sent: try again.");
      return;
    }
    if (response.status === 200 || response.status === 409) {
      sessionStorage.setItem(RATED + ":" + id, "1");
      rating.hidden = true;
      say("status", "Thank you for telling us.");
    } else {
      say("status", "Your answer could not be sent: try again.");
    }
  }
  document.getElementById("rating-yes").addEventListener("click", () => sendRating(true));
  document.getElementById("rating-no").addEventListener("click", () => sendRating(false));

  // A hidden tab asks nothing; shown again, it asks at once.
  document.addEventListener("visibilitychange", () => {
    clearTimeout(poll.timer);
    poll.timer = null;
    showPolling();
    if (!document.hidden && (poll.approval || poll.person || liveUp())) {
      poll.delay = POLL_SECONDS;
      readNew();
    }
  });

  function setBusy(busy) {
    send.disabled = busy;
    form.setAttribute("aria-busy", String(busy));
    document.body.dataset.state = busy ? "sending" : "idle";
  }

  function showProblem(text, canRetry) {
    problemText.textContent = text;
    retry.hidden = !canRetry;
    problem.hidden = false;
    if (canRetry) retry.focus();
  }

  function resendLater(message, resendsLeft, seconds, words) {
    if (resendsLeft <= 0) {
      setBusy(false);
      showProblem(words + " Try again in a moment.", true);
      return;
    }
    say("status", words + " Trying again in " + seconds + " s…");
    setTimeout(() => deliver(message, resendsLeft - 1), seconds * 1000);
  }

  // The reply as it is written, and the step the assistant is on: outside
  // the log and hidden from screen readers, which hear the final message
  // once, when it joins the log.
  const STEPS = {
    order: "Looking up your order…",
    refund_check: "Checking the refund…",
    help_centre: "Searching the help centre…",
    payments: "Arranging the refund…",
    handoff: "Passing you to a person…",
  };
  const draft = $("draft"), step = $("step");
  function showDraft(text) {
    draft.textContent = text;
    draft.hidden = text === "";
    if (text) draft.scrollIntoView({ block: "end" });
  }
  function showStep(name) {
    step.textContent = STEPS[name] || "";
    step.hidden = !STEPS[name];
  }
  function clearLive() {
    showDraft("");
    showStep(null);
  }

  function connectionDropped() {
    clearLive();
    setBusy(false);
    showProblem(
      "The connection dropped before the answer arrived. Your message may have reached us: " +
        "try again, and nothing will be refunded twice.",
      true,
    );
  }

  // An event stream read as it arrives (EventSource cannot POST): events
  // split on a blank line, each an `event:` and a `data:` line. Returns
  // `done`'s status and body, or null if the stream ended without it.
  async function readEvents(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "", text = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return null;
      buffered += value;
      let end;
      while ((end = buffered.indexOf("\n\n")) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (block.startsWith(":")) continue; // keep-alive
        const name = /^event: (.*)$/m.exec(block)?.[1];
        let data = {};
        try {
          data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] || "{}");
        } catch (_) {
          continue;
        }
        if (name === "progress") showStep(data.step);
        else if (name === "delta") showDraft((text += data.text || ""));
        else if (name === "discard") showDraft((text = ""));
        else if (name === "done") {
          reader.cancel().catch(() => {});
          return data;
        }
      }
    }
  }

  async function deliver(message, resendsLeft = AUTOMATIC_RESENDS) {
    problem.hidden = true;
    setBusy(true);
    let response;
    const headers = { "content-type": "application/json", accept: "text/event-stream" };
    // A visitor's first message has no token yet, so no key either.
    if (!message.visitor || message.token) headers["idempotency-key"] = message.key;
    if (message.token) headers["x-visitor-token"] = message.token;
    if (!message.visitor && tokenNow()) headers.authorization = tokenNow();
    try {
      response = await fetch(message.url, {
        method: "POST",
        headers,
        body: message.body,
      });
    } catch (_) {
      return connectionDropped();
    }
    let status = response.status, answer = {};
    if ((response.headers.get("content-type") || "").startsWith("text/event-stream")) {
      let done = null;
      try {
        done = await readEvents(response);
      } catch (_) {
        // The stream broke: as a dropped answer, the key makes a re-send safe.
      }
      clearLive();
      if (!done) return connectionDropped();
      status = done.status;
      answer = done.body || {};
    } else {
      try {
        answer = await response.json();
      } catch (_) {
        // Every answer of the function is JSON; a proxy's error page is not.
      }
    }
    answered(message, resendsLeft, status, answer, response.headers);
  }

  // What JSON mode answered, or `done` carried: the same status, the same body.
  function answered(message, resendsLeft, status, answer, headers) {
    const wait = Math.max(1, Number(headers.get("retry-after")) || 1);
    if (message.visitor && typeof answer.visitor === "string") {
      sessionStorage.setItem(VISITOR_TOKEN, answer.visitor);
      message.token = answer.visitor;
    }
    keepConversation(answer.conversation_id);
    if (answer.handed_off === true) {
      showWithAPerson();
      showExpected(answer);
      if (status === 200) pollFor("person");
    }
    switch (status) {
      case 404:
        setBusy(false);
        current = null;
        startNewConversation();
        say("status", "That conversation has ended, so this is a new one. Your message is still in the box: send it again.");
        input.value = message.text;
        input.focus();
        return;
      case 200:
        setBusy(false);
        current = null;
        if (headers.get("idempotent-replayed") === "true") {
          say("status", "Recovered the answer to your message; nothing was done twice.");
        }
        if (answer.handed_off === true && !answer.reply) {
          markSent(message.item);
        } else {
          const pending = answer.awaiting_approval === true;
          say(pending ? "assistant pending-approval" : "assistant", answer.reply || "(no text)",
            pending ? "Waiting for our team" : null);
          sayLabel(answer.label);
          if (pending) pollFor("approval");
          // Code's answer to a visitor's question about an order (contract 27).
          if (answer.verify && Array.isArray(answer.verify.intents)) {
            askedToVerify = message.text;
            if (guestsOffered()) {
              say("status", "To go on with an order, confirm your e-mail below: this conversation goes on here.");
              showVerify();
            } else {
              say("status", "To go on with an order, sign in to the shop: this conversation goes on here.");
            }
          }
        }
        input.focus();
        return;
      case 409:
        // The same key, or the conversation's previous message, is still being answered.
        resendLater(message, resendsLeft, wait, "Your message is still being answered.");
        return;
      case 503:
        resendLater(message, resendsLeft, wait, "The assistant is briefly unavailable.");
        return;
      case 400:
      case 422:
        setBusy(false);
        current = null;
        input.value = message.text;
        showProblem("That message could not be sent: " + (answer.detail || "it is not valid") + ".", false);
        input.focus();
        return;
      case 401:
      case 403:
        // A guest's ID token lasts an hour: renewed once, the message goes again.
        if (status === 401 && !message.visitor && refreshToken && !message.renewed) {
          message.renewed = true;
          renewGuestToken().then((renewed) => {
            if (renewed) deliver(message, resendsLeft);
            else answered(message, resendsLeft, status, answer, headers);
          });
          return;
        }
        setBusy(false);
        current = null;
        if (message.visitor) {
          // A token the function no longer takes: the next message starts afresh.
          sessionStorage.removeItem(VISITOR_TOKEN);
          startNewConversation();
          input.value = message.text;
          showProblem("This chat has ended. Your message is still in the box: send it to start a new one.", false);
          return;
        }
        showProblem("Please sign in again to use the refund assistant.", false);
        return;
      case 504:
        setBusy(false);
        showProblem(
          "The assistant did not answer in time; your refund may still be checked by our team. " +
            "You can try again: nothing is refunded twice.",
          true,
        );
        return;
      case 502:
        setBusy(false);
        showProblem("The assistant could not finish answering. You can try again: nothing is refunded twice.", true);
        return;
      default:
        setBusy(false);
        showProblem("Something went wrong on our side. You can try again: nothing is refunded twice.", true);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || send.disabled) return;
    const visitor = isVisitor();
    const body = visitor ? { message: text } : { user_id: customer.value, message: text };
    const conversation = conversationId();
    if (conversation) body.conversation_id = conversation;
    current = {
      key: crypto.randomUUID(), text, body: JSON.stringify(body), url: base(), visitor,
      token: visitor ? visitorToken() : null,
    };
    current.item = say("customer", text);
    input.value = "";
    deliver(current);
  });

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  retry.addEventListener("click", () => {
    if (current) deliver(current);
  });

  fresh.addEventListener("click", () => {
    if (send.disabled) return;
    startNewConversation();
    say("status", "New conversation.");
    input.focus();
  });

  // The token's subject, read (not verified: the authorizer does that) to
  // name the customer in the body as the API asks.
  function subjectOf(token) {
    try {
      const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      const claims = JSON.parse(atob(part + "===".slice((part.length + 3) % 4)));
      return typeof claims.sub === "string" && claims.sub ? claims.sub : null;
    } catch (_) {
      return null;
    }
  }

  // Signed in (a customer's token from the shop, or a guest's from the
  // guest pool): `userId` talks from now on. A conversation begun as a
  // visitor is claimed; the same person's token renewed just replaces it.
  function signedInAs(token, userId, label) {
    idToken = token;
    idTokenFor = userId;
    if (customer.value !== userId) {
      const begun = isVisitor() ? conversationId() : null;
      const visitor = visitorToken();
      if (IDENTITY === "token") customer.replaceChildren(new Option(userId, userId));
      else {
        if (![...customer.options].some((option) => option.value === userId)) customer.add(new Option(label, userId));
        customer.value = userId;
      }
      if (begun && visitor) claim(begun, visitor);
      else if (conversationId()) restore(); // this person's, before a reload
      else startNewConversation();
    }
    signedIn.hidden = false;
    signedIn.textContent = userId.startsWith("guest:") ? "Signed in with your e-mail." : "Signed in at the shop.";
    // Signed in: a code form, or the offer to confirm an e-mail, no longer holds.
    $("verify").hidden = true;
    $("confirm-email").hidden = true;
  }

  if (IDENTITY === "token") {
    $("picker").hidden = true;
    customer.replaceChildren(new Option("a visitor", VISITOR));
    signedIn.hidden = false;
    signedIn.textContent = "Not signed in: ask about our rules here, or sign in at the shop for your orders.";
    window.addEventListener("message", (event) => {
      if (!WIDGET_ORIGIN || event.origin !== WIDGET_ORIGIN) return;
      const data = event.data;
      if (!data || data.type !== "refund-chat-id-token" || typeof data.token !== "string") return;
      const sub = subjectOf(data.token);
      if (sub) signedInAs(data.token, sub, "customer");
    });
  }

  // "Confirm my e-mail" (contract 27): the guest pool's passwordless
  // sign-in, from this page to Cognito. A new address signs up (no
  // password) and confirms with the code, whose session then signs in; an
  // address Cognito already knows answers UsernameExistsException to the
  // sign-up, and signs in with an EMAIL_OTP challenge instead (one it has
  // not confirmed yet gets a new sign-up code). The code goes from the
  // mailbox to Cognito only: never into the chat, the function or a model.
  // The guest is `guest:` and the token's sub, as the API asks.
  const GUEST_SIGN_IN = meta("refund-chat-guest-sign-in");
  const GUEST_CLIENT = meta("refund-chat-guest-client-id");
  const verify = $("verify"), confirmEmail = $("confirm-email"), verifyStatus = $("verify-status");
  const verifyEmail = $("verify-email"), verifyCode = $("verify-code"), codeStep = $("verify-code-step");
  let pendingSignIn = null; // { email, session } while a code is awaited; session null: a sign-up's
  const guestsOffered = () => Boolean(GUEST_SIGN_IN && GUEST_CLIENT) && isVisitor();
  function offerConfirm() {
    confirmEmail.hidden = !guestsOffered() || !verify.hidden;
  }

  async function cognito(target, body) {
    const response = await fetch(GUEST_SIGN_IN, {
      method: "POST",
      headers: {
        "content-type": "application/x-amz-json-1.1",
        "x-amz-target": "AWSCognitoIdentityProviderService." + target,
      },
      body: JSON.stringify({ ClientId: GUEST_CLIENT, ...body }),
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) {
      const error = new Error(answer.message || "the sign-in failed");
      error.type = String(answer.__type || "").split("#").pop();
      throw error;
    }
    return answer;
  }

  function showVerify() {
    if (!guestsOffered()) return;
    verify.hidden = false;
    confirmEmail.hidden = true;
    verifyEmail.focus();
  }
  confirmEmail.addEventListener("click", showVerify);

  verify.addEventListener("submit", async (event) => {
    event.preventDefault();
    const email = verifyEmail.value.trim();
    if (!email.includes("@")) {
      verifyStatus.textContent = "Please type your e-mail address.";
      return;
    }
    verifyStatus.textContent = "Sending a code…";
    try {
      try {
        // Without a password, Cognito takes a sign-up that gives the e-mail.
        await cognito("SignUp", { Username: email, UserAttributes: [{ Name: "email", Value: email }] });
        pendingSignIn = { email, session: null };
      } catch (error) {
        if (error.type !== "UsernameExistsException") throw error;
        const challenge = await cognito("InitiateAuth", {
          AuthFlow: "USER_AUTH",
          AuthParameters: { USERNAME: email, PREFERRED_CHALLENGE: "EMAIL_OTP" },
        });
        pendingSignIn = { email, session: challenge.Session };
      }
    } catch (error) {
      if (error.type === "UserNotConfirmedException") {
        await cognito("ResendConfirmationCode", { Username: email }).catch(() => {});
        pendingSignIn = { email, session: null };
      } else {
        verifyStatus.textContent = "The code could not be sent. Try again in a moment.";
        return;
      }
    }
    codeStep.hidden = false;
    verifyCode.value = "";
    verifyCode.focus();
    verifyStatus.textContent = "We sent a code to " + email + ". Type it here.";
  });

  $("verify-confirm").addEventListener("click", async () => {
    if (!pendingSignIn) return;
    const { email, session } = pendingSignIn;
    const code = verifyCode.value.trim();
    let result;
    try {
      if (session === null) {
        const confirmed = await cognito("ConfirmSignUp", { Username: email, ConfirmationCode: code });
        result = await cognito("InitiateAuth", {
          AuthFlow: "USER_AUTH",
          AuthParameters: { USERNAME: email },
          Session: confirmed.Session,
        });
      } else {
        result = await cognito("RespondToAuthChallenge", {
          ChallengeName: "EMAIL_OTP",
          Session: session,
          ChallengeResponses: { USERNAME: email, EMAIL_OTP_CODE: code },
        });
        pendingSignIn.session = result.Session || session;
      }
    } catch (error) {
      verifyCode.value = "";
      if (error.type === "CodeMismatchException") {
        verifyStatus.textContent = "That code is not right. Check the e-mail and type it again.";
      } else {
        pendingSignIn = null;
        codeStep.hidden = true;
        verifyStatus.textContent = "That code can no longer be used. Send yourself a new one.";
      }
      return;
    }
    const token = result.AuthenticationResult && result.AuthenticationResult.IdToken;
    const sub = token && subjectOf(token);
    if (!sub) {
      verifyStatus.textContent = "The sign-in did not finish. Try again.";
      return;
    }
    pendingSignIn = null;
    verify.hidden = true;
    codeStep.hidden = true;
    verifyStatus.textContent = "";
    refreshToken = result.AuthenticationResult.RefreshToken || null;
    signedInAs(token, "guest:" + sub, "guest (" + email + ")");
  });

  // The guest's ID token renewed with the refresh token (Cognito's
  // REFRESH_TOKEN_AUTH); false when it cannot be, and the guest signs in again.
  async function renewGuestToken() {
    try {
      const renewed = await cognito("InitiateAuth", {
        AuthFlow: "REFRESH_TOKEN_AUTH",
        AuthParameters: { REFRESH_TOKEN: refreshToken },
      });
      const token = renewed.AuthenticationResult && renewed.AuthenticationResult.IdToken;
      if (!token || "guest:" + subjectOf(token) !== idTokenFor) return false;
      idToken = token;
      return true;
    } catch (_) {
      refreshToken = null;
      return false;
    }
  }
  offerConfirm();
  customer.addEventListener("change", offerConfirm);

  // The conversation begun as a visitor becomes the signed-in customer's
  // (contract 27), and the question that asked to verify is sent again, so
  // nothing is typed twice.
  async function claim(id, token) {
    let response;
    try {
      response = await fetch(base() + "/conversations/" + encodeURIComponent(id) + "/claim", {
        method: "POST",
        headers: { "content-type": "application/json", authorization: idToken, "x-visitor-token": token },
        body: "{}",
      });
    } catch (_) {
      response = null;
    }
    sessionStorage.removeItem(VISITOR_TOKEN);
    if (!response || response.status !== 200) {
      startNewConversation();
      say("status", "Signed in: this is a new conversation.");
      return;
    }
    keepConversation(id);
    say("status", "Signed in: the conversation goes on.");
    if (askedToVerify && !send.disabled) {
      input.value = askedToVerify;
      askedToVerify = null;
      form.requestSubmit();
    }
  }

  // A conversation is one customer's: another customer starts a new one.
  // The choice is kept for the tab, so a reload reads the same conversation.
  const PICKED = "refund-chat-customer";
  const picked = sessionStorage.getItem(PICKED);
  if (picked && [...customer.options].some((option) => option.value === picked)) customer.value = picked;
  customer.addEventListener("change", () => {
    sessionStorage.setItem(PICKED, customer.value);
    startNewConversation();
  });

  // A reloaded page: the conversation of this tab read back in one read,
  // its polling picked up from the flags the function keeps.
  async function restore() {
    const id = conversationId();
    if (!id) return;
    let response, answer;
    try {
      response = await readRequest(id, null);
      answer = await response.json();
    } catch (_) {
      return;
    }
    if (id !== conversationId() || response.status !== 200 || log.children.length > 0) return;
    const KINDS = { customer: ["customer", null], agent: ["assistant", null], person: ["person", "From our support team"] };
    for (const message of answer.messages || []) {
      const [kind, tag] = KINDS[message.from] || ["status", null];
      say(kind, message.text, tag);
      sayLabel(message.label);
      if (message.from === "person") poll.shown.add(message.seq);
      poll.after = poll.after === null ? message.seq : Math.max(poll.after, message.seq);
    }
    if (answer.handed_off === true) {
      withPerson.hidden = !answer.person_expected;
      showExpected(answer);
      // A customer's message no words answered: sent to the team.
      for (const item of log.querySelectorAll("li.customer")) {
        const next = item.nextElementSibling;
        if (!next || !next.classList.contains("assistant")) markSent(item);
      }
      pollFor("person");
    }
    if (answer.awaiting_approval === true) pollFor("approval");
  }
  restore();
  listen();
})();
