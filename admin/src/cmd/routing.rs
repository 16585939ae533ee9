//! `routing [--since DATE] [--csv]`: the router measured against people
//! (contract 21). Over the conversations whose first exchange is on or
//! after DATE (default: 7 days back), per router intent of each
//! conversation's first routed turn (a conversation counts under each of
//! its intents; a failed router is the row `unknown`, a conversation the
//! screen handed off before any routing the row `not_routed`): the
//! conversations, how many ended with no person (no handoff, no refund sent
//! for approval), the handoffs and why, the refunds paid (after approval
//! too) and sent for approval, and what the customers answered to "Did this
//! solve it?" (contract 30), and the handoffs begun within hours that a
//! person answered in the last 7 days with their median first reply
//! (contract 32; text only). Then the router's intent against the
//! intent a person recorded (the last verdict), and the share that agree:
//! the person's intent is among the router's.
//!
//! Read from what the conversations keep until their maximum age (the
//! exchanges' labels, the verdicts) and from the ledger's records: a
//! DATE older than `CONVERSATION_MAX_AGE_HOURS` finds only what is left.

use std::collections::BTreeMap;
use std::io::Write;

use refund_chat::clock::{now_ms, rfc3339};
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::ledger::dynamo::routing::RoutedConversation;
use refund_chat::ledger::{DecidedBy, RefundRecord};
use refund_chat::refund::RefundState;
use refund_chat::router::{Intent, Routing};
use refund_chat::untrusted::{spreadsheet_cell, visible};

use crate::{Ending, Outcome};

pub const DEFAULT_DAYS: u64 = 7;
const UNKNOWN: &str = "unknown";
const NOT_ROUTED: &str = "not_routed";

/// One row of the first table.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IntentRow {
    pub conversations: usize,
    /// No handoff and no refund sent for approval.
    pub contained: usize,
    /// Handoffs, by reason.
    pub handed_off: BTreeMap<String, usize>,
    pub refunds_paid: usize,
    pub refunds_sent_for_approval: usize,
    /// The customers' "Did this solve it?" (contract 30): yes, and no.
    pub solved: usize,
    pub not_solved: usize,
}

/// The whole report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub conversations: usize,
    /// By router intent, in the list's order, then `unknown`, then `not_routed`.
    pub rows: Vec<(&'static str, IntentRow)>,
    /// (router intent, person's intent) → conversations.
    pub against: BTreeMap<(&'static str, &'static str), usize>,
    pub with_verdict: usize,
    pub agree: usize,
}

/// The row names, in order.
fn row_names() -> Vec<&'static str> {
    Intent::ALL
        .iter()
        .map(|intent| intent.as_str())
        .chain([UNKNOWN, NOT_ROUTED])
        .collect()
}

/// The report over `conversations`, with the refund records of any
/// conversations (those of others are not counted).
pub fn report(conversations: &[RoutedConversation], records: &[RefundRecord]) -> Report {
    let mut rows: BTreeMap<&'static str, IntentRow> = BTreeMap::new();
    let mut report = Report {
        conversations: conversations.len(),
        ..Report::default()
    };
    for conversation in conversations {
        let (names, router_intents): (Vec<&'static str>, Vec<Intent>) = match &conversation.first_router {
            None => (vec![NOT_ROUTED], Vec::new()),
            Some(recorded) => match Routing::from_recorded(recorded) {
                Routing::Labelled(labels) => (
                    labels.intents.iter().map(|intent| intent.as_str()).collect(),
                    labels.intents,
                ),
                Routing::Failed(_) => (vec![UNKNOWN], Vec::new()),
            },
        };
        let own: Vec<&RefundRecord> = records
            .iter()
            .filter(|record| record.conversation_id.as_deref() == Some(conversation.id.as_str()))
            .collect();
        let paid = own.iter().filter(|r| r.state == RefundState::Executed).count();
        let sent = own.iter().filter(|r| r.decision == DecidedBy::Approval).count();
        for name in &names {
            let row = rows.entry(name).or_default();
            row.conversations += 1;
            match &conversation.handoff_reason {
                Some(reason) => *row.handed_off.entry(reason.clone()).or_default() += 1,
                None if sent == 0 => row.contained += 1,
                None => {}
            }
            row.refunds_paid += paid;
            row.refunds_sent_for_approval += sent;
            match conversation.solved {
                Some(true) => row.solved += 1,
                Some(false) => row.not_solved += 1,
                None => {}
            }
        }
        if let Some(person) = conversation.verdict {
            report.with_verdict += 1;
            if router_intents.contains(&person) {
                report.agree += 1;
            }
            for name in &names {
                *report.against.entry((name, person.as_str())).or_default() += 1;
            }
        }
    }
    report.rows = row_names()
        .into_iter()
        .map(|name| (name, rows.remove(name).unwrap_or_default()))
        .collect();
    report
}

pub async fn run(
    ledger: &DynamoLedger,
    conversations: &DynamoConversations,
    since_ms: Option<u64>,
    csv: bool,
) -> Outcome {
    let now = now_ms();
    let since_ms = since_ms.unwrap_or_else(|| now.saturating_sub(DEFAULT_DAYS * 86_400_000));
    let routed = conversations.routed_since(since_ms, now).await?;
    let records = ledger.all_refunds(since_ms).await?;
    let report = report(&routed, &records);
    let first_replies = refund_chat::office_hours::expected::median_reply_minutes(
        &refund_chat::ledger::ConversationStore::first_replies(conversations).await?,
        now,
    );
    let mut out = std::io::stdout().lock();
    let written = if csv {
        write_csv(&mut out, &report)
    } else {
        write_text(&mut out, &report, since_ms)
            .and_then(|()| write_first_replies(&mut out, first_replies))
            .map_err(|e| e.to_string())
    };
    Ok(match written {
        Ok(()) => Ending::Done,
        Err(error) => Ending::Failed(format!("writing the report: {error}")),
    })
}

fn reasons(row: &IntentRow) -> String {
    row.handed_off
        .iter()
        .map(|(reason, count)| format!("{reason} {count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn share(agree: usize, of: usize) -> String {
    if of == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", agree as f64 * 100.0 / of as f64)
    }
}

/// The first replies of handoffs begun within hours, the last 7 days.
fn write_first_replies(out: &mut impl Write, (median, count): (Option<u32>, usize)) -> std::io::Result<()> {
    writeln!(out)?;
    match median {
        Some(median) => writeln!(
            out,
            "first replies to handoffs begun within hours, last 7 days: {count}, median {median} min"
        ),
        None => writeln!(
            out,
            "first replies to handoffs begun within hours, last 7 days: {count} (fewer than 5: customers are told REPLY_TIME_MINUTES)"
        ),
    }
}

fn write_text(out: &mut impl Write, report: &Report, since_ms: u64) -> std::io::Result<()> {
    writeln!(
        out,
        "routing since {}: {} conversations, {} with a person's intent",
        rfc3339(since_ms),
        report.conversations,
        report.with_verdict
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<16} {:>13} {:>9} {:>10} {:>5} {:>17} {:>6} {:>10}  why handed off",
        "router intent",
        "conversations",
        "contained",
        "handed off",
        "paid",
        "sent for approval",
        "solved",
        "not solved"
    )?;
    for (name, row) in &report.rows {
        writeln!(
            out,
            "{:<16} {:>13} {:>9} {:>10} {:>5} {:>17} {:>6} {:>10}  {}",
            name,
            row.conversations,
            row.contained,
            row.handed_off.values().sum::<usize>(),
            row.refunds_paid,
            row.refunds_sent_for_approval,
            row.solved,
            row.not_solved,
            visible(&reasons(row))
        )?;
    }
    writeln!(out)?;
    if report.against.is_empty() {
        return writeln!(
            out,
            "no person recorded an intent (close-handoff, approve or reject with --intent)"
        );
    }
    writeln!(
        out,
        "{:<16} {:<16} {:>13}",
        "router intent", "person's intent", "conversations"
    )?;
    for ((router, person), count) in &report.against {
        writeln!(out, "{router:<16} {person:<16} {count:>13}")?;
    }
    writeln!(
        out,
        "agree: {} of {} ({})",
        report.agree,
        report.with_verdict,
        share(report.agree, report.with_verdict)
    )
}

/// One CSV: a `table` column says which table a row belongs to
/// (`intents`, `against`, `agree`: of `conversations` with a person's intent, how many the router agreed with); cells as the export neutralises them.
fn write_csv(out: &mut impl Write, report: &Report) -> Result<(), String> {
    let mut csv = csv::Writer::from_writer(out);
    let mut rows: Vec<Vec<String>> = vec![
        [
            "table",
            "router_intent",
            "person_intent",
            "conversations",
            "contained",
            "handed_off",
            "handoff_reasons",
            "refunds_paid",
            "refunds_sent_for_approval",
            "agree",
            "solved",
            "not_solved",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for (name, row) in &report.rows {
        rows.push(vec![
            "intents".into(),
            (*name).into(),
            String::new(),
            row.conversations.to_string(),
            row.contained.to_string(),
            row.handed_off.values().sum::<usize>().to_string(),
            reasons(row),
            row.refunds_paid.to_string(),
            row.refunds_sent_for_approval.to_string(),
            String::new(),
            row.solved.to_string(),
            row.not_solved.to_string(),
        ]);
    }
    for ((router, person), count) in &report.against {
        let mut row = vec!["against".into(), (*router).into(), (*person).into(), count.to_string()];
        row.resize(12, String::new());
        rows.push(row);
    }
    let mut agree = vec![
        "agree".into(),
        String::new(),
        String::new(),
        report.with_verdict.to_string(),
    ];
    agree.resize(9, String::new());
    agree.push(report.agree.to_string());
    agree.resize(12, String::new());
    rows.push(agree);
    rows.iter()
        .try_for_each(|row| csv.write_record(row.iter().map(|cell| spreadsheet_cell(cell).into_owned())))
        .and_then(|()| csv.flush().map_err(csv::Error::from))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use refund_chat::refund::money::AmountCents;

    use super::*;

    fn conversation(
        id: &str,
        router: Option<&str>,
        handoff: Option<&str>,
        verdict: Option<Intent>,
    ) -> RoutedConversation {
        RoutedConversation {
            id: id.into(),
            first_at: "2026-12-01T00:00:00.000Z".into(),
            first_router: router.map(str::to_owned),
            handoff_reason: handoff.map(str::to_owned),
            verdict,
            addresses: Vec::new(),
            returns: Vec::new(),
            solved: None,
        }
    }

    fn record(conversation: &str, state: RefundState, decision: DecidedBy) -> RefundRecord {
        RefundRecord {
            record_id: format!("r-{conversation}-{}", state.as_str()),
            state,
            decision,
            amount: AmountCents::new(1000),
            conversation_id: Some(conversation.into()),
            ..RefundRecord::default()
        }
    }

    fn row<'a>(report: &'a Report, name: &str) -> &'a IntentRow {
        &report.rows.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn per_intent_containment_handoffs_refunds_and_the_people_against_the_router() {
        let conversations = [
            conversation("a", Some("order_status,refund;low;0.92"), None, Some(Intent::Refund)),
            conversation("b", Some("refund;low;0.95"), None, None),
            conversation(
                "c",
                Some("address_change;low;0.90"),
                Some("intent_not_served"),
                Some(Intent::Return),
            ),
            conversation("d", Some("unknown"), None, None),
            conversation("e", None, Some("risk"), None),
        ];
        let records = [
            record("a", RefundState::Executed, DecidedBy::Rules),
            record("b", RefundState::Executed, DecidedBy::Approval),
            record("d", RefundState::AwaitingApproval, DecidedBy::Approval),
            record("z", RefundState::Executed, DecidedBy::Rules),
        ];
        let report = report(&conversations, &records);
        assert_eq!(report.conversations, 5);
        let refund = row(&report, "refund");
        assert_eq!(
            (
                refund.conversations,
                refund.contained,
                refund.refunds_paid,
                refund.refunds_sent_for_approval
            ),
            (2, 1, 2, 1),
            "a contained, b sent for approval and paid after it"
        );
        assert_eq!(row(&report, "order_status").conversations, 1);
        let unserved = row(&report, "address_change");
        assert_eq!(unserved.handed_off.get("intent_not_served"), Some(&1));
        assert_eq!(unserved.contained, 0);
        assert_eq!(row(&report, "unknown").refunds_sent_for_approval, 1);
        assert_eq!(row(&report, "not_routed").handed_off.get("risk"), Some(&1));
        assert_eq!(row(&report, "return").conversations, 0, "every intent has its row");
        assert_eq!((report.with_verdict, report.agree), (2, 1));
        assert_eq!(report.against.get(&("order_status", "refund")), Some(&1));
        assert_eq!(report.against.get(&("refund", "refund")), Some(&1));
        assert_eq!(report.against.get(&("address_change", "return")), Some(&1));
    }

    #[test]
    fn the_csv_has_one_row_per_intent_then_the_verdicts_then_the_agreement() {
        let solved = RoutedConversation {
            solved: Some(true),
            ..conversation("a", Some("refund;low;0.92"), None, Some(Intent::Return))
        };
        let report = report(&[solved], &[]);
        let mut out = Vec::new();
        write_csv(&mut out, &report).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 9 + 1 + 1, "{text}");
        assert!(lines[0].starts_with("table,router_intent,person_intent,conversations"));
        assert!(lines.contains(&"intents,refund,,1,1,0,,0,0,,1,0"), "{text}");
        assert!(lines.contains(&"against,refund,return,1,,,,,,,,"), "{text}");
        assert_eq!(lines.last(), Some(&"agree,,,1,,,,,,0,,"));
    }
}
