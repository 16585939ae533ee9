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
