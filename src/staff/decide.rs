//! The decisions a person makes (contracts 9, 12, 18, 21): approve,
//! reissue, reject, resolve, reply, close a handoff, and the intent a
//! person found. Each returns a [`Decided`] in the words `refund-chat-admin`
//! has always printed; a ledger that cannot be reached is the `Err`.
//!
//! Every decision is logged (`staff_decision`, with the person's name and
//! `sub`, never a customer's words) and counted (`StaffDecisions`, by kind
//! and outcome).

use crate::clock::now_ms;
use crate::config::FUNCTION_TIMEOUT;
use crate::conversation::person::{Person, PersonNote};
use crate::ledger::dynamo::conversations::Closed;
use crate::ledger::dynamo::notes::{PersonNotes, Replied};
use crate::ledger::dynamo::routing::Verdict;
use crate::ledger::{Confirmed, LedgerError, StaffDecision};
use crate::push::{Kind as PokeKind, Poke};
use crate::record_then_pay::approvals::{self, ApprovalError};
use crate::refund::message::MAX_MESSAGE_CHARS;
use crate::refund::{PaymentOutcome, WriterMark};
use crate::router::Intent;
use crate::untrusted::{acts_on_a_terminal, visible};

use super::Staff;

/// How a decision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Done,
    NotFound,
    /// Someone decided first ([`Decided::first`] says who and when).
    AlreadyDecided,
    /// A field was refused before anything was written.
    Invalid,
    /// The order, read now, does not allow the refund: not paid, it still waits.
    OrderRefused,
    /// The order could not be read, or kept moving: not paid; try again.
    TryAgain,
    /// Payments rejected the refund, or left its outcome unknown (recorded).
    PaymentsFailed,
    /// The approval may be recorded, and payments was not called: a person checks.
    Uncertain,
    /// Payments answered, and the ledger could not record what it said.
    Unrecorded,
    /// The decision stands; the intent a person gave could not be recorded.
    VerdictNotRecorded,
    /// Someone else on the team has the conversation (contract 30;
    /// [`Decided::first`] says who and since when): nothing was written.
    HeldByAnother,
    /// A limit is reached (contract 30: at most 100 saved replies): nothing was written.
    LimitReached,
}

/// Who decided first, and when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct First {
    pub by: String,
    pub at: Option<String>,
}

/// A decision's ending: what happened, in a person's words (every part a
/// customer or the model wrote made visible), and who decided first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub outcome: Outcome,
    pub text: String,
    pub first: Option<First>,
    /// What the decision's writes announce to open pages (contract 31),
    /// published once it is noted: only ever after the write.
    pub pokes: Vec<Poke>,
}

impl Decided {
    pub(super) fn new(outcome: Outcome, text: impl Into<String>) -> Decided {
        Decided {
            outcome,
            text: text.into(),
            first: None,
            pokes: Vec::new(),
        }
    }

    /// With `poke` published when the decision is noted.
    pub(super) fn poking(mut self, poke: Poke) -> Decided {
        self.pokes.push(poke);
        self
    }

    /// With a poke of `kind` in the conversation of a refund record, if it has one.
    fn poking_record(self, conversation: Option<&str>, kind: PokeKind) -> Decided {
        match conversation {
            Some(conversation) => self.poking(Poke::new(conversation, 0, kind)),
            None => self,
        }
    }

    pub(super) fn done(text: impl Into<String>) -> Decided {
        Decided::new(Outcome::Done, text)
    }

    pub(super) fn first(mut self, by: impl Into<String>, at: Option<String>) -> Decided {
        self.first = Some(First { by: by.into(), at });
        self
    }
}

/// The decisions, by name (the log's `action`, the metric's `Kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Approve,
    Reissue,
    Reject,
    Resolve,
    Reply,
    CloseHandoff,
    Claim,
    Release,
    Note,
    SaveReply,
    DeleteReply,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Approve => "approve",
            Kind::Reissue => "reissue",
            Kind::Reject => "reject",
            Kind::Resolve => "resolve",
            Kind::Reply => "reply",
            Kind::CloseHandoff => "close_handoff",
            Kind::Claim => "claim",
            Kind::Release => "release",
            Kind::Note => "note",
            Kind::SaveReply => "save_reply",
            Kind::DeleteReply => "delete_reply",
        }
    }
}

/// Logs and counts a decision, then publishes what its writes announce
/// (contract 31): every verb of the staff library ends here, so the desk
/// and the terminal publish alike, and only after the write.
pub(super) async fn noted(staff: &Staff, kind: Kind, id: &str, by: Person<'_>, decided: &Decided) {
    let outcome = serde_json::to_value(decided.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    tracing::info!(
        event = "staff_decision",
        action = kind.as_str(),
        id = %visible(id),
        by = %visible(by.name),
        by_sub = by.sub.map(|sub| visible(sub).into_owned()).unwrap_or_default(),
        result = %outcome,
    );
    // Per person: the verified `sub` (opaque; the log line has the name), a terminal's "cli".
    let person = by.sub.map_or_else(|| "cli".to_owned(), str::to_owned);
    metrics::counter!("StaffDecisions", "Kind" => kind.as_str(), "Outcome" => outcome, "Person" => person).increment(1);
    first_replies(staff, decided).await;
    staff.push.publish(&decided.pokes).await;
}

/// A person's words or decision reached a customer (what the customer's
/// page is poked for): the first ends the handoff's clock (contract 32),
/// before the pokes announce it. A failure is logged: the decision stands,
/// and the handoff only looks unanswered for longer.
async fn first_replies(staff: &Staff, decided: &Decided) {
    if decided.outcome != Outcome::Done {
        return;
    }
    let now = now_ms();
    for poke in decided.pokes.iter().filter(|poke| poke.kind.customer_sees()) {
        match staff
            .conversations
            .first_reply(&poke.conversation_id, now, &staff.office)
            .await
        {
            // Measured within hours only: the reply time a customer is told.
            Ok(Some(reply)) if reply.within_hours => {
                metrics::histogram!("FirstReplyMinutes")
                    .record(reply.replied_ms.saturating_sub(reply.begun_ms) as f64 / 60_000.0);
            }
            Ok(_) => {}
            Err(error) => tracing::error!(event = "ledger", op = "first_reply", error = %error),
        }
    }
}

/// Approves a refund awaiting approval: the order read afresh, one
/// payments call, its outcome recorded.
pub async fn approve(staff: &Staff, id: &str, by: Person<'_>) -> Result<Decided, LedgerError> {
    pay(staff, id, by, Kind::Approve).await
}

/// Pays an approved refund resolved as not executed, under a new record.
pub async fn reissue(staff: &Staff, id: &str, by: Person<'_>) -> Result<Decided, LedgerError> {
    pay(staff, id, by, Kind::Reissue).await
}

async fn pay(staff: &Staff, id: &str, by: Person<'_>, kind: Kind) -> Result<Decided, LedgerError> {
    let writer = WriterMark::new(&format!("staff:{}", by.sub.unwrap_or(by.name)));
    let result = match kind {
        Kind::Reissue => {
            approvals::reissue(
                &staff.ledger,
                &staff.payments,
                &staff.orders,
                id,
                by,
                &writer,
                &staff.limits,
            )
            .await
        }
        _ => {
            approvals::approve(
                &staff.ledger,
                &staff.payments,
                &staff.orders,
                id,
                by,
                &writer,
                &staff.limits,
            )
            .await
        }
    };
    let decided = match result {
        // Whatever payments said, the decision and its note are the conversation's.
        Ok(approved) => {
            paid(id, kind, &approved).poking_record(approved.record.conversation_id.as_deref(), PokeKind::Decision)
        }
        Err(ApprovalError::Ledger(error)) => return Err(error),
        Err(error) => refused_payment(error),
    };
    noted(staff, kind, id, by, &decided).await;
    Ok(decided)
}

/// What a payments call that was made did, in words.
fn paid(id: &str, kind: Kind, approved: &approvals::Approved) -> Decided {
    let record = &approved.record;
    let amount = record.amount;
    let done = match kind {
        Kind::Reissue => format!("reissued {} as {}", visible(id), visible(&record.record_id)),
        _ => format!("approved {}", visible(id)),
    };
    match &approved.outcome {
        // Paid, and the ledger does not say so: the audit trail is wrong
        // until a person records it.
        PaymentOutcome::Executed(receipt) if !approved.outcome_recorded => Decided::new(
            Outcome::Unrecorded,
            format!(
                "{done}: payments refunded {amount} on order {} to {} (refund {}), but the ledger could not \
                 record it: the record stays executing. Once `refund-chat-admin unknown` lists it, `resolve {} \
                 --executed {} --by NAME`",
                visible(&record.order_id),
                visible(&record.user_id),
                visible(&receipt.refund_id),
                visible(&record.record_id),
                visible(&receipt.refund_id)
            ),
        ),
        PaymentOutcome::Executed(receipt) => Decided::done(format!(
            "{done}: refunded {amount} on order {} to {} (refund {})",
            visible(&record.order_id),
            visible(&record.user_id),
            visible(&receipt.refund_id)
        )),
        _ if !approved.outcome_recorded => Decided::new(
            Outcome::Unrecorded,
            format!(
                "{done}: payments answered ({}), but the ledger could not record it: the record stays \
                 executing. Once `refund-chat-admin unknown` lists it, check it with payments and resolve it",
                approved.outcome.name()
            ),
        ),
        PaymentOutcome::Rejected { status, detail } => Decided::new(
            Outcome::PaymentsFailed,
            format!(
                "payments rejected the refund with HTTP {status} ({}); recorded as rejected, no money moved",
                visible(detail)
            ),
        ),
        PaymentOutcome::Unknown(error) => Decided::new(
            Outcome::PaymentsFailed,
            format!(
                "the refund's outcome is unknown ({}); recorded for `refund-chat-admin unknown`: check it with \
                 payments, then resolve it",
                visible(&error.to_string())
            ),
        ),
    }
}

/// Why an approval or a reissue paid nothing.
fn refused_payment(error: ApprovalError) -> Decided {
    let text = visible(&error.to_string()).into_owned();
    match error {
        ApprovalError::NotFound(_) => Decided::new(Outcome::NotFound, text),
        ApprovalError::AlreadyDecided { by, at, .. } => {
            Decided::new(Outcome::AlreadyDecided, text).first(visible(&by).into_owned(), at)
        }
        ApprovalError::NotReissuable { .. } | ApprovalError::Inconsistent(_) => {
            Decided::new(Outcome::AlreadyDecided, text)
        }
        ApprovalError::MoreThanRemains { .. } | ApprovalError::OrderGone { .. } => {
            Decided::new(Outcome::OrderRefused, text)
        }
        ApprovalError::OrderUnreadable { .. } | ApprovalError::OrderBusy { .. } => {
            Decided::new(Outcome::TryAgain, text)
        }
        ApprovalError::ClaimUncertain { .. } | ApprovalError::NotPaid { .. } | ApprovalError::Ledger(_) => {
            Decided::new(Outcome::Uncertain, text)
        }
    }
}

/// A rejection's reason: a person's words for the audit trail, one line,
/// not empty (masked when it is written, contract 23).
pub fn checked_reason(reason: &str) -> Result<&str, String> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err("the reason is empty".into());
    }
    checked_line(reason, "reason")?;
    Ok(reason)
}

/// Rejects a refund awaiting approval: no money moves.
pub async fn reject(staff: &Staff, id: &str, by: Person<'_>, reason: &str) -> Result<Decided, LedgerError> {
    let decided = match checked_reason(reason) {
        Err(why) => Decided::new(Outcome::Invalid, why),
        Ok(reason) => match staff.ledger.reject(id, by, reason, now_ms()).await? {
            StaffDecision::Done(record) => Decided::done(format!("rejected {}: no money moved", visible(id)))
                .poking_record(record.conversation_id.as_deref(), PokeKind::Decision),
            other => refused(id, other, "awaiting approval"),
        },
    };
    noted(staff, Kind::Reject, id, by, &decided).await;
    Ok(decided)
}

/// Records what payments confirmed for an unknown outcome. Never calls payments.
pub async fn resolve(staff: &Staff, id: &str, by: Person<'_>, confirmed: &Confirmed) -> Result<Decided, LedgerError> {
    if let Confirmed::Executed { refund_id } = confirmed
        && let Err(why) = checked_refund_id(refund_id)
    {
        let decided = Decided::new(Outcome::Invalid, why);
        noted(staff, Kind::Resolve, id, by, &decided).await;
        return Ok(decided);
    }
    let stale_before = now_ms().saturating_sub(FUNCTION_TIMEOUT.as_millis() as u64);
    let claim = staff.ledger.resolve(id, confirmed, by, stale_before, now_ms()).await?;
    let decided = match claim {
        StaffDecision::Done(record) => Decided::done(match confirmed {
            Confirmed::Executed { refund_id } => format!(
                "resolved {}: executed (refund {})",
                visible(id),
                visible(&crate::mask::masked(refund_id))
            ),
            Confirmed::NotExecuted => format!("resolved {}: not executed, no money moved", visible(id)),
        })
        .poking_record(record.conversation_id.as_deref(), PokeKind::Decision),
        other => refused(id, other, "of unknown outcome (or already resolved)"),
    };
    noted(staff, Kind::Resolve, id, by, &decided).await;
    Ok(decided)
}

/// A refund id payments gave: one line, 1 to 128 characters.
fn checked_refund_id(refund_id: &str) -> Result<(), String> {
    if refund_id.trim().is_empty() || refund_id.chars().count() > 128 {
        return Err("the refund id is 1 to 128 characters".into());
    }
    checked_line(refund_id, "refund id")
}

/// A decision the ledger refused, in words: who decided first, and when.
fn refused(id: &str, claim: StaffDecision, expected: &str) -> Decided {
    match claim {
        StaffDecision::Refused(found) => {
            let by = found.decided_by.clone().or(found.resolved_by.clone());
            let at = found.decided_at.clone().or(found.resolved_at.clone());
            let text = format!(
                "refund {} is {}{}: not {expected}",
                visible(id),
                found.state,
                by.as_deref()
                    .map(|by| format!(", decided by {}", visible(by)))
                    .unwrap_or_default()
            );
            match by {
                Some(by) => Decided::new(Outcome::AlreadyDecided, text).first(visible(&by).into_owned(), at),
                None => Decided::new(Outcome::AlreadyDecided, text),
            }
        }
        StaffDecision::NotFound => Decided::new(Outcome::NotFound, format!("no refund record {}", visible(id))),
        // Only a claim that pays is conditioned on the order's guard.
        StaffDecision::OrderMoved => Decided::new(
            Outcome::TryAgain,
            format!("refund {}: its order moved; try again", visible(id)),
        ),
        StaffDecision::Done(_) => Decided::done(format!("decided {}", visible(id))),
    }
}

/// One line of a person's text: what a person writes reaches the
/// customer's screen and the support team's terminals, so it holds no
/// control characters.
fn checked_line(text: &str, what: &str) -> Result<(), String> {
    match text.chars().find(|&c| acts_on_a_terminal(c)) {
        Some(bad) => Err(format!(
            "the {what} holds a control character ({}); write it as one line of plain text",
            visible(&bad.to_string())
        )),
        None => Ok(()),
    }
}

/// A reply's text, checked (trailing white space trimmed, `\r\n` read as a
/// line break): 1 to [`MAX_MESSAGE_CHARS`] characters, in paragraphs if the
/// person wrote them, with no other control character.
pub fn checked_text(text: &str) -> Result<String, String> {
    let text = text.replace("\r\n", "\n");
    let text = text.trim_end();
    if text.trim().is_empty() {
        return Err("the reply is empty".into());
    }
    if let Some(bad) = text.chars().find(|&c| c != '\n' && acts_on_a_terminal(c)) {
        return Err(format!(
            "the reply holds a control character ({}); write plain text (line breaks are fine)",
            visible(&bad.to_string())
        ));
    }
    let chars = text.chars().count();
    if chars > MAX_MESSAGE_CHARS {
        return Err(format!("the reply is {chars} characters; at most {MAX_MESSAGE_CHARS}"));
    }
    Ok(text.to_owned())
}

/// The refusal of a write to a conversation someone else has: who, and
/// since when; `then` says what became of the write.
pub fn held_by_another(id: &str, holder: &crate::ledger::dynamo::holders::Holder, then: &str) -> Decided {
    Decided::new(
        Outcome::HeldByAnother,
        format!(
            "{} has {} since {}: {then} (take it over to answer)",
            visible(&holder.name),
            visible(id),
            visible(&holder.since)
        ),
    )
    .first(visible(&holder.name).into_owned(), Some(holder.since.clone()))
}

/// The conversation an id names: a handoff's id names its conversation.
pub fn conversation_named(id: &str) -> String {
    crate::handoff::conversation_of(id).unwrap_or_else(|| id.to_owned())
}

/// A person's message in a conversation (contract 18), masked (contract
/// 23). `id` is the conversation's, or its handoff's. `click` names the
/// desk's click (a hash of who and its key): the same click appends once.
pub async fn reply(
    staff: &Staff,
    id: &str,
    by: Person<'_>,
    text: &str,
    click: Option<&str>,
) -> Result<Decided, LedgerError> {
    let decided = match checked_text(text) {
        Err(why) => Decided::new(Outcome::Invalid, why),
        Ok(text) => {
            let conversation = conversation_named(id);
            let note = PersonNote::reply(by, &text);
            match PersonNotes::of(&staff.conversations)
                .reply(&conversation, &note, now_ms(), click)
                .await?
            {
                Replied::Appended { seq } => Decided::done(format!(
                    "replied in {} (exchange #{seq}); the customer reads it in the chat",
                    visible(&conversation)
                ))
                .poking(Poke::new(
                    &conversation,
                    crate::conversation::shown::person_message_seq(seq),
                    PokeKind::PersonReply,
                )),
                Replied::NotFound => Decided::new(
                    Outcome::NotFound,
                    format!(
                        "no conversation {} (unknown, or it has expired): nothing was sent",
                        visible(&conversation)
                    ),
                ),
                Replied::HeldBy(holder) => held_by_another(&conversation, &holder, "nothing was sent"),
            }
        }
    };
    noted(staff, Kind::Reply, id, by, &decided).await;
    Ok(decided)
}

/// Closes a handoff (the conversation stays with the people); with `text`,
/// a reply follows, checked before anything is written.
pub async fn close_handoff(
    staff: &Staff,
    id: &str,
    by: Person<'_>,
    text: Option<&str>,
) -> Result<Decided, LedgerError> {
    if let Some(Err(why)) = text.map(checked_text) {
        let decided = Decided::new(Outcome::Invalid, why);
        noted(staff, Kind::CloseHandoff, id, by, &decided).await;
        return Ok(decided);
    }
    let decided = match staff.conversations.close_handoff(id, by, now_ms()).await? {
        Closed::Closed(handoff) => {
            let closed = format!(
                "closed {} (conversation {}); its later messages still reach the support team",
                visible(&handoff.id),
                visible(&handoff.conversation_id)
            );
            let closing = Decided::done("").poking(Poke::new(&handoff.conversation_id, 0, PokeKind::Closed));
            noted(staff, Kind::CloseHandoff, id, by, &closing).await;
            return match text {
                Some(text) => {
                    let replied = reply(staff, &handoff.conversation_id, by, text, None).await?;
                    Ok(Decided {
                        text: format!("{closed}\n{}", replied.text),
                        ..replied
                    })
                }
                None => Ok(Decided::done(closed)),
            };
        }
        Closed::AlreadyClosed(handoff) => {
            let (who, when) = handoff.closed.unwrap_or_default();
            Decided::new(
                Outcome::AlreadyDecided,
                format!(
                    "{} was already closed by {} at {}",
                    visible(id),
                    visible(&who),
                    visible(&when)
                ),
            )
            .first(visible(&who).into_owned(), Some(when))
        }
        Closed::HeldBy(holder) => held_by_another(id, &holder, "it stays open"),
        Closed::NotFound => Decided::new(Outcome::NotFound, format!("no handoff {}", visible(id))),
    };
    noted(staff, Kind::CloseHandoff, id, by, &decided).await;
    Ok(decided)
}

/// After a decision in `conversation` (none: the refund had none), the
/// intent a person found, recorded beside the router's labels (contract
/// 21). A decision that was not made records nothing.
pub async fn with_verdict(
    staff: &Staff,
    decided: Decided,
    conversation: Option<&str>,
    intent: Option<Intent>,
    by: Person<'_>,
) -> Result<Decided, LedgerError> {
    let Some(intent) = intent.filter(|_| decided.outcome == Outcome::Done) else {
        return Ok(decided);
    };
    let Some(conversation) = conversation else {
        return Ok(Decided {
            text: format!("{}\nno conversation: the intent {intent} is not recorded", decided.text),
            ..decided
        });
    };
    let line = match staff
        .conversations
        .record_verdict(conversation, intent, by, now_ms())
        .await
    {
        Ok(Verdict::Recorded) => {
            tracing::info!(
                event = "staff_verdict",
                conversation_id = %visible(conversation),
                intent = intent.as_str(),
                by = %visible(by.name),
                by_sub = by.sub.map(|sub| visible(sub).into_owned()).unwrap_or_default(),
            );
            format!(
                "recorded the intent {intent} for conversation {}",
                visible(conversation)
            )
        }
        Ok(Verdict::NoConversation) => format!(
            "conversation {} has expired: the intent {intent} is not recorded",
            visible(conversation)
        ),
        Err(error) => {
            return Ok(Decided {
                outcome: Outcome::VerdictNotRecorded,
                text: format!(
                    "{}\nthe decision stands, but the intent was not recorded: {error}",
                    decided.text
                ),
                first: None,
                pokes: decided.pokes,
            });
        }
    };
    Ok(Decided {
        text: format!("{}\n{line}", decided.text),
        ..decided
    })
}

/// [`with_verdict`] for a decision on refund record `record_id`: the
/// intent is recorded in the conversation the refund was proposed in.
pub async fn with_verdict_on_record(
    staff: &Staff,
    decided: Decided,
    record_id: &str,
    intent: Option<Intent>,
    by: Person<'_>,
) -> Result<Decided, LedgerError> {
    if intent.is_none() || decided.outcome != Outcome::Done {
        return Ok(decided);
    }
    match staff.ledger.record(record_id).await {
        Ok(record) => {
            let conversation = record.and_then(|record| record.conversation_id);
            with_verdict(staff, decided, conversation.as_deref(), intent, by).await
        }
        Err(error) => Ok(Decided {
            outcome: Outcome::VerdictNotRecorded,
            text: format!(
                "{}\nthe decision stands, but the intent was not recorded: {error}",
                decided.text
            ),
            first: None,
            pokes: decided.pokes,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_plain_text_in_paragraphs_of_at_most_4000_characters() {
        assert_eq!(checked_text("Thanks, done.\n"), Ok("Thanks, done.".to_owned()));
        assert_eq!(
            checked_text("Hello,\r\n\r\nit is refunded.\nKim"),
            Ok("Hello,\n\nit is refunded.\nKim".to_owned())
        );
        assert!(checked_text("a\rb").is_err());
        assert!(checked_text("a\u{202e}b").is_err());
        assert!(checked_text("  \n").is_err());
        assert!(checked_text("a\u{1b}[2Jb").is_err());
        assert!(checked_text(&"x".repeat(MAX_MESSAGE_CHARS)).is_ok());
        assert!(checked_text(&"x".repeat(MAX_MESSAGE_CHARS + 1)).is_err());
    }

    #[test]
    fn a_reason_and_a_refund_id_are_one_line() {
        assert_eq!(checked_reason("  not eligible "), Ok("not eligible"));
        assert!(checked_reason("").is_err());
        assert!(checked_reason("a\rb").is_err());
        assert!(checked_refund_id("").is_err());
        assert!(checked_refund_id(&"r".repeat(129)).is_err());
        assert!(checked_refund_id("rf_123").is_ok());
    }

    #[test]
    fn a_handoff_id_names_its_conversation() {
        assert_eq!(conversation_named("c-1"), "c-1");
    }
}
