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

/// Contract 21's people's verdicts: `--intent` on `reject` and
/// `close-handoff` is kept beside the router's labels, an unknown one is a
/// usage error that writes nothing, and `routing --csv` counts both; the
/// sample shows the labels.
#[tokio::test]
async fn a_persons_intent_is_kept_beside_the_routers_and_the_report_counts_both() {
    let desk = Desk::new(receipt()).await;
    let approval = desk
        .pending_refund_saying("req-1", "The sofa from order D-4001 arrived torn: refund D-4001 12000")
        .await;
    let pending = attr(&desk.record(&approval).await, "conversation_id")
        .unwrap()
        .to_owned();
    let shown = stdout(&desk.run(&["show", &approval]).await);
    assert!(
        shown
            .lines()
            .any(|line| line.starts_with("router") && line.ends_with("refund;low;0.95")),
        "the record shows the router's labels: {shown}"
    );
    let plain = desk.h.say(None, "refund A-1001 1250").await;
    let screened = desk.h.say(None, "I want to talk to a person").await;
    assert_eq!(screened.body["handed_off"], true, "{}", screened.raw);

    let unknown = desk
        .run(&[
            "reject", &approval, "--by", "ann", "--reason", "too big", "--intent", "refunds",
        ])
        .await;
    assert_eq!(unknown.status.code(), Some(2), "a usage error: {}", stderr(&unknown));
    assert!(stderr(&unknown).contains("is not an intent"), "{}", stderr(&unknown));
    assert_eq!(
        attr(&desk.record(&approval).await, "state"),
        Some("awaiting_approval"),
        "nothing was decided"
    );
    let rejected = desk
        .run(&[
            "reject", &approval, "--by", "ann", "--reason", "too big", "--intent", "return",
        ])
        .await;
    assert_eq!(rejected.status.code(), Some(0), "{}", stderr(&rejected));
    assert!(
        stdout(&rejected).contains("recorded the intent return"),
        "{}",
        stdout(&rejected)
    );
    let handoff = format!("h_{}", screened.conversation_id().strip_prefix("c_").unwrap());
    let closed = desk
        .run(&["close-handoff", &handoff, "--by", "ann", "--intent", "other"])
        .await;
    assert_eq!(closed.status.code(), Some(0), "{}", stderr(&closed));

    // The support team reads the labels and the verdicts where it reads
    // what they are recorded on (contract 21).
    let shown = stdout(&desk.run(&["show", &approval]).await);
    assert!(
        shown
            .lines()
            .any(|line| line.starts_with("verdict") && line.ends_with("return")),
        "the person's verdict beside the router's labels: {shown}"
    );
    let conversation = stdout(&desk.run(&["conversation", &pending]).await);
    assert!(conversation.contains("  router: refund;low;0.95"), "{conversation}");
    assert!(conversation.contains("verdict       return by ann"), "{conversation}");

    let report = desk.run(&["routing", "--csv"]).await;
    assert_eq!(report.status.code(), Some(0), "{}", stderr(&report));
    let csv = stdout(&report);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines.contains(&"intents,refund,,2,1,0,,1,1,,0,0"),
        "two refund conversations, one contained, one paid, one sent for approval:\n{csv}"
    );
    assert!(
        lines.iter().any(|line| line.starts_with("intents,not_routed,,1,0,1,")),
        "the screen's handoff, never routed:\n{csv}"
    );
    assert!(lines.contains(&"against,refund,return,1,,,,,,,,"), "{csv}");
    assert!(lines.contains(&"against,not_routed,other,1,,,,,,,,"), "{csv}");
    assert_eq!(lines.last(), Some(&"agree,,,2,,,,,,0,,"), "{csv}");

    let sample = stdout(&desk.run(&["sample", "--quiet-for", "0s", "--n", "10"]).await);
    let line_of = |id: &str| {
        sample
            .lines()
            .find(|line| line.starts_with(id))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line_of(&pending).ends_with("router refund;low;0.95  person return  addresses none  returns none"),
        "{sample}"
    );
    assert!(
        line_of(plain.conversation_id()).ends_with("router refund;low;0.95  person -  addresses none  returns none"),
        "{sample}"
    );
    assert!(
        line_of(screened.conversation_id()).ends_with("router -  person other  addresses none  returns none"),
        "{sample}"
    );
}
