//! The events people act on (contract 14): a refund waiting for approval, a
//! conversation handed to a person, a refund whose outcome is unknown.
//!
//! They are derived from the tables' own writes, never sent beside them: an
//! invocation that dies right after the write that caused one would lose an
//! event it was about to send. Each table's DynamoDB stream feeds one
//! EventBridge Pipe per event, whose filter picks the write and whose input
//! template maps the stream record to the event's detail (`template.yaml`
//! deploys exactly [`PIPES`]; `tests/api/events_pipes.rs` runs the filters
//! with EventBridge's pattern semantics, moto's matcher, and renders the
//! templates, against stream records made from items the function wrote).
//!
//! A detail carries ids, amounts, reasons and times, never text that a
//! customer, the model or payments wrote: not the message, the model's
//! summary or payments' `detail`, and the model's order id only as the
//! record's `event_order_id` (the id when it looks like one, else empty;
//! [`crate::untrusted::order_id_for_event`]). Its `event_id` is the stream record's
//! `eventID`, the same on every delivery of that record: a consumer
//! deduplicates by it (Pipes deliver at least once).

/// Where a pipe reads: a table's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `template.yaml`'s `RefundLedger`.
    Ledger,
    /// `template.yaml`'s `ConversationTable`.
    Conversations,
}

impl Table {
    /// The table's logical id in `template.yaml`.
    pub fn resource(self) -> &'static str {
        match self {
            Table::Ledger => "RefundLedger",
            Table::Conversations => "ConversationTable",
        }
    }
}

/// One event: the pipe that derives it from a table's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pipe {
    /// The pipe's logical id in `template.yaml`.
    pub resource: &'static str,
    /// The EventBridge detail type.
    pub detail_type: &'static str,
    pub table: Table,
    /// The filter, an EventBridge pattern over the stream record.
    pub pattern: &'static str,
    /// The Pipes input template: the event's detail.
    pub input_template: &'static str,
}

/// Every event's `source`.
pub const SOURCE: &str = "refund-chat";

pub const PIPES: [Pipe; 3] = [
    Pipe {
        resource: "RefundAwaitingApprovalPipe",
        detail_type: "RefundAwaitingApproval",
        table: Table::Ledger,
        // Written `awaiting_approval` (rule 1, 2 or 3 fired): a new record.
        pattern: r#"{"eventName":["INSERT"],"dynamodb":{"NewImage":{"kind":{"S":["refund"]},"state":{"S":["awaiting_approval"]}}}}"#,
        input_template: r#"{"event_id": "<$.eventID>", "record_id": "<$.dynamodb.NewImage.record_id.S>", "user_id": "<$.dynamodb.NewImage.user_id.S>", "order_id": "<$.dynamodb.NewImage.event_order_id.S>", "amount_cents": <$.dynamodb.NewImage.amount_cents.N>, "reasons": <$.dynamodb.NewImage.reasons.L>, "created_at": "<$.dynamodb.NewImage.created_at.S>", "request_id": "<$.dynamodb.NewImage.request_id.S>"}"#,
    },
    Pipe {
        resource: "RefundOutcomeUnknownPipe",
        detail_type: "RefundOutcomeUnknown",
        table: Table::Ledger,
        // Moved to `unknown` (a timeout, a broken connection, a 5xx): money may have moved.
        pattern: r#"{"eventName":["MODIFY"],"dynamodb":{"NewImage":{"kind":{"S":["refund"]},"state":{"S":["unknown"]}},"OldImage":{"state":{"S":[{"anything-but":["unknown"]}]}}}}"#,
        input_template: r#"{"event_id": "<$.eventID>", "record_id": "<$.dynamodb.NewImage.record_id.S>", "user_id": "<$.dynamodb.NewImage.user_id.S>", "order_id": "<$.dynamodb.NewImage.event_order_id.S>", "amount_cents": <$.dynamodb.NewImage.amount_cents.N>, "updated_at": "<$.dynamodb.NewImage.updated_at.S>", "request_id": "<$.dynamodb.NewImage.request_id.S>"}"#,
    },
    Pipe {
        resource: "ConversationHandedOffPipe",
        detail_type: "ConversationHandedOff",
        table: Table::Conversations,
        // A header that gains its (one) handoff.
        pattern: r#"{"eventName":["INSERT","MODIFY"],"dynamodb":{"NewImage":{"sk":{"S":["head"]},"handoff_id":{"S":[{"exists":true}]}},"OldImage":{"handoff_id":{"S":[{"exists":false}]}}}}"#,
        input_template: r#"{"event_id": "<$.eventID>", "handoff_id": "<$.dynamodb.NewImage.handoff_id.S>", "conversation_id": "<$.dynamodb.NewImage.pk.S>", "user_id": "<$.dynamodb.NewImage.customer.S>", "reason": "<$.dynamodb.NewImage.handoff_reason.S>", "handoff_at": "<$.dynamodb.NewImage.handoff_at.S>", "request_id": "<$.dynamodb.NewImage.handoff_request_id.S>"}"#,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_is_json_and_no_template_names_text_a_person_wrote() {
        for pipe in PIPES {
            serde_json::from_str::<serde_json::Value>(pipe.pattern).unwrap();
            for text in [
                "customer_message",
                "handoff_summary",
                "messages",
                "rejection_reason",
                "payments_detail",
                "failure",
                ".order_id.",
            ] {
                assert!(!pipe.input_template.contains(text), "{} names {text}", pipe.detail_type);
            }
        }
    }
}
