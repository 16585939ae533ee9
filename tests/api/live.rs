//! Live pokes (contract 31) through the customers' function and the desk,
//! on moto's tables, with wiremock as the Event API's HTTP endpoint: each
//! write that someone waits to see is announced after it committed, to the
//! channels the contract names, signed with SigV4 for `appsync`, as a poke
//! of three fields; and an Event API that is down, slow, failing or
//! answering a `failed` list changes no answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lambda_http::http::StatusCode;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use refund_chat::push::{Kind, Poke, Publisher};
use refund_chat_testkit::*;

/// What the Event API received: each publish's channel, its one event, and
/// whether the message a `person_reply` announces was already stored.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<Published>>>);

/// A publish's channel, its event, and (for a person's reply) whether the reply was stored.
type Published = (String, Value, Option<bool>);

impl Heard {
    fn all(&self) -> Vec<Published> {
        self.0.lock().unwrap().clone()
    }

    /// Publishes whose event is of `kind`: their channels.
    fn channels_of(&self, kind: &str) -> Vec<String> {
        self.all()
            .into_iter()
            .filter(|(_, event, _)| event["kind"] == kind)
            .map(|(channel, _, _)| channel)
            .collect()
    }
}

/// The Event API: it checks the signature's shape, keeps what it heard
/// and, for a person's reply, reads the conversation the way the page
/// does (on a thread of its own: a responder cannot wait) to see whether
/// the reply was stored before it was announced.
struct EventApi {
    heard: Heard,
    shop: Arc<TestApp>,
    answer: ResponseTemplate,
}

impl Respond for EventApi {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let authorization = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !authorization.starts_with("AWS4-HMAC-SHA256 Credential=")
            || !authorization.contains("/appsync/aws4_request")
            || request.headers.get("x-amz-date").is_none()
        {
            return ResponseTemplate::new(401)
                .set_body_json(json!({"errors": [{"errorType": "UnauthorizedException"}]}));
        }
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let channel = body["channel"].as_str().unwrap_or_default().to_owned();
        let events = body["events"].as_array().cloned().unwrap_or_default();
        assert_eq!(events.len(), 1, "one poke a publish: {body}");
        let event: Value = serde_json::from_str(events[0].as_str().unwrap_or_default()).unwrap_or_default();
        let stored = (event["kind"] == "person_reply").then(|| {
            let (shop, id, seq) = (
                Arc::clone(&self.shop),
                event["conversation_id"].as_str().unwrap_or_default().to_owned(),
                event["seq"].as_u64().unwrap_or_default(),
            );
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let read = runtime.block_on(shop.read(&id, ""));
                read.body["messages"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|m| m["from"] == "person" && m["seq"] == seq))
            })
            .join()
            .unwrap_or(false)
        });
        self.heard.0.lock().unwrap().push((channel, event, stored));
        self.answer.clone()
    }
}

fn delivered() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "successful": [{"identifier": "0b1c", "index": 0}], "failed": []
    }))
}

/// The shop with its Event API at `events_url` (none: live is off).
async fn shop(events_url: Option<String>, timeout: Duration) -> TestApp {
    TestApp::builder()
        .model_responder(refunding_model)
        .configure(move |config| {
            config.live.events_url = events_url;
            config.live.publish_timeout = timeout;
        })
        .build()
        .await
}

fn desk_of(shop: &TestApp, events_url: Option<&str>) -> StaffDesk {
    let mut more = vec![("LIVE_PUBLISH_TIMEOUT_MS", "200")];
    if let Some(url) = events_url {
        more.push(("LIVE_EVENTS_URL", url));
    }
    StaffDesk::new(&shop.aws, desk_config(&shop.table, "http://127.0.0.1:9", &more))
}

fn path_of(conversation: &str, verb: &str) -> String {
    format!("/support/staff/conversations/{conversation}/{verb}")
}

#[tokio::test]
async fn each_write_is_poked_after_it_committed_to_the_channels_the_contract_names() {
    let server = MockServer::start().await;
    let heard = Heard::default();
    let events_url = format!("{}/event", server.uri());
    let shop = Arc::new(shop(Some(events_url.clone()), Duration::from_secs(5)).await);
    Mock::given(method("POST"))
        .and(path("/event"))
        .respond_with(EventApi {
            heard: heard.clone(),
            shop: Arc::clone(&shop),
            answer: delivered(),
        })
        .mount(&server)
        .await;
    let desk = desk_of(&shop, Some(&events_url));

    let asked = shop.say(None, "I want to talk to a person").await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.raw);
    let conversation = asked.conversation_id().to_owned();
    let own = format!("/conversations/{}", conversation.replace('_', "-"));
    assert_eq!(heard.channels_of("handoff"), ["/desk/queue"]);

    let again = shop
        .say(Some(&conversation), "hello? my card is 4242 4242 4242 4242")
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.raw);
    assert_eq!(heard.channels_of("customer_wrote"), ["/desk/queue"]);

    let claimed = desk
        .post(&path_of(&conversation, "claim"), json!({}), "claim", SAM)
        .await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.raw);
    let noted = desk
        .post(
            &path_of(&conversation, "notes"),
            json!({"text": "refund later"}),
            "note",
            SAM,
        )
        .await;
    assert_eq!(noted.status, StatusCode::OK, "{}", noted.raw);
    let replied = desk
        .post(
            &path_of(&conversation, "reply"),
            json!({"text": "Hello, I am here."}),
            "reply",
            SAM,
        )
        .await;
    assert_eq!(replied.status, StatusCode::OK, "{}", replied.raw);
    crate::team_desk::close(&desk, &conversation).await;

    // What the customer's page shows goes to both; the team's alone to the desk.
    assert_eq!(heard.channels_of("held"), ["/desk/queue"]);
    assert_eq!(heard.channels_of("internal_note"), ["/desk/queue"]);
    assert_eq!(
        heard.channels_of("person_reply"),
        [own.clone(), "/desk/queue".to_owned()]
    );
    assert_eq!(heard.channels_of("closed"), [own, "/desk/queue".to_owned()]);

    let person_seq = shop.read(&conversation, "").await.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["from"] == "person")
        .map(|m| m["seq"].clone())
        .unwrap();
    for (channel, event, stored) in heard.all() {
        // A poke: three fields, no words, no order, no amount.
        let fields: Vec<&String> = event.as_object().unwrap().keys().collect();
        assert_eq!(fields, ["conversation_id", "kind", "seq"], "{channel}: {event}");
        assert_eq!(event["conversation_id"], conversation.as_str());
        if event["kind"] == "person_reply" {
            assert_eq!(event["seq"], person_seq, "the seq the page reads the reply as");
            assert_eq!(stored, Some(true), "announced before it was stored");
        } else {
            assert_eq!(event["seq"], 0, "{event}");
        }
    }
}

#[tokio::test]
async fn a_rating_and_a_refund_sent_to_a_person_reach_the_desk_alone() {
    let server = MockServer::start().await;
    let heard = Heard::default();
    let events_url = format!("{}/event", server.uri());
    let shop = Arc::new(shop(Some(events_url.clone()), Duration::from_secs(5)).await);
    Mock::given(method("POST"))
        .respond_with(EventApi {
            heard: heard.clone(),
            shop: Arc::clone(&shop),
            answer: delivered(),
        })
        .mount(&server)
        .await;
    let waiting = shop
        .say(None, "The sofa from order D-4001 arrived torn: refund D-4001 12000")
        .await;
    assert_eq!(waiting.status, StatusCode::OK, "{}", waiting.raw);
    assert_eq!(waiting.body["awaiting_approval"], true, "{}", waiting.raw);
    assert_eq!(heard.channels_of("refund_waiting"), ["/desk/queue"]);

    let asked = shop.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    crate::team_desk::close(&desk_of(&shop, Some(&events_url)), &conversation).await;
    let rated = send_as(
        &shop.app,
        rating_event(&conversation, &json!({"solved": true}), Some(USER)),
        &fresh_request_id(),
        0,
    )
    .await;
    assert_eq!(rated.status, StatusCode::OK, "{}", rated.raw);
    assert_eq!(heard.channels_of("rating"), ["/desk/queue"]);
}

/// The same conversation, and the statuses and bodies' keys of every answer.
async fn statuses_with(events_url: Option<String>) -> Vec<(u16, Vec<String>)> {
    let shop = shop(events_url.clone(), Duration::from_millis(200)).await;
    let desk = desk_of(&shop, events_url.as_deref());
    let keys = |answer: &Answer| {
        let mut keys: Vec<String> = answer
            .body
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        keys.retain(|k| k != "conversation_id" && k != "reply");
        (answer.status.as_u16(), keys)
    };
    let asked = shop.say(None, "I want to talk to a person").await;
    let conversation = asked.conversation_id().to_owned();
    let again = shop.say(Some(&conversation), "hello?").await;
    let replied = desk
        .post(&path_of(&conversation, "reply"), json!({"text": "Here."}), "reply", SAM)
        .await;
    let read = shop.read(&conversation, "").await;
    vec![keys(&asked), keys(&again), keys(&replied), keys(&read)]
}

#[tokio::test]
async fn an_event_api_down_slow_failing_or_refusing_changes_no_answer() {
    let without = statuses_with(None).await;
    assert!(without.iter().all(|(status, _)| *status == 200), "{without:?}");
    let faults = [
        ("down", None),
        ("slow", Some(delivered().set_delay(Duration::from_secs(2)))),
        ("500", Some(ResponseTemplate::new(500))),
        (
            "failed",
            Some(ResponseTemplate::new(200).set_body_json(json!({
                "successful": [], "failed": [{"identifier": "0b1c", "index": 0, "code": 400, "message": "too big"}]
            }))),
        ),
    ];
    for (fault, answer) in faults {
        let server = MockServer::start().await;
        let url = match answer {
            Some(answer) => {
                Mock::given(method("POST")).respond_with(answer).mount(&server).await;
                format!("{}/event", server.uri())
            }
            // Nothing listens there.
            None => "http://127.0.0.1:9/event".to_owned(),
        };
        assert_eq!(statuses_with(Some(url)).await, without, "{fault}");
        if fault != "down" {
            assert!(
                !server.received_requests().await.unwrap_or_default().is_empty(),
                "{fault}: tried"
            );
        }
    }
}

#[tokio::test]
async fn each_failed_publish_is_counted_once_and_none_is_retried() {
    let aws = aws_at(&moto().endpoint).await;
    let http = refund_chat::http_client::money_path_client().unwrap();
    let reply = [Poke::new("c_0a1b", 2, Kind::PersonReply)];
    let failing = [
        ResponseTemplate::new(500),
        ResponseTemplate::new(200).set_body_json(json!({"successful": [], "failed": [{"index": 0}]})),
        delivered().set_delay(Duration::from_secs(2)),
        ResponseTemplate::new(200).set_body_string("not json"),
    ];
    for answer in failing {
        let server = MockServer::start().await;
        Mock::given(method("POST")).respond_with(answer).mount(&server).await;
        let publisher = Publisher::new(
            Some(&format!("{}/event", server.uri())),
            &aws,
            http.clone(),
            Duration::from_millis(200),
        );
        // Two channels, two publishes, each failed once: nothing retried.
        assert_eq!(publisher.publish(&reply).await, 2);
        assert_eq!(server.received_requests().await.unwrap().len(), 2);
    }
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(delivered())
        .mount(&server)
        .await;
    let working = Publisher::new(
        Some(&format!("{}/event", server.uri())),
        &aws,
        http.clone(),
        Duration::from_secs(2),
    );
    assert_eq!(working.publish(&reply).await, 0);
    // Unset: nothing is published, nothing is sent.
    assert!(!Publisher::new(None, &aws, http, Duration::from_secs(1)).is_on());
}

/// The Event API stand-in of `make run`, deciding with the project's own
/// code over the shop's tables (visitors served, picked customers named as
/// the body names them).
async fn stand_in(shop: &TestApp, listener: tokio::net::TcpListener) -> Arc<refund_chat_local::event_api::EventApi> {
    let table = shop.table.clone();
    let config = refund_chat::config::ListenConfig::from_lookup(move |name| match name {
        "LEDGER_TABLE" => Some(table.clone()),
        "CONVERSATION_TABLE" => Some(conversation_table(&table)),
        "VISITORS" => Some("on".into()),
        _ => None,
    })
    .unwrap();
    let http = refund_chat::http_client::money_path_client().unwrap();
    let listening = refund_chat::startup::listening(&config, &shop.aws, http, None);
    let api =
        refund_chat_local::event_api::EventApi::new(refund_chat_local::event_api::deciding(Arc::new(listening), true));
    tokio::spawn(refund_chat_local::serve(
        listener,
        refund_chat_local::event_api::router(Arc::clone(&api)),
    ));
    api
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A page's socket: connected with `token` in the header subprotocol, acked.
async fn connect(base: &str, token: &str) -> Socket {
    use base64::Engine;
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"Authorization": token, "host": "127.0.0.1"}).to_string());
    let mut request = format!("{}/event/realtime", base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "sec-websocket-protocol",
        format!("aws-appsync-event-ws, header-{header}").parse().unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    socket
        .send(tokio_tungstenite::tungstenite::Message::text(
            json!({"type": "connection_init"}).to_string(),
        ))
        .await
        .unwrap();
    let ack = next_frame(&mut socket).await;
    assert_eq!(ack["type"], "connection_ack", "{ack}");
    socket
}

/// The next frame that is not a keep-alive, within 5 s; `Null` once closed.
async fn next_frame(socket: &mut Socket) -> Value {
    use futures::StreamExt;
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(5), socket.next())
            .await
            .expect("a frame within 5 s");
        match frame {
            Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text))) => {
                let frame: Value = serde_json::from_str(&text).unwrap();
                if frame["type"] != "ka" {
                    return frame;
                }
            }
            Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_))) | None | Some(Err(_)) => return Value::Null,
            Some(Ok(_)) => {}
        }
    }
}

async fn subscribe(socket: &mut Socket, id: &str, channel: &str, token: &str) -> Value {
    use futures::SinkExt;
    let frame = json!({"type": "subscribe", "id": id, "channel": channel,
        "authorization": {"Authorization": token, "host": "127.0.0.1"}});
    socket
        .send(tokio_tungstenite::tungstenite::Message::text(frame.to_string()))
        .await
        .unwrap();
    next_frame(socket).await
}

fn body_user(user: &str) -> String {
    format!("{}{user}", refund_chat_local::event_api::BODY_USER_PREFIX)
}

#[tokio::test]
async fn the_stand_in_lets_each_caller_hear_only_their_own_channel_and_delivers_a_reply() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let events_url = format!("{base}/event");
    let shop = shop(Some(events_url.clone()), Duration::from_secs(2)).await;
    let api = stand_in(&shop, listener).await;
    let desk = desk_of(&shop, Some(&events_url));

    // An unsigned publish is refused.
    let unsigned = reqwest::Client::new()
        .post(&events_url)
        .json(&json!({"channel": "/desk/queue", "events": ["{}"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);

    let mine = shop
        .say(None, "I want to talk to a person")
        .await
        .conversation_id()
        .to_owned();
    let theirs = send_as(
        &shop.app,
        post_event_as(
            "u-2002",
            &json!({"user_id": "u-2002", "message": "I want to talk to a person"}).to_string(),
            &[],
        ),
        &fresh_request_id(),
        0,
    )
    .await
    .conversation_id()
    .to_owned();
    let channel = |id: &str| refund_chat::push::conversation_channel(id).unwrap();

    let me = body_user(USER);
    let mut page = connect(&base, &me).await;
    assert_eq!(
        subscribe(&mut page, "s1", &channel(&mine), &me).await["type"],
        "subscribe_success"
    );
    for (id, asked) in [
        ("s2", channel(&theirs)),
        ("s3", "/desk/queue".to_owned()),
        ("s4", "/conversations/*".to_owned()),
    ] {
        let refused = subscribe(&mut page, id, &asked, &me).await;
        assert_eq!(
            (refused["type"].as_str(), refused["id"].as_str()),
            (Some("subscribe_error"), Some(id)),
            "{asked}"
        );
    }
    // A visitor's token hears no one else's conversation.
    let visitor = refund_chat::visitor::VisitorToken::mint().unwrap();
    let mut stranger = connect(&base, visitor.expose()).await;
    assert_eq!(
        subscribe(&mut stranger, "v1", &channel(&mine), visitor.expose()).await["type"],
        "subscribe_error"
    );

    // A person's reply reaches the customer's socket as a poke.
    let replied = desk
        .post(&path_of(&mine, "reply"), json!({"text": "Hello from Sam."}), "r1", SAM)
        .await;
    assert_eq!(replied.status, StatusCode::OK, "{}", replied.raw);
    let data = next_frame(&mut page).await;
    assert_eq!(
        (data["type"].as_str(), data["id"].as_str()),
        (Some("data"), Some("s1")),
        "{data}"
    );
    let poke: Value = serde_json::from_str(data["event"].as_str().unwrap()).unwrap();
    assert_eq!(poke["kind"], "person_reply");
    assert_eq!(poke["conversation_id"], mine.as_str());

    // The switches: a refused subscribe, and every socket dropped.
    let faults = |body: Value| {
        let url = format!("{base}/_faults");
        async move { reqwest::Client::new().post(url).json(&body).send().await.unwrap() }
    };
    faults(json!({"refuse_subscribe": true})).await;
    assert_eq!(
        subscribe(&mut page, "s5", &channel(&mine), &me).await["type"],
        "subscribe_error"
    );
    faults(json!({"drop_sockets": true})).await;
    assert_eq!(next_frame(&mut page).await, Value::Null, "the socket was dropped");
    assert!(api.published() >= 2);
}
