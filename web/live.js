// Live pokes (contract 31): one channel of AppSync Events' WebSocket
// (protocol aws-appsync-event-ws), shared by the chat page and the desk.
//
// A poke says only that something changed ({conversation_id, seq, kind});
// the page reads what changed through the routes it already has. So this
// file decides nothing: it tells its page "read again" on every poke, on
// every (re)connection (nothing is replayed to a socket that was away), and
// says whether the socket is up, so that the page polls slowly while it is
// and at its old pace while it is not. It reconnects with a fresh token
// before the one it used expires, and after any close, backing off.
"use strict";

window.RefundChatLive = (() => {
  // The chat page's metas say where; the desk sets the same from its own settings (configure).
  const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content || "";
  let URL_ = meta("refund-chat-live-url");
  let HOST = meta("refund-chat-live-host");
  const settings = { POLL_SECONDS: Number(meta("refund-chat-live-poll-seconds")) || 60 };
  function configure({ url, host, pollSeconds }) {
    URL_ = url || "";
    HOST = host || "";
    settings.POLL_SECONDS = Number(pollSeconds) || 60;
  }

  function base64url(text) {
    return btoa(unescape(encodeURIComponent(text))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  // When a JWT stops being good (ms), or null for a token that is not one.
  function expiresAt(token) {
    try {
      const payload = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
      return typeof payload.exp === "number" ? payload.exp * 1000 : null;
    } catch (_) {
      return null;
    }
  }

  // Opens `channel` with the token `token()` gives at each (re)connection;
  // `onRead()` on every poke and every (re)connection, `onState(up)` when
  // the socket comes up or goes down. Returns { close() }.
  function open({ channel, token, onRead, onState }) {
    if (!URL_ || !channel) return { close() {}, up: () => false };
    document.body.dataset.live = "down";
    let socket = null;
    let closed = false;
    let up = false;
    let retry = 1;
    let timers = [];
    const later = (fn, ms) => timers.push(setTimeout(fn, ms));
    const clear = () => {
      timers.forEach(clearTimeout);
      timers = [];
    };
    const setUp = (value) => {
      if (up !== value) {
        up = value;
        document.body.dataset.live = value ? "up" : "down";
        onState(value);
      }
    };
    let keepAlive = null;
    async function connect() {
      clear();
      if (closed) return;
      let authorization;
      try {
        authorization = await token();
      } catch (_) {
        authorization = null;
      }
      if (!authorization) return later(connect, 5000);
      const auth = { Authorization: authorization, host: HOST };
      try {
        socket = new WebSocket(URL_, ["aws-appsync-event-ws", "header-" + base64url(JSON.stringify(auth))]);
      } catch (_) {
        return reconnect();
      }
      const mine = socket;
      let timeoutMs = 300000;
      const alive = () => {
        clearTimeout(keepAlive);
        keepAlive = setTimeout(() => mine.close(), timeoutMs);
      };
      mine.onopen = () => mine.send(JSON.stringify({ type: "connection_init" }));
      mine.onmessage = (message) => {
        let frame;
        try {
          frame = JSON.parse(message.data);
        } catch (_) {
          return;
        }
        if (frame.type === "connection_ack") {
          timeoutMs = frame.connectionTimeoutMs || timeoutMs;
          alive();
          mine.send(JSON.stringify({ type: "subscribe", id: crypto.randomUUID(), channel, authorization: auth }));
        } else if (frame.type === "subscribe_success") {
          retry = 1;
          setUp(true);
          onRead();
          // A fresh token a minute before this one expires.
          const expires = expiresAt(authorization);
          if (expires) later(() => mine.close(), Math.max(expires - Date.now() - 60000, 5000));
        } else if (frame.type === "ka") {
          alive();
        } else if (frame.type === "data") {
          alive();
          onRead();
        } else if (["subscribe_error", "connection_error", "error"].includes(frame.type)) {
          mine.close();
        }
      };
      mine.onclose = () => {
        if (socket === mine) reconnect();
      };
    }
    function reconnect() {
      clearTimeout(keepAlive);
      setUp(false);
      if (closed) return;
      later(connect, retry * 1000);
      retry = Math.min(retry * 2, 30);
    }
    // A tab shown again reads and, if the socket died meanwhile, reconnects.
    const visible = () => {
      if (document.hidden || closed) return;
      if (!up) {
        retry = 1;
        connect();
      }
    };
    document.addEventListener("visibilitychange", visible);
    connect();
    return {
      close() {
        closed = true;
        clear();
        clearTimeout(keepAlive);
        document.removeEventListener("visibilitychange", visible);
        setUp(false);
        if (socket) socket.close();
      },
      up: () => up,
    };
  }

  // A conversation's channel: its id with `_` written `-`.
  const conversationChannel = (id) => "/conversations/" + String(id).replace(/_/g, "-");

  return {
    open,
    configure,
    conversationChannel,
    expiresAt,
    get enabled() {
      return Boolean(URL_);
    },
    get POLL_SECONDS() {
      return settings.POLL_SECONDS;
    },
  };
})();
