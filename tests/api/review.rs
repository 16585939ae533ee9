//! The nightly review's sample (contract 23): `refund-chat-admin sample`
//! lists conversations gone quiet, at random and the same again for a seed,
//! one line each with their refunds' states; a forgotten customer's are not
//! listed.

use crate::approvals::{Desk, stderr, stdout};
use refund_chat_testkit::*;

#[tokio::test]
async fn the_sample_lists_quiet_conversations_repeatably_with_their_refunds() {
    let desk = Desk::new(receipt()).await;
    let pending = desk
        .h
        .say(None, "The sofa from order D-4001 arrived torn: refund D-4001 12000")
        .await;
    let handed_off = desk.h.say(None, "I want to talk to a person").await;
    let plain = desk.h.say(None, "refund A-1001 1250").await;
    let ids = [&pending, &handed_off, &plain].map(|answer| answer.conversation_id().to_owned());

    let all = desk
        .run(&["sample", "--quiet-for", "0s", "--n", "10", "--seed", "7"])
        .await;
    let two = desk
        .run(&["sample", "--quiet-for", "0s", "--n", "2", "--seed", "7"])
        .await;
    let again = desk
        .run(&["sample", "--quiet-for", "0s", "--n", "2", "--seed", "7"])
        .await;
    let not_yet = desk.run(&["sample"]).await;

    assert_eq!(all.status.code(), Some(0), "{}", stderr(&all));
    let lines: Vec<String> = stdout(&all).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let line_of = |id: &str| {
        lines
            .iter()
            .find(|line| line.starts_with(id))
            .cloned()
            .unwrap_or_default()
    };
    assert!(line_of(&ids[0]).contains(":awaiting_approval"), "{}", line_of(&ids[0]));
    assert!(
        line_of(&ids[0]).contains("customer u-1001  exchanges 1  not handed off"),
        "{}",
        line_of(&ids[0])
    );
    assert!(
        line_of(&ids[1]).contains("  handed off") && line_of(&ids[1]).contains("refunds none"),
        "{}",
        line_of(&ids[1])
    );
    assert!(line_of(&ids[2]).contains(":executed"), "{}", line_of(&ids[2]));
    assert_eq!(stdout(&two).lines().count(), 2);
    assert_eq!(stdout(&two), stdout(&again), "the same seed, the same sample");
    assert!(
        stdout(&not_yet).contains("no conversation went quiet"),
        "none has been quiet for an hour: {}",
        stdout(&not_yet)
    );
    for line in &lines {
        assert!(!line.contains("sofa"), "no customer's words: {line}");
    }

    let forgot = desk.run(&["forget", "--customer", "u-1001", "--by", "dan"]).await;
    assert_eq!(forgot.status.code(), Some(0), "{}", stderr(&forgot));
    let after = desk.run(&["sample", "--quiet-for", "0s", "--n", "10"]).await;
    assert!(
        stdout(&after).contains("no conversation went quiet"),
        "a forgotten customer is in no sample: {}",
        stdout(&after)
    );
}
