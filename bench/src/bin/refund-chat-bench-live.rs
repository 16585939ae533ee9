//! `make bench-live` (contract 31): how long a person's words take to reach
//! the customer's open page, and a customer's the desk's open chat, under
//! the local stack (the function and the desk in process on moto's tables,
//! the Event API's stand-in deciding every connect and subscribe with the
//! project's own code, the staff token a real sign-in to moto's pool).
//!
//! Each try is a click to a screen: from the moment the reply (or the
//! message) is sent to the moment the other side's read shows it, the
//! other side doing what its page does: on a poke, read again through its
//! route. The fallback poll is not running: only a poke can bring the
//! words. 50 tries each way; p50, p95 and the maximum are printed.

use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use refund_chat_testkit::*;

const TRIES: usize = 50;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A page's socket on `channel`, as `web/live.js` opens it.
async fn listen(base: &str, token: &str, channel: &str) -> Socket {
    let auth = json!({"Authorization": token, "host": base.trim_start_matches("http://")});
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(auth.to_string());
    let mut request = format!("{}/event/realtime", base.replace("http://", "ws://"))
        .into_client_request()
        .expect("a request");
    request.headers_mut().insert(
        "sec-websocket-protocol",
        format!("aws-appsync-event-ws, header-{header}")
            .parse()
            .expect("a header"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("the socket");
    for frame in [
        json!({"type": "connection_init"}),
        json!({"type": "subscribe", "id": "s", "channel": channel, "authorization": auth}),
    ] {
        socket.send(Message::text(frame.to_string())).await.expect("sent");
    }
    loop {
        let frame = next(&mut socket).await;
        match frame["type"].as_str() {
            Some("subscribe_success") => return socket,
            Some("connection_ack") => {}
            _ => panic!("{channel}: {frame}"),
        }
    }
}

/// The next frame that is not a keep-alive.
async fn next(socket: &mut Socket) -> Value {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => {
                let frame: Value = serde_json::from_str(&text).unwrap_or_default();
                if frame["type"] != "ka" {
                    return frame;
                }
            }
            Some(Ok(_)) => {}
            _ => panic!("the socket closed"),
        }
    }
}

/// Reads on every poke until `shows` is true of what was read.
async fn read_on_pokes<F, Fut>(socket: &mut Socket, read: F, shows: impl Fn(&Value) -> bool)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    loop {
        let frame = next(socket).await;
        assert_eq!(frame["type"], "data", "{frame}");
        if shows(&read().await) {
            return;
        }
    }
}

fn summary(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| {
        times[((times.len() as f64 * q).ceil() as usize)
            .saturating_sub(1)
            .min(times.len() - 1)]
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<34} p50 {:>7.1} ms   p95 {:>7.1} ms   max {:>7.1} ms   ({} tries)",
        ms(at(0.50)),
        ms(at(0.95)),
        ms(times[times.len() - 1]),
        times.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let base = format!("http://{}", listener.local_addr().expect("an address"));
    let events_url = format!("{base}/event");
    let url = events_url.clone();
    let shop = TestApp::builder()
        .model_responder(refunding_model)
        .configure(move |config| config.live.events_url = Some(url))
        .build()
        .await;
    let pool = local_staff_pool();
    let (issuer, client) = (
        pool["issuer"].as_str().expect("an issuer").to_owned(),
        pool["client_id"].as_str().expect("a client").to_owned(),
    );
    let table = shop.table.clone();
    let config = refund_chat::config::ListenConfig::from_lookup(move |name| match name {
        "LEDGER_TABLE" => Some(table.clone()),
        "CONVERSATION_TABLE" => Some(conversation_table(&table)),
        "STAFF_POOL_ISSUER" => Some(issuer.clone()),
        "STAFF_POOL_CLIENT_ID" => Some(client.clone()),
        _ => None,
    })
    .expect("the authorizer's settings");
    let http = refund_chat::http_client::money_path_client().expect("a client");
    let listening = refund_chat::startup::listening(&config, &shop.aws, http, Some(&moto().endpoint));
    let api = refund_chat_local::event_api::EventApi::new(refund_chat_local::event_api::deciding(
        std::sync::Arc::new(listening),
        true,
    ));
    tokio::spawn(refund_chat_local::serve(
        listener,
        refund_chat_local::event_api::router(api),
    ));
    let desk = StaffDesk::new(
        &shop.aws,
        desk_config(&shop.table, "http://127.0.0.1:9", &[("LIVE_EVENTS_URL", &events_url)]),
    );

    let conversation = shop
        .say(None, "I want to talk to a person")
        .await
        .conversation_id()
        .to_owned();
    let own = refund_chat::push::conversation_channel(&conversation).expect("a channel");
    let customer = format!("{}{USER}", refund_chat_local::event_api::BODY_USER_PREFIX);
    let staff_token = staff_tokens(&pool, "sam")["id"]
        .as_str()
        .expect("an ID token")
        .to_owned();
    let mut page = listen(&base, &customer, &own).await;
    let mut open_chat = listen(&base, &staff_token, "/desk/queue").await;

    let mut to_page = Vec::with_capacity(TRIES);
    for n in 0..TRIES {
        let words = format!("reply {n}");
        let (path, key) = (
            format!("/support/staff/conversations/{conversation}/reply"),
            format!("bench-reply-{n}"),
        );
        let clicked = Instant::now();
        let reply = desk.post(&path, json!({"text": words}), &key, SAM);
        let seen = read_on_pokes(
            &mut page,
            || async { shop.read(&conversation, "").await.body },
            |read| {
                read["messages"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|m| m["from"] == "person" && m["text"] == words.as_str()))
            },
        );
        let (replied, ()) = tokio::join!(reply, seen);
        assert_eq!(replied.status.as_u16(), 200, "{}", replied.raw);
        to_page.push(clicked.elapsed());
    }
    // The desk heard every reply too: drain what it queued.
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(50), open_chat.next()).await {}

    let mut to_desk = Vec::with_capacity(TRIES);
    for n in 0..TRIES {
        let words = format!("customer message {n}");
        let sent = Instant::now();
        let message = shop.say(Some(&conversation), &words);
        let seen = read_on_pokes(
            &mut open_chat,
            || async {
                desk.get(&format!("/support/staff/conversations/{conversation}"), SAM)
                    .await
                    .body
            },
            |read| read.to_string().contains(&words),
        );
        let (said, ()) = tokio::join!(message, seen);
        assert_eq!(said.status.as_u16(), 200, "{}", said.raw);
        to_desk.push(sent.elapsed());
    }
    println!("click to screen under the local stack, the fallback poll off:");
    summary("a person's reply to the page", to_page);
    summary("a customer's message to the desk", to_desk);
    println!(
        "polling alone, as measured before live pokes: a reply reached the page 16.7 s after the click \
         (its poll at 10 s with back-off), a message the desk's open chat on its 10 s timer"
    );
}
