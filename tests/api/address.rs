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
