//! `reissue ID --by NAME`: an approved refund resolved as not executed (its
//! approval never reached payments) paid once, as a new record linked to it.

use refund_chat::config::StaffConfig;
use refund_chat::ledger::dynamo::DynamoLedger;

use super::approve::{Payment, pay};
use crate::Outcome;

pub async fn run(ledger: &DynamoLedger, config: &StaffConfig, id: &str, by: &str) -> Outcome {
    pay(ledger, config, id, by, Payment::Reissue).await
}
