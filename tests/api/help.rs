//! Answers from the shop's own help centre (contract 17), end to end: the
//! search's passages reach the model with their article's id, version and
//! link; the exchange keeps which articles it was shown, `conversation ID`
//! prints them, and the summary line names them (never a passage).

use lambda_http::http::StatusCode;

use crate::approvals::{admin, stdout};
use crate::observability::logged_turn;
use refund_chat_testkit::*;

#[tokio::test]
async fn a_search_shows_the_model_the_shops_passages_and_every_record_names_the_articles() {
    let h = TestApp::new(
        vec![
            tool_calls(&[(
                "s1",
                "search_help_centre",
                r#"{"query":"how long to return a damaged item"}"#,
            )]),
            text("Within 30 days: https://shop.example/help/damaged-items"),
        ],
        receipt(),
    )
    .await;

    let (answer, logs) = logged_turn(&h, "How long do I have to return a damaged item?").await;

    assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
    let requests = h.model_requests().await;
    let names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"search_help_centre"), "{names:?}");
    let told = tool_content(&tool_messages(&requests[1])[0]);
    let results = told["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() <= 3, "{told}");
    assert!(
        results[0]["passage"].as_str().unwrap().contains("within 30 days"),
        "{told}"
    );
    let damaged = results
        .iter()
        .find(|r| r["article_id"] == "damaged-items")
        .expect("the damaged-items article");
    assert_eq!(damaged["url"], "https://shop.example/help/damaged-items");
    assert_eq!(damaged["version"], "1");
    assert!(h.payments_requests().await.is_empty(), "a search moves no money");

    let text = logs.text();
    let summary = text.lines().find(|line| line.contains(r#""event":"summary""#)).unwrap();
    let articles: serde_json::Value = serde_json::from_str::<serde_json::Value>(summary).unwrap()["articles"].clone();
    assert!(
        articles.as_str().unwrap().split(' ').any(|a| a == "damaged-items@1"),
        "{summary}"
    );
    assert!(!text.contains("Keep it, or recycle it"), "a passage reached a log line");

    let conversation = answer.conversation_id().to_owned();
    let printed = stdout(
        &admin(
            &h.table,
            &moto().endpoint,
            &h.payments.uri(),
            &["conversation", &conversation],
        )
        .await,
    );
    let cited = printed
        .lines()
        .find(|l| l.contains("articles cited:"))
        .unwrap_or_default();
    assert!(cited.contains("damaged-items@1"), "{printed}");
}

#[tokio::test]
async fn a_question_the_articles_do_not_answer_gets_no_results() {
    let h = TestApp::new(
        vec![
            tool_calls(&[("s1", "search_help_centre", r#"{"query":"do you sell gift cards"}"#)]),
            text("I am not sure; shall I pass you to a person?"),
        ],
        receipt(),
    )
    .await;

    h.chat("Do you sell gift cards?").await;

    let told = tool_content(&tool_messages(&h.model_requests().await[1])[0]);
    assert_eq!(told, serde_json::json!({"results": []}));
}
