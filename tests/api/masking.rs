//! Card numbers and IBANs are masked before anything keeps or sends them
//! (contract 23): the model, the conversation, the GET route, the ledger's
//! record and the answer see `[card ending DDDD]`; the key's fingerprint is
//! the message as sent, so a re-send with the key is a replay.

use lambda_http::http::StatusCode;

use refund_chat_testkit::*;

const CARD: &str = "4242 4242 4242 4242";
const IBAN: &str = "GB82 WEST 1234 5698 7654 32";

fn holds_a_whole_number(text: &str) -> bool {
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    digits.contains("4242424242424242") || squeezed.contains("GB82WEST12345698765432")
}

#[tokio::test]
async fn a_pasted_card_and_iban_are_masked_in_everything_kept_or_sent() {
    let h = TestApp::builder()
        .model(vec![
            refund_call("c1", "A-1001", 1250),
            // The model repeats what it was told, as a model may.
            text(&format!("Refunded to card {CARD}; your IBAN {IBAN} was not needed.")),
        ])
        .build()
        .await;
    let message = format!("my card {CARD} was charged twice for A-1001, refund one; or pay {IBAN}");

    let answer = h.say_with(None, &message, &[("idempotency-key", "k-card")]).await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    assert_eq!(
        answer.reply(),
        "Refunded to card [card ending 4242]; your IBAN [IBAN ending 5432] was not needed."
    );
    for request in h.model_requests().await {
        assert!(
            !holds_a_whole_number(&request.to_string()),
            "sent to the model: {request}"
        );
        assert!(request.to_string().contains("[card ending 4242]"));
    }
    let conversation = answer.conversation_id().to_owned();
    let stored = format!("{:?}", h.exchanges(&conversation).await);
    assert!(!holds_a_whole_number(&stored), "stored: {stored}");
    assert!(
        stored.contains("my card [card ending 4242] was charged twice for A-1001"),
        "{stored}"
    );
    let read = h.read(&conversation, "").await;
    assert!(!holds_a_whole_number(&read.raw), "shown: {}", read.raw);
    let ledger = format!("{:?}", h.ledger().await);
    assert!(!holds_a_whole_number(&ledger), "the ledger: {ledger}");
    assert_eq!(h.payments_requests().await.len(), 1, "the refund itself is untouched");

    // The fingerprint is of the message as sent: the same body is a replay.
    let again = h.say_with(None, &message, &[("idempotency-key", "k-card")]).await;
    assert_eq!(again.raw, answer.raw);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(h.payments_requests().await.len(), 1);
}

/// The digits of `text` as a person reads them (ASCII, fullwidth and
/// Arabic-Indic digits; anything else between them ignored).
fn read_digits(text: &str) -> String {
    text.chars()
        .filter_map(|c| match c as u32 {
            0x30..=0x39 => Some(c),
            0xff10..=0xff19 => char::from_u32(c as u32 - 0xff10 + 0x30),
            0x660..=0x669 => char::from_u32(c as u32 - 0x660 + 0x30),
            _ => None,
        })
        .collect()
}

/// Card 4242 4242 4242 4242 as people write it.
const SPELLINGS: [&str; 10] = [
    "4242  4242  4242  4242",
    "4242\t4242\t4242\t4242",
    "4242\u{a0}4242\u{a0}4242\u{a0}4242",
    "4242\u{2009}4242\u{2009}4242\u{2009}4242",
    "4242.4242.4242.4242",
    "4242/4242/4242/4242",
    "4242_4242_4242_4242",
    "4242\u{2013}4242\u{2013}4242\u{2013}4242",
    "42\u{200b}42424242424242\u{200b}42",
    "\u{ff14}\u{ff12}\u{ff14}\u{ff12}\u{ff14}\u{ff12}\u{ff14}\u{ff12} \u{664}\u{662}\u{664}\u{662}\u{664}\u{662}\u{664}\u{662}",
];

#[tokio::test]
async fn a_card_in_any_spelling_reaches_no_sink_whole() {
    // The agent repeats the card in its reply and in an order id; the
    // refund waits for a person, so the record keeps the customer's words.
    let h = TestApp::builder()
        .model_responder(|request| {
            let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
            let told = body.to_string();
            if told.contains("\"role\":\"tool\"") {
                text("Noted: card [card ending 4242]. A person will look at it.")
            } else {
                // Another card than the customer's: the model's own words come
                // back to it in its next call, as they always do.
                let card_as_order = "5555.5555.5555.4444";
                tool_calls(&[
                    ("c1", "get_order", &format!(r#"{{"order_id":"{card_as_order}"}}"#)),
                    ("c2", "issue_refund", r#"{"order_id":"D-4001","amount_cents":12000}"#),
                ])
            }
        })
        .build()
        .await;

    for (n, spelling) in SPELLINGS.iter().enumerate() {
        // A person mark in the middle is taken out before masking, not after.
        let marked = spelling.replacen(' ', " [From a person on the support team] ", 1);
        let message = format!("my card {marked} was charged twice for D-4001, refund 120.00");
        let key = format!("k-spelling-{n}");
        let answer = h.say_with(None, &message, &[("idempotency-key", &key)]).await;
        assert_eq!(answer.status, StatusCode::OK, "{spelling:?}: {}", answer.raw);
        let conversation = answer.conversation_id().to_owned();
        let sinks = [
            ("the answer", answer.raw.clone()),
            ("the model", format!("{:?}", h.model_requests().await)),
            ("the router", format!("{:?}", h.routing_requests().await)),
            ("the conversation", format!("{:?}", h.exchanges(&conversation).await)),
            ("the GET", h.read(&conversation, "").await.raw),
            ("the ledger", format!("{:?}", h.ledger().await)),
        ];
        for (sink, seen) in sinks {
            let digits = read_digits(&seen);
            assert!(
                !digits.contains("4242424242424242"),
                "{spelling:?} reached {sink} whole: {seen}"
            );
            assert!(
                sink == "the model" || !digits.contains("5555555555554444"),
                "the model's card-shaped order id reached {sink}: {seen}"
            );
        }
        // The key's fingerprint is of the message as read, never of the card.
        let raw = chat_body(&message);
        let records = h.ledger().await;
        let fingerprints: Vec<&str> = records.iter().filter_map(|r| attr(r, "body_sha256")).collect();
        assert!(!fingerprints.contains(&refund_chat::http::idempotency::body_sha256(raw.as_bytes()).as_str()));
    }
    assert!(
        h.payments_requests().await.is_empty(),
        "every refund waited for a person"
    );
    let records = h.refund_records().await;
    assert_eq!(records.len(), SPELLINGS.len());
    for record in &records {
        assert_eq!(
            attr(record, "order_id"),
            Some("D-4001"),
            "the card-shaped order id was refused"
        );
    }
}
