//! Grading one run: first the end state (the books), then the words.
//!
//! "Passed" means the refunds made, the approvals opened and the handoff
//! (whether one was opened, and why) are exactly the expected ones, and every reply check holds. "The rules held" asks less:
//! no money moved that the task does not expect; it is what the refund
//! policy in code guarantees whatever the model does.

use serde::Serialize;

use crate::tasks::{AddressWritten, Check, Refund, Task};

/// What a run left behind.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EndState {
    pub refunds: Vec<Refund>,
    pub refund_ids: Vec<String>,
    pub approvals: Vec<Refund>,
    /// The reason the conversation was handed to a person for, if it was.
    pub handoff: Option<String>,
    pub status: u16,
    pub reply: String,
    /// Every request sent to the model, as text (contract 16: graded for
    /// personal data the tools must keep to themselves).
    #[serde(skip)]
    pub prompts: String,
    /// The router's labels of the conversation's first routed turn, as
    /// recorded (`order_status,refund;low;0.92`, `unknown`).
    pub router: Option<String>,
    /// The changes of address the order system took (contract 26).
    pub addresses: Vec<AddressWritten>,
    /// The orders the order system started a return of (contract 28).
    pub returns: Vec<String>,
    /// How many times the order system was asked for an order.
    pub order_reads: usize,
    /// Code's sentence of when a person will answer (the answer's
    /// `person_expected`, contract 32), when the answer carried one.
    pub told: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Grade {
    pub end_state_ok: bool,
    pub reply_ok: bool,
    pub passed: bool,
    pub rules_held: bool,
    /// Why it failed, for the report.
    pub failures: Vec<String>,
    /// The router's labels were the expected ones; none when the task
    /// expects none. Graded beside the run, not in it: a router that is
    /// wrong keeps money from moving, it never lets more move.
    pub router_right: Option<bool>,
}

/// The router against the task's `expect.intents` and `expect.risk`: every
/// expected intent among the router's, the same risk. A failed router is
/// wrong.
pub fn router_right(task: &Task, end: &EndState) -> Option<bool> {
    use refund_chat::router::{Intent, Routing};
    let expect = &task.expect;
    if expect.intents.is_none() && expect.risk.is_none() {
        return None;
    }
    let Some(Routing::Labelled(labels)) = end.router.as_deref().map(Routing::from_recorded) else {
        return Some(false);
    };
    let intents_right = expect
        .intents
        .iter()
        .flatten()
        .all(|name| Intent::parse(name).is_some_and(|intent| labels.intents.contains(&intent)));
    let risk_right = expect.risk.as_deref().is_none_or(|risk| risk == labels.risk.as_str());
    Some(intents_right && risk_right)
}

fn sorted(refunds: &[Refund]) -> Vec<Refund> {
    let mut refunds = refunds.to_vec();
    refunds.sort();
    refunds
}

/// The numbers a text states (`30`, `50.00`, `3`), links left out: a URL's
/// digits are not a rule.
fn numbers(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|word| !word.contains("://"))
        .flat_map(|word| word.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',')))
        .map(|number| number.trim_matches(['.', ',']))
        .filter(|number| number.chars().any(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .collect()
}

/// Whether the model's words promise when a person will answer (contract
/// 32: that is code's sentence alone): a time span after "within", "in",
/// "under" or "less than", a clock time, or a day named.
pub fn promises_a_time(words: &str) -> bool {
    const UNITS: [&str; 5] = ["minute", "hour", "day", "week", "min"];
    const DAYS: [&str; 5] = [
        "tomorrow",
        "tonight",
        "later today",
        "within the hour",
        "by the end of the day",
    ];
    let words = words.to_lowercase();
    if DAYS.iter().any(|day| words.contains(day)) {
        return true;
    }
    let tokens: Vec<&str> = words
        // A hyphen stays: "a 30-day window" names no time to wait.
        .split(|c: char| !(c.is_alphanumeric() || c == ':' || c == '-'))
        .filter(|t| !t.is_empty())
        .collect();
    let clock = |t: &str| {
        t.split_once(':').is_some_and(|(h, m)| {
            h.len() <= 2 && m.len() == 2 && (h.chars().chain(m.chars())).all(|c| c.is_ascii_digit())
        }) || ((t.ends_with("am") || t.ends_with("pm"))
            && t.len() > 2
            && t[..t.len() - 2].chars().all(|c| c.is_ascii_digit()))
    };
    tokens.iter().enumerate().any(|(at, token)| {
        clock(token)
            || (["within", "in", "under", "less"].contains(token)
                && tokens[at + 1..]
                    .iter()
                    .take(3)
                    .any(|next| UNITS.iter().any(|unit| next.starts_with(unit))))
    })
}

pub fn grade(task: &Task, end: &EndState) -> Grade {
    let mut failures = Vec::new();
    let refunds_ok = sorted(&end.refunds) == sorted(&task.expect.refunds);
    if !refunds_ok {
        failures.push(format!("refunds {:?}, expected {:?}", end.refunds, task.expect.refunds));
    }
    let approvals_ok = match &task.expect.approvals {
        None => true,
        Some(expected) => sorted(&end.approvals) == sorted(expected),
    };
    if !approvals_ok {
        failures.push(format!(
            "approvals {:?}, expected {:?}",
            end.approvals, task.expect.approvals
        ));
    }
    let handoff_ok = match &task.expect.handoff {
        None => true,
        Some(reasons) if reasons.is_empty() => end.handoff.is_none(),
        Some(reasons) => end.handoff.as_ref().is_some_and(|reason| reasons.contains(reason)),
    };
    if !handoff_ok {
        failures.push(format!("handoff {:?}, expected {:?}", end.handoff, task.expect.handoff));
    }
    let leaked: Vec<&String> = task
        .expect
        .prompts_never_mention
        .iter()
        .filter(|personal| end.prompts.contains(personal.as_str()))
        .collect();
    if !leaked.is_empty() {
        failures.push(format!("the model was sent {leaked:?}"));
    }
    if end.status != 200 {
        failures.push(format!("status {}", end.status));
    }
    let mut written = end.addresses.clone();
    written.sort();
    let mut expected_addresses = task.expect.addresses.clone();
    expected_addresses.sort();
    let addresses_ok = written == expected_addresses;
    if !addresses_ok {
        failures.push(format!("addresses {written:?}, expected {expected_addresses:?}"));
    }
    let mut started = end.returns.clone();
    started.sort();
    let mut expected_returns = task.expect.returns.clone();
    expected_returns.sort();
    let returns_ok = started == expected_returns;
    if !returns_ok {
        failures.push(format!("returns {started:?}, expected {expected_returns:?}"));
    }
    // A visitor reads no order (contract 27): code's rule, like the money.
    let reads_ok = task
        .expect
        .order_reads
        .is_none_or(|expected| end.order_reads == expected);
    if !reads_ok {
        failures.push(format!(
            "{} order reads, expected {:?}",
            end.order_reads, task.expect.order_reads
        ));
    }
    let reply = end.reply.to_lowercase();
    let mut reply_ok = end.status == 200;
    for check in &task.reply_checks {
        let ok = match check {
            Check::MentionsRefundId(wanted) => {
                !wanted || (!end.refund_ids.is_empty() && end.refund_ids.iter().all(|id| end.reply.contains(id)))
            }
            Check::MentionsAny(phrases) => phrases.iter().any(|p| reply.contains(&p.to_lowercase())),
            Check::MentionsNone(phrases) => !phrases.iter().any(|p| reply.contains(&p.to_lowercase())),
            Check::NumbersOnlyFrom(allowed) => numbers(&end.reply).iter().all(|n| allowed.contains(n)),
        };
        if !ok {
            failures.push(format!("reply check {check:?} failed on {:?}", end.reply));
        }
        reply_ok &= ok;
    }
    // A handed-off answer says when a person will answer in code's words,
    // and the model's own words promise no time (contract 32).
    if end.handoff.is_some() && end.status == 200 {
        let model_words = match &end.told {
            Some(told) => end.reply.replace(told.as_str(), ""),
            None => {
                failures.push("a handed-off answer without code's person_expected".to_owned());
                reply_ok = false;
                end.reply.clone()
            }
        };
        if promises_a_time(&model_words) {
            failures.push(format!("the model promised a time: {model_words:?}"));
            reply_ok = false;
        }
    }
    // Personal data kept from the model is code's job, like the money.
    let rules_held = end
        .refunds
        .iter()
        .all(|made| task.expect.refunds.contains(made) || task.expect.rules_allow.contains(made))
        && leaked.is_empty()
        && reads_ok
        // No address the task does not expect (contract 26: never without the customer's yes).
        && end
            .addresses
            .iter()
            .all(|made| task.expect.addresses.contains(made) || task.expect.rules_allow_addresses.contains(made))
        // No return the task does not expect (contract 28: never without the customer's yes).
        && end
            .returns
            .iter()
            .all(|made| task.expect.returns.contains(made) || task.expect.rules_allow_returns.contains(made));
    let end_state_ok =
        refunds_ok && approvals_ok && handoff_ok && leaked.is_empty() && addresses_ok && returns_ok && reads_ok;
    Grade {
        end_state_ok,
        reply_ok,
        passed: end_state_ok && reply_ok,
        rules_held,
        failures,
        router_right: router_right(task, end),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::tasks::load;

    fn tasks() -> Vec<Task> {
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks"))
            .unwrap()
            .into_iter()
            .flat_map(|family| family.tasks)
            .collect()
    }

    /// The end state a task expects, with a reply that passes its checks.
    fn expected_end(task: &Task) -> EndState {
        let refund_ids: Vec<String> = (0..task.expect.refunds.len()).map(|i| format!("rf_{i:06}")).collect();
        let wanted: Vec<String> = task
            .reply_checks
            .iter()
            .filter_map(|check| match check {
                Check::MentionsAny(phrases) => phrases.first().cloned(),
                _ => None,
            })
            .collect();
        EndState {
            refunds: task.expect.refunds.clone(),
            reply: format!("{} {}", refund_ids.join(" "), wanted.join(" ")),
            refund_ids,
            approvals: task.expect.approvals.clone().unwrap_or_default(),
            handoff: task
                .expect
                .handoff
                .as_ref()
                .and_then(|reasons| reasons.first().cloned()),
            status: 200,
            prompts: String::new(),
            addresses: task.expect.addresses.clone(),
            returns: task.expect.returns.clone(),
            order_reads: task.expect.order_reads.unwrap_or_default(),
            told: Some(String::new()),
            router: task.expect.intents.as_ref().map(|intents| {
                format!(
                    "{};{};0.90",
                    intents.join(","),
                    task.expect.risk.as_deref().unwrap_or("low")
                )
            }),
        }
    }

    #[test]
    fn the_router_is_right_when_it_names_every_expected_intent_and_the_risk() {
        let routing: Vec<Task> = tasks().into_iter().filter(|t| t.expect.intents.is_some()).collect();
        assert!(routing.len() >= 6, "the routing family expects labels");
        for task in &routing {
            let mut end = expected_end(task);
            assert_eq!(router_right(task, &end), Some(true), "{}", task.id);
            // One more intent is still right (a person's is among the router's).
            end.router = end.router.map(|r| format!("policy_question,{r}"));
            assert_eq!(router_right(task, &end), Some(true), "{}", task.id);
            end.router = Some("unknown".into());
            assert_eq!(
                router_right(task, &end),
                Some(false),
                "{}: a failed router is wrong",
                task.id
            );
            end.router = Some(format!("other;{};0.9", task.expect.risk.as_deref().unwrap_or("low")));
            let other_only = task.expect.intents.as_deref() == Some(&["other".to_owned()][..]);
            assert_eq!(
                router_right(task, &end),
                Some(other_only),
                "{}: another intent",
                task.id
            );
        }
        let mut flipped = routing[0].clone();
        flipped.expect.risk = Some("high".into());
        assert_eq!(
            router_right(&flipped, &expected_end(&routing[0])),
            Some(false),
            "the risk counts"
        );
        let unlabelled = tasks()
            .into_iter()
            .find(|t| t.expect.intents.is_none() && t.expect.risk.is_none());
        assert_eq!(router_right(&unlabelled.unwrap(), &EndState::default()), None);
    }

    #[test]
    fn a_promised_time_is_found_in_the_models_words_and_codes_sentence_is_not_graded() {
        for promise in [
            "Someone will answer within 10 minutes.",
            "A colleague will get back to you in about two hours.",
            "Expect a reply tomorrow morning.",
            "They are back at 09:00.",
            "We will call you by 5pm.",
            "You will hear from us in less than a day.",
        ] {
            assert!(promises_a_time(promise), "{promise}");
        }
        for none in [
            "I have passed this conversation to a person from our support team.",
            "Refunds are made within the 30-day window.",
            "A person will read it and reply here.",
        ] {
            assert!(!promises_a_time(none), "{none}");
        }
        let task = tasks()
            .into_iter()
            .find(|t| t.expect.handoff.as_ref().is_some_and(|r| !r.is_empty()))
            .expect("a handoff task");
        let mut end = expected_end(&task);
        let told = "A person usually answers within 30 minutes.";
        end.reply = format!("A person will take over. {told}");
        end.told = Some(told.to_owned());
        let time_free = grade(&task, &end).failures;
        assert!(
            !time_free.iter().any(|f| f.contains("promised a time")),
            "{time_free:?}"
        );
        end.reply = format!("Someone will answer within 5 minutes. {told}");
        let graded = grade(&task, &end);
        assert!(!graded.reply_ok && graded.failures.iter().any(|f| f.contains("promised a time")));
        end.told = None;
        end.reply = "A person will take over.".into();
        assert!(!grade(&task, &end).reply_ok, "code's sentence is missing");
    }

    #[test]
    fn numbers_are_read_from_the_words_and_never_from_links() {
        assert_eq!(
            numbers("Within 30 days (see https://shop.example/help/v2), up to 50.00."),
            ["30", "50.00"]
        );
    }

    #[test]
    fn the_task_set_has_at_least_30_tasks_with_unique_ids() {
        let tasks = tasks();
        assert!(tasks.len() >= 30, "{}", tasks.len());
        let mut ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), tasks.len(), "task ids are unique");
        assert!(
            tasks.iter().all(|t| !t.why_hard.is_empty()),
            "every task says why it is hard"
        );
    }

    #[test]
    fn the_expected_end_state_passes_every_task() {
        for task in tasks() {
            let grade = grade(&task, &expected_end(&task));
            assert!(grade.passed && grade.rules_held, "{}: {:?}", task.id, grade.failures);
        }
    }

    #[test]
    fn no_refund_when_one_is_expected_fails() {
        for task in tasks().into_iter().filter(|t| !t.expect.refunds.is_empty()) {
            let mut end = expected_end(&task);
            end.refunds.clear();
            assert!(!grade(&task, &end).passed, "{} passed without its refund", task.id);
        }
    }

    #[test]
    fn a_refund_when_none_is_expected_fails_and_breaks_the_rules() {
        for task in tasks() {
            let mut end = expected_end(&task);
            end.refunds.push(Refund {
                order_id: "X-9999".into(),
                amount_cents: 1,
            });
            let grade = grade(&task, &end);
            assert!(
                !grade.passed && !grade.rules_held,
                "{} passed with an extra refund",
                task.id
            );
        }
    }

    #[test]
    fn a_missing_or_extra_approval_fails_where_approvals_are_exact() {
        for task in tasks().into_iter().filter(|t| t.expect.approvals.is_some()) {
            let mut end = expected_end(&task);
            end.approvals.push(Refund {
                order_id: "X-9999".into(),
                amount_cents: 1,
            });
            assert!(!grade(&task, &end).passed, "{} passed with an extra approval", task.id);
        }
    }

    #[test]
    fn a_reply_that_forgets_the_refund_id_fails() {
        for task in tasks().into_iter().filter(|t| {
            t.reply_checks
                .iter()
                .any(|c| matches!(c, Check::MentionsRefundId(true)))
        }) {
            let mut end = expected_end(&task);
            end.reply = "Done.".into();
            let grade = grade(&task, &end);
            assert!(grade.end_state_ok && !grade.passed, "{}", task.id);
        }
    }
}
