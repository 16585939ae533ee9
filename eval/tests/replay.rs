//! The nightly review's round trip (contract 23): a conversation run
//! through the function and decided by a person, turned into a task by
//! `refund-chat-admin replay-task`, passes the evaluation with the local
//! model, and the task file holds nothing that names the customer. A
//! person's intent (`--intent`) is kept beside the router's: the routing
//! report counts both, and the task expects the person's.

use std::process::Output;

use refund_chat::secrets::FixedKey;
use refund_chat_testkit::*;

async fn admin(env: &[(&str, String)], args: &[&str]) -> Output {
    tokio::process::Command::new(admin_binary())
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(name, value)| (*name, value.as_str())))
        .output()
        .await
        .expect("run refund-chat-admin")
}

/// `replay-task` of `conversation` into `file`, which must succeed.
async fn replay(env: &[(&str, String)], conversation: &str, family: &str, why: &str, file: &std::path::Path) {
    let args = [
        "replay-task",
        conversation,
        "--family",
        family,
        "--why",
        why,
        "--out",
        file.to_str().unwrap(),
    ];
    let written = admin(env, &args).await;
    assert_eq!(written.status.code(), Some(0), "{}", text(&written));
}

/// `refund-chat-admin`'s environment on the local stack, with a hash key
/// of its own (a secret named `secret` and the process id) for `replay-task`.
async fn admin_env(
    aws: &aws_config::SdkConfig,
    config: &refund_chat::config::Config,
    secret: &str,
) -> [(&'static str, String); 9] {
    let env = [
        ("LEDGER_TABLE", config.ledger_table.clone()),
        ("CONVERSATION_TABLE", config.conversation_table.clone()),
        ("PAYMENTS_BASE_URL", config.payments_base_url.clone()),
        ("ORDERS_BASE_URL", config.orders_base_url.clone()),
        ("AWS_ENDPOINT_URL", moto().endpoint.clone()),
        ("AWS_REGION", "eu-west-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_owned()),
        ("REVIEW_HASH_KEY_SECRET", format!("{secret}-{}", std::process::id())),
    ];
    put_secret(aws, &env[8].1, "a key only the review has").await.unwrap();
    env
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_conversation_becomes_a_task_that_passes_with_nobodys_details() {
    let LocalStack { aws, config, .. } = local_stack().await;
    let env = admin_env(&aws, &config, "review-hash-key").await;
    let app = refund_chat::startup::wire(config, &aws, FixedKey::new(API_KEY)).unwrap();
    // The order system's name and address for D-4001, typed by the customer,
    // and contact details in the spellings people use.
    let message = "The sofa from order D-4001 arrived torn, please refund 120.00. Ada Quokka, 1 Zanzibar Lane, \
                   Quokkaville. Mail me at ada.quokka@example.org or ada(at)example(dot)org, or call \
                   +33 6 12 34 56 78 or 555-1234; I paid with 4242\u{a0}4242\u{a0}4242\u{a0}4242.";
    let answer = send_as(&app, post_event(&chat_body(message), &[]), "req-replay-1", 0).await;
    assert_eq!(answer.status, lambda_http::http::StatusCode::OK, "{}", answer.raw);
    let conversation = answer.conversation_id().to_owned();
    let pending = text(&admin(&env, &["pending"]).await);
    let approval = pending
        .lines()
        .find(|line| line.contains("D-4001"))
        .and_then(|line| line.split_whitespace().next())
        .unwrap_or_else(|| panic!("no pending refund in {pending}"))
        .to_owned();
    let approved = admin(&env, &["approve", &approval, "--by", "sam", "--intent", "refund"]).await;
    assert_eq!(approved.status.code(), Some(0), "{}", text(&approved));
    assert!(
        text(&approved).contains("recorded the intent refund"),
        "{}",
        text(&approved)
    );

    // A handoff the router made (an intent the agent does not take), closed
    // by a person who says what the customer wanted.
    let moved = "Please change the delivery address of order D-4001 to my new flat, call me on +33 6 12 34 56 78.";
    let answer = send_as(&app, post_event(&chat_body(moved), &[]), "req-replay-2", 0).await;
    assert_eq!(answer.body["handed_off"], true, "{}", answer.raw);
    let handed_off = answer.conversation_id().to_owned();
    let handoff = format!("h_{}", handed_off.strip_prefix("c_").unwrap());
    let closed = admin(
        &env,
        &["close-handoff", &handoff, "--by", "sam", "--intent", "address_change"],
    )
    .await;
    assert_eq!(closed.status.code(), Some(0), "{}", text(&closed));

    // The router against the people: both agree.
    let routing = text(&admin(&env, &["routing"]).await);
    let row = |intent: &str| {
        routing
            .lines()
            .find(|line| line.starts_with(&format!("{intent} ")))
            .map(|line| line.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(
        row("refund"),
        "1 0 0 1 1 0 0",
        "sent for approval and paid after it, no customer's answer:\n{routing}"
    );
    assert_eq!(row("address_change"), "1 0 1 0 0 0 0 intent_not_served 1", "{routing}");
    assert!(routing.contains("agree: 2 of 2 (100.0%)"), "{routing}");

    let tasks = std::env::temp_dir().join(format!("replayed-tasks-{}", std::process::id()));
    std::fs::create_dir_all(tasks.join("replayed")).unwrap();
    let file = tasks.join("replayed/above_limit-sofa.json");
    replay(
        &env,
        &conversation,
        "above_limit",
        "a big refund a person approved",
        &file,
    )
    .await;
    let handoff_file = tasks.join("replayed/routing-address.json");
    replay(
        &env,
        &handed_off,
        "routing",
        "an address change the agent must not take",
        &handoff_file,
    )
    .await;
    let handoff_task: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&handoff_file).unwrap()).unwrap();
    let handoff_expect = &handoff_task["tasks"][0]["expect"];
    assert_eq!(handoff_expect["handoff"], serde_json::json!(["intent_not_served"]));
    assert_eq!(handoff_expect["intents"], serde_json::json!(["address_change"]));
    assert_eq!(handoff_task["tasks"][0]["router"], "address_change;low;0.9");
    assert!(!handoff_task.to_string().contains("+33 6 12 34 56 78"));
    let task = std::fs::read_to_string(&file).unwrap();
    for personal in [
        USER,
        "ada.quokka@example.org",
        "ada(at)example(dot)org",
        "+33 6 12 34 56 78",
        "555-1234",
        "4242",
        "Ada",
        "Quokka",
        "Zanzibar",
        "Quokkaville",
        conversation.as_str(),
        approval.as_str(),
    ] {
        assert!(!task.contains(personal), "{personal} is in the task:\n{task}");
    }
    let parsed: serde_json::Value = serde_json::from_str(&task).unwrap();
    let expect = &parsed["tasks"][0]["expect"];
    assert_eq!(expect["refunds"], serde_json::json!([]));
    assert_eq!(
        expect["approvals"],
        serde_json::json!([{"order_id": "R-1001", "amount_cents": 12000}]),
        "it went to a person: the evaluation has no person to approve it"
    );
    assert_eq!(parsed["tasks"][0]["orders"][0]["paid_cents"], 12000);
    assert_eq!(expect["intents"], serde_json::json!(["refund"]), "the person's intent");
    assert_eq!(expect["risk"], "low");
    assert_eq!(parsed["tasks"][0]["router"], "refund;low;0.9");
    assert!(
        parsed["tasks"][0]["replayed_from"]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:"),
        "a keyed hash: nobody without the key links the task to the conversation"
    );

    let report = tasks.join("report");
    let eval = tokio::process::Command::new(env!("CARGO_BIN_EXE_refund-chat-eval"))
        .args(["--model", "local", "--k", "1", "--check", "--tasks"])
        .arg(&tasks)
        .arg("--out")
        .arg(&report)
        .output()
        .await
        .unwrap();
    let shown = std::fs::read_to_string(report.join("report.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&tasks);
    assert_eq!(eval.status.code(), Some(0), "{}\n{shown}", text(&eval));
    assert!(shown.contains("above_limit (replayed) | 1/1"), "{shown}");
    assert!(shown.contains("routing (replayed) | 1/1"), "{shown}");
    assert!(
        shown.contains("| routing |  | 1 | 1.00 | 1.00 | 1.00 | 1.00 |"),
        "the router graded: {shown}"
    );
}

/// Contract 26's round trip: a change of address confirmed by the
/// customer's later yes becomes a task that expects the order system to
/// take it, with stand-ins for the address both the customer and the agent
/// wrote, and passes with the local model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmed_change_of_address_becomes_a_task_graded_on_the_order_system() {
    let LocalStack { aws, mut config, .. } = local_stack().await;
    config.router.served =
        refund_chat::router::Served::parse("order_status,refund,policy_question,other,address_change").unwrap();
    let env = admin_env(&aws, &config, "review-hash-key-address").await;
    let app = refund_chat::startup::wire(config, &aws, FixedKey::new(API_KEY)).unwrap();
    let asked = "Please change the delivery address of A-1004 to Ada Lovelace, 12 Rue Byron, 75002 Paris, FR";
    let answer = send_as(&app, post_event(&chat_body(asked), &[]), "req-address-1", 0).await;
    let conversation = answer.conversation_id().to_owned();
    let yes = serde_json::json!({"user_id": USER, "message": "yes", "conversation_id": conversation}).to_string();
    let confirmed = send_as(&app, post_event(&yes, &[]), "req-address-2", 0).await;
    assert!(confirmed.reply().contains("changed"), "{}", confirmed.raw);

    let tasks = std::env::temp_dir().join(format!("replayed-address-{}", std::process::id()));
    std::fs::create_dir_all(tasks.join("replayed")).unwrap();
    let file = tasks.join("replayed/address_change-confirmed.json");
    replay(
        &env,
        &conversation,
        "address_change",
        "a change confirmed by a later yes",
        &file,
    )
    .await;
    let task = std::fs::read_to_string(&file).unwrap();
    for personal in [
        "Ada",
        "Lovelace",
        "Byron",
        "75002",
        "Paris",
        USER,
        conversation.as_str(),
    ] {
        assert!(!task.contains(personal), "{personal} is in the task:\n{task}");
    }
    let parsed: serde_json::Value = serde_json::from_str(&task).unwrap();
    assert_eq!(
        parsed["tasks"][0]["expect"]["addresses"],
        serde_json::json!([{"order_id": "R-1001", "postcode": "00000"}])
    );
    assert!(
        parsed["tasks"][0]["agent_intents"]
            .as_str()
            .unwrap()
            .contains("address_change")
    );

    let report = tasks.join("report");
    let eval = tokio::process::Command::new(env!("CARGO_BIN_EXE_refund-chat-eval"))
        .args(["--model", "local", "--k", "1", "--check", "--tasks"])
        .arg(&tasks)
        .arg("--out")
        .arg(&report)
        .output()
        .await
        .unwrap();
    let shown = std::fs::read_to_string(report.join("report.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&tasks);
    assert_eq!(eval.status.code(), Some(0), "{}\n{shown}", text(&eval));
    assert!(shown.contains("address_change (replayed) | 1/1"), "{shown}");
}
