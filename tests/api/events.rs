//! Every file in `events/` through the real handler, in-process, against the
//! project's own local model and payments sandbox: the status and the number
//! of refunds must be the ones `events/README.md` states.

use std::path::Path;

use refund_chat::secrets::FixedKey;

use refund_chat_testkit::*;

struct Expectation {
    file: String,
    status: u16,
    refunds: usize,
}

fn expectations() -> Vec<Expectation> {
    let table = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("events/README.md")).unwrap();
    table
        .lines()
        .filter(|line| line.starts_with("| ") && line.contains(".json"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            Expectation {
                file: cells[0].to_owned(),
                status: cells[2].parse().unwrap(),
                refunds: cells[3].parse().unwrap(),
            }
        })
        .collect()
}

#[tokio::test]
async fn every_event_file_produces_its_stated_status() {
    let LocalStack { sandbox, aws, config } = local_stack().await;
    let app = std::sync::Arc::new(refund_chat::startup::wire(config, &aws, FixedKey::new(API_KEY)).unwrap());

    let expectations = expectations();
    let mut files: Vec<String> = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("events"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = expectations.iter().map(|e| e.file.clone()).collect();
    listed.sort();
    assert_eq!(
        files, listed,
        "every event file has exactly one row in events/README.md"
    );

    for expected in expectations {
        let before = sandbox.refunds_made().len();
        // Each event is its own invocation; a replay is a second invocation with the same key.
        let request_id = format!("req-{}", expected.file);
        // Through the function's own answer, so an event asking for an event stream gets one.
        let answer = send_streamed_as(&app, load_event(&expected.file), &request_id).await;
        assert_eq!(
            answer.status.as_u16(),
            expected.status,
            "{}: {}",
            expected.file,
            answer.raw
        );
        let asks_for_events = expected.file.contains("event-stream");
        assert_eq!(answer.is_stream(), asks_for_events, "{}: {}", expected.file, answer.raw);
        if asks_for_events {
            assert_eq!(answer.done().0, 200, "{}", answer.raw);
            assert_eq!(answer.names().first(), Some(&"delta"), "the preface, thought aloud");
            assert!(answer.names().contains(&"discard"), "{}", answer.raw);
            assert_eq!(answer.steps(), ["refund_check", "payments"]);
        } else {
            assert_eq!(answer.headers["content-type"], "application/json", "{}", expected.file);
        }
        assert_eq!(
            sandbox.refunds_made().len() - before,
            expected.refunds,
            "{}: refunds made: {}",
            expected.file,
            answer.raw
        );
        assert_eq!(answer.headers["x-request-id"], request_id.as_str(), "{}", expected.file);
    }
}

#[test]
fn the_readme_documents_every_misbehaviour_phrase() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    for (phrase, _) in refund_chat_local::local_model::PHRASES {
        assert!(
            readme.contains(&format!("| `{phrase}` |")),
            "README.md does not document the phrase {phrase:?}"
        );
    }
}
