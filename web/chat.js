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
(() => {
  "use strict";
  const endpoint = document.querySelector('meta[name="refund-chat-endpoint"]').content;
  const $ = (id) => document.getElementById(id);
  const log = $("log"), form = $("composer"), input = $("message"), send = $("send");
  const customer = $("customer"), problem = $("problem"), problemText = $("problem-text"), retry = $("retry");
  const fresh = $("new-conversation"), withPerson = $("with-a-person");
  const CONVERSATION = "refund-chat-conversation";
  const AUTOMATIC_RESENDS = 3; // for 409 and 503, each after its Retry-After

  let current = null; // the message being answered: { key, text, body }

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
    }
  }

  function startNewConversation() {
    sessionStorage.removeItem(CONVERSATION);
    current = null;
    log.replaceChildren();
    problem.hidden = true;
    withPerson.hidden = true;
  }

  // A person has the conversation: the input stays open (what the customer
  // writes reaches them), and a new conversation is the agent's again.
  function showWithAPerson() {
    withPerson.hidden = false;
  }

  // A reply is text, never HTML: its http(s) links become links made here,
  // with the text as the link's text, and everything else stays text.
  const LINK = /https?:\/\/[^\s<>"']+/g;
  function withLinks(text) {
    const parts = [];
    let from = 0;
    for (const match of text.matchAll(LINK)) {
      // A sentence's closing punctuation is not part of the link.
      const url = match[0].replace(/[.,;:!?)]+$/, "");
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

  async function deliver(message, resendsLeft = AUTOMATIC_RESENDS) {
    problem.hidden = true;
    setBusy(true);
    let response;
    try {
      response = await fetch(endpoint, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": message.key },
        body: message.body,
      });
    } catch (_) {
      setBusy(false);
      showProblem(
        "The connection dropped before the answer arrived. Your message may have reached us: " +
          "try again, and nothing will be refunded twice.",
        true,
      );
      return;
    }
    let answer = {};
    try {
      answer = await response.json();
    } catch (_) {
      // Every answer of the function is JSON; a proxy's error page is not.
    }
    const wait = Math.max(1, Number(response.headers.get("retry-after")) || 1);
    keepConversation(answer.conversation_id);
    if (answer.handed_off === true) showWithAPerson();
    switch (response.status) {
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
        if (response.headers.get("idempotent-replayed") === "true") {
          say("status", "Recovered the answer to your message; nothing was done twice.");
        }
        say(
          /review/i.test(answer.reply || "") ? "assistant pending-approval" : "assistant",
          answer.reply || "(no text)",
          /review/i.test(answer.reply || "") ? "Waiting for our team" : null,
        );
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
        setBusy(false);
        current = null;
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
    const body = { user_id: customer.value, message: text };
    const conversation = conversationId();
    if (conversation) body.conversation_id = conversation;
    current = { key: crypto.randomUUID(), text, body: JSON.stringify(body) };
    say("customer", text);
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

  // A conversation is one customer's: another customer starts a new one.
  customer.addEventListener("change", startNewConversation);
})();
