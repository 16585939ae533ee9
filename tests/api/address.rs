//! Contract 26 through the whole function, on moto's tables and a mock
//! order system: a change of address offered only while it is served, a
//! first message that proposes and writes nothing, a later "yes" that
//! writes once with the proposal's key, and a yes again that writes nothing
//! more; the address held only by the tool, never by what the model reads
//! back or what is stored as a tool result.

use std::sync::atomic::Ordering;

use lambda_http::http::StatusCode;
use serde_json::Value;

use refund_chat_testkit::*;

fn declared(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_change_of_address_is_written_once_after_the_customers_later_yes() {
    let (h, writes) = address_shop("order_status,refund,policy_question,other,address_change").await;

    let first = h.say(None, ADDRESS_ASKED).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.raw);
    let conversation = first.conversation_id().to_owned();
    assert_eq!(writes.load(Ordering::SeqCst), 0, "the first call writes nothing");
    let requests = h.model_requests().await;
    assert!(declared(&requests[0]).contains(&"change_delivery_address".to_owned()));
    let told = tool_content(&tool_messages(requests.last().unwrap())[0]);
    assert_eq!(told["status"], "confirm", "{told}");
    assert_eq!(
        told["summary"],
        "order A-1004: deliver to the address ending in 002, FR"
    );
    // The customer confirms what code will write, in code's words, whatever the model wrote.
    assert!(
        first.reply().ends_with(
            "To confirm: the delivery address of order A-1004 becomes Ada Lovelace, 12 Rue Byron, 75002 Paris, FR. \
             Answer yes to change it; anything else changes nothing."
        ),
        "{}",
        first.reply()
    );

    let yes = h.say(Some(&conversation), "Yes, that's right").await;
    assert_eq!(yes.status, StatusCode::OK, "{}", yes.raw);
    assert_eq!(writes.load(Ordering::SeqCst), 1, "written once, after the yes");
    let told = tool_content(tool_messages(h.model_requests().await.last().unwrap()).last().unwrap());
    assert_eq!(told["status"], "changed", "{told}");

    // Yes again: the proposal was used; the same call is a new question, never a second write.
    let again = h.say(Some(&conversation), "yes").await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(writes.load(Ordering::SeqCst), 1);

    // What the conversation keeps: each outcome by order; the tool results name no address.
    let exchanges = h.exchanges(&conversation).await;
    let outcomes: Vec<Vec<(String, String)>> = exchanges.iter().map(|e| e.addresses.clone()).collect();
    assert_eq!(
        outcomes,
        [
            vec![("A-1004".to_owned(), "proposed".to_owned())],
            vec![("A-1004".to_owned(), "changed".to_owned())],
            vec![("A-1004".to_owned(), "proposed".to_owned())],
        ]
    );
    for exchange in &exchanges {
        for message in &exchange.exchange.messages {
            if let refund_chat::chat::Message::Tool { content, .. } = message {
                for private in ["Ada", "Byron", "Paris", "75002"] {
                    assert!(
                        !content.contains(private),
                        "{private} in a stored tool result: {content}"
                    );
                }
            }
        }
    }
    let head = items(&h.aws, &conversation_table(&h.table))
        .await
        .into_iter()
        .find(|item| attr(item, "pk") == Some(conversation.as_str()) && attr(item, "sk") == Some("head"))
        .unwrap();
    assert!(
        attr(&head, "address_proposal").is_some(),
        "the third turn's proposal waits"
    );
    assert!(!format!("{head:?}").contains("Byron"), "the proposal is a hash");

    // What people read: the terminal's transcript and the desk's, each with the outcome.
    let printed = crate::approvals::admin(
        &h.table,
        &moto().endpoint,
        &h.payments.uri(),
        &["conversation", &conversation],
    )
    .await;
    let printed = crate::approvals::stdout(&printed);
    assert!(printed.contains("address: order A-1004 changed"), "{printed}");
    assert!(
        printed.contains("assistant calls change_delivery_address for order A-1004 to the address ending in 002"),
        "{printed}"
    );
    let sampled = crate::approvals::admin(
        &h.table,
        &moto().endpoint,
        &h.payments.uri(),
        &["sample", "--quiet-for", "0s"],
    )
    .await;
    let sampled = crate::approvals::stdout(&sampled);
    assert!(
        sampled.contains("addresses A-1004:proposed,A-1004:changed,A-1004:proposed"),
        "{sampled}"
    );
    let desk = StaffDesk::new(&h.aws, desk_config(&h.table, &h.payments.uri(), &[]));
    let read = desk
        .get(&format!("/support/staff/conversations/{conversation}"), SAM)
        .await;
    let lines: Vec<String> = read.body["exchanges"][1]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        lines
            .iter()
            .any(|line| line == "change of the delivery address of order A-1004 to the address ending in 002: changed"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn not_served_the_tool_is_never_offered_and_the_conversation_goes_to_a_person() {
    let (h, writes) = address_shop("order_status,refund,policy_question,other").await;
    let first = h.say(None, ADDRESS_ASKED).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.body["handed_off"], true, "intent_not_served: {}", first.raw);
    assert!(h.model_requests().await.is_empty(), "no agent call at all");
    let second = h.say(Some(first.conversation_id()), "yes").await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(writes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_yes_only_in_the_same_message_as_the_address_never_writes() {
    let (h, writes) = address_shop("order_status,refund,policy_question,other,address_change").await;
    let answer = h.say(None, &format!("yes: {ADDRESS_ASKED}. Yes, I confirm.")).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(writes.load(Ordering::SeqCst), 0);
}

/// A model that calls the address tool when the customer's newest message
/// names the order or begins like a yes, and otherwise answers in words;
/// after a tool result it answers `after_tool` (a status of 500: it fails).
fn asking_model(after_tool: u16) -> impl Fn(&wiremock::Request) -> wiremock::ResponseTemplate + Send + Sync {
    move |request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let newest = messages.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
        if messages[newest..].iter().any(|m| m["role"] == "tool") {
            return match after_tool {
                200 => text("Please answer yes to confirm."),
                status => wiremock::ResponseTemplate::new(status),
            };
        }
        let said = messages[newest]["content"].as_str().unwrap_or_default().to_lowercase();
        if said.contains("a-1004") || said.starts_with("yes") || said.starts_with("correct") {
            tool_calls(&[("call_a", "change_delivery_address", ADDRESS_ARGS)])
        } else {
            text("All right.")
        }
    }
}

#[tokio::test]
async fn a_no_ends_the_proposal_and_only_the_next_message_whole_a_yes_confirms() {
    let intents = "order_status,refund,policy_question,other,address_change";
    let (h, writes) = address_shop_with(intents, asking_model(200), 200).await;
    // Proposed, then refused: a later sentence that begins like a yes writes nothing.
    let first = h.say(None, ADDRESS_ASKED).await;
    let conversation = first.conversation_id().to_owned();
    let no = h.say(Some(&conversation), "No, do not change it").await;
    assert_eq!(no.status, StatusCode::OK, "{}", no.raw);
    for begins_like_a_yes in [
        "Yes, one more question: when will my refund arrive?",
        "Correct me if I'm wrong, but I never asked for that",
        "Yes but the postcode is wrong",
    ] {
        let answer = h.say(Some(&conversation), begins_like_a_yes).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
        assert_eq!(writes.load(Ordering::SeqCst), 0, "{begins_like_a_yes}");
    }
    // Another message between the proposal and the yes: the yes is not the next message.
    let (h, writes) = address_shop_with(intents, asking_model(200), 200).await;
    let first = h.say(None, ADDRESS_ASKED).await;
    let conversation = first.conversation_id().to_owned();
    h.say(Some(&conversation), "when does it ship").await;
    let late = h.say(Some(&conversation), "yes").await;
    assert_eq!(late.status, StatusCode::OK);
    assert_eq!(
        writes.load(Ordering::SeqCst),
        0,
        "a yes after another message writes nothing"
    );
    // That yes proposed again, with code's line: the very next yes writes, once.
    assert!(
        late.reply().contains("To confirm: the delivery address"),
        "{}",
        late.reply()
    );
    h.say(Some(&conversation), "yes").await;
    assert_eq!(writes.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_proposing_turn_that_failed_keeps_no_proposal() {
    let intents = "order_status,refund,policy_question,other,address_change";
    let (h, writes) = address_shop_with(intents, asking_model(500), 200).await;
    let failed = h.say(None, ADDRESS_ASKED).await;
    assert_eq!(failed.status, StatusCode::BAD_GATEWAY, "{}", failed.raw);
    let conversation = failed.conversation_id().to_owned();
    let head = items(&h.aws, &conversation_table(&h.table))
        .await
        .into_iter()
        .find(|item| attr(item, "pk") == Some(conversation.as_str()) && attr(item, "sk") == Some("head"))
        .unwrap();
    assert!(
        attr(&head, "address_proposal").is_none(),
        "the customer never read code's line: nothing waits"
    );
    h.say(Some(&conversation), "yes").await;
    assert_eq!(
        writes.load(Ordering::SeqCst),
        0,
        "a yes to a line never read writes nothing"
    );
}

#[tokio::test]
async fn a_write_whose_outcome_is_unknown_goes_to_a_person() {
    let intents = "order_status,refund,policy_question,other,address_change";
    let (h, writes) = address_shop_with(intents, asking_model(200), 500).await;
    let first = h.say(None, ADDRESS_ASKED).await;
    let conversation = first.conversation_id().to_owned();
    let yes = h.say(Some(&conversation), "yes").await;
    assert_eq!(yes.status, StatusCode::OK, "{}", yes.raw);
    assert!(writes.load(Ordering::SeqCst) >= 1);
    assert_eq!(yes.body["handed_off"], true, "{}", yes.raw);
    let head = items(&h.aws, &conversation_table(&h.table))
        .await
        .into_iter()
        .find(|item| attr(item, "pk") == Some(conversation.as_str()) && attr(item, "sk") == Some("head"))
        .unwrap();
    assert_eq!(attr(&head, "handoff_reason"), Some("address_write_unknown"), "{head:?}");
    // Kept for the person: the customer's next messages are answered without the model.
    let before = h.model_requests().await.len();
    h.say(Some(&conversation), "yes").await;
    assert_eq!(h.model_requests().await.len(), before);
}

/// Contract 26, tightened: the clearing of a proposal never depends on the
/// turn's append. A "no" whose append failed (a DynamoDB fault) still ends
/// the proposal: the turn used it up when it took the conversation, so the
/// next "Yes, thank you" writes nothing. Before, the proposal stayed and
/// the yes wrote the refused address.
#[tokio::test]
async fn a_no_whose_append_failed_still_ends_the_proposal() {
    let failing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let conversations = proxy(&moto().endpoint, false, {
        let failing = failing.clone();
        std::sync::Arc::new(move |seen: &Seen| {
            let fail = seen.dynamodb_operation() == "TransactWriteItems" && failing.load(Ordering::SeqCst);
            Box::pin(async move {
                if fail {
                    dynamo_error("InternalServerError", "injected", serde_json::json!({}))
                } else {
                    Action::Forward
                }
            })
        })
    })
    .await;
    let intents = "order_status,refund,policy_question,other,address_change";
    let (h, writes) = address_shop_at(intents, asking_model(200), 200, Some(conversations)).await;
    let first = h.say(None, ADDRESS_ASKED).await;
    let conversation = first.conversation_id().to_owned();
    failing.store(true, Ordering::SeqCst);
    let no = h.say(Some(&conversation), "No, do not change it").await;
    assert_eq!(no.status, StatusCode::OK, "the answer is given: {}", no.raw);
    failing.store(false, Ordering::SeqCst);
    let yes = h.say(Some(&conversation), "Yes, thank you").await;
    assert_eq!(yes.status, StatusCode::OK, "{}", yes.raw);
    assert_eq!(writes.load(Ordering::SeqCst), 0, "the refused address is never written");
}

/// Contract 26, tightened: "next" is literal. A person's reply between
/// code's line and the customer's answer ends the proposal: the customer's
/// "Yes please" may answer the person. Before, it wrote the proposal.
#[tokio::test]
async fn a_persons_reply_between_the_proposal_and_the_yes_ends_the_proposal() {
    let intents = "order_status,refund,policy_question,other,address_change";
    let (h, writes) = address_shop_with(intents, asking_model(200), 200).await;
    let first = h.say(None, ADDRESS_ASKED).await;
    let conversation = first.conversation_id().to_owned();
    let lee = refund_chat::conversation::person::Person {
        name: "Lee",
        sub: Some("lee-sub"),
    };
    let replied = refund_chat::staff::decide::reply(
        &h.staff(),
        &conversation,
        lee,
        "Would you rather we keep the parcel at the depot?",
        None,
    )
    .await
    .expect("the reply is appended");
    assert!(replied.text.contains("replied"), "{}", replied.text);
    let yes = h.say(Some(&conversation), "Yes please").await;
    assert_eq!(yes.status, StatusCode::OK, "{}", yes.raw);
    assert_eq!(
        writes.load(Ordering::SeqCst),
        0,
        "the yes answered Lee, not code's line"
    );
    // Without the person, the same yes writes once: the proposal was there.
    let (h, writes) = address_shop_with(intents, asking_model(200), 200).await;
    let first = h.say(None, ADDRESS_ASKED).await;
    h.say(Some(first.conversation_id()), "Yes please").await;
    assert_eq!(writes.load(Ordering::SeqCst), 1);
}
