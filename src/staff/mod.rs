//! The support team's decisions and reads (contracts 9, 12, 18, 21 and 24),
//! one library with two front ends: `refund-chat-admin` in a terminal and
//! `refund-chat-staff`, the desk in a browser (its edge in [`http`]). A rule or a race
//! is fixed here once: an approval reads the order afresh and pays at most
//! once ([`crate::record_then_pay::approvals`]); a rejection, a resolution
//! and a closed handoff are one conditional write each; a reply is
//! checked, masked and appended.
//!
//! Each decision ends in a [`decide::Decided`]: what happened, in the words
//! a person reads, and who decided first when someone did. The terminal
//! prints it and maps it to an exit status; the desk maps it to an HTTP
//! status ([`http::answer`]). Who decides is a
//! [`crate::conversation::person::Person`]: a name, and from the desk the
//! `sub` the staff pool's authorizer verified, recorded beside it.

pub mod decide;
pub mod hold;
pub mod http;
pub mod internal_note;
pub mod orders;
pub mod read;
pub mod saved_replies;
pub mod search;
pub mod words;

/// What the desk's function calls on the refund ledger and on the
/// conversation table, each with the index it queries: its role in
/// `template.yaml` grants exactly these (`tests/template.rs`), and the API
/// tests see it send nothing else (a transaction's items are authorised as
/// the writes they are).
pub const LEDGER_ACTIONS_USED: &[&str] = &["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"];
pub const LEDGER_INDEX_QUERIED: &str = "waiting";
pub const CONVERSATION_ACTIONS_USED: &[&str] = &[
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
];
/// The open handoffs (the queue) and a customer's items (search and the
/// customer panel, contract 30).
pub const CONVERSATION_INDEXES_QUERIED: &[&str] = &["by_customer", "open_handoffs"];

use std::time::Duration;

use aws_config::SdkConfig;

use crate::config::StaffConfig;
use crate::conversation::Lifetime;
use crate::guest::directory::GuestDirectory;
use crate::ledger::dynamo::DynamoLedger;
use crate::ledger::dynamo::conversations::DynamoConversations;
use crate::ledger::dynamo::notes::PersonNotes;
use crate::orders::http::HttpOrders;
use crate::record_then_pay::approvals;
use crate::refund::payments::HttpPayments;
use crate::refund::policy::Limits;

/// What the support team's decisions use: the ledger (with the notes a
/// decision leaves in the conversation), the conversations, payments, the
/// order system and the rules' limits.
pub struct Staff {
    pub ledger: DynamoLedger,
    pub conversations: DynamoConversations,
    pub payments: HttpPayments,
    pub orders: orders::StaffOrders,
    pub limits: Limits,
    /// The queue's page of each kind of handoff (`QUEUE_PAGE`).
    pub queue_page: usize,
    /// Where a person's actions are announced to open pages (contract 31).
    pub push: crate::push::Publisher,
    /// The team's hours (contract 32): what is overdue, and which first
    /// replies count in the reply time.
    pub office: crate::office_hours::expected::Office,
}

/// The longest one desk request can take, from its settings: an approval
/// with an intent. Each of [`approvals::ORDER_CHECKS`] checks reads the
/// record and the refunds in flight and claims (three ledger operations)
/// around the order's read (two tries; a guest's first reads their e-mail
/// from the guest pool, bounded as a ledger operation); then the last step before payments,
/// payments, the outcome, the verdict's two operations and the click's two,
/// the first reply's three (contract 32), then the decision's live pokes
/// under their one timeout.
/// `template.yaml`'s `Timeout` of the staff function is above it
/// (`tests/template.rs`).
pub fn worst_case(config: &StaffConfig) -> Duration {
    let ledger = config.ledger_timeout;
    let per_check = ledger * 4 + config.orders_timeout * 2;
    per_check * approvals::ORDER_CHECKS as u32
        + ledger * 2
        + config.payments_timeout
        + ledger * 4
        // The first reply's clock and its kept time (contract 32): three writes.
        + ledger * 3
        // The decision's live pokes, after its writes (contract 31).
        + config.live.publish_timeout
}

impl Staff {
    /// Wired from `config`, with `aws` for the tables and `http` for
    /// payments and the order system.
    pub fn new(config: &StaffConfig, aws: &SdkConfig, http: reqwest::Client) -> Staff {
        // A person's note or reply keeps the conversation alive as an
        // exchange does (the TTL); the maximum age is the header's own `ends_by`.
        let conversations = DynamoConversations::from_sdk_config(
            aws,
            &config.conversation_table,
            &config.ledger_table,
            Lifetime {
                ttl: config.conversation_ttl,
                max_age: Duration::ZERO,
            },
            config.ledger_timeout,
        );
        // Decisions leave their notes in the record's conversation (contract 18).
        let ledger = DynamoLedger::from_sdk_config(aws, &config.ledger_table, config.ledger_timeout)
            .with_notes(PersonNotes::of(&conversations));
        Staff {
            ledger,
            conversations,
            push: crate::push::Publisher::new(
                config.live.events_url.as_deref(),
                aws,
                http.clone(),
                config.live.publish_timeout,
            ),
            payments: HttpPayments::new(http.clone(), &config.payments_base_url, config.payments_timeout),
            orders: orders::StaffOrders::new(
                HttpOrders::new(http, &config.orders_base_url, config.orders_timeout),
                config
                    .guest_pool_id
                    .as_ref()
                    .map(|pool| GuestDirectory::new(aws, pool, config.ledger_timeout)),
            ),
            limits: config.limits,
            queue_page: config.queue_page,
            office: config.office.clone(),
        }
    }
}
