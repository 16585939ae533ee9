//! `sample [--since DURATION] [--quiet-for DURATION] [--n N] [--seed S]`:
//! the nightly review's sample (contract 23). N conversations (20) whose
//! last exchange is older than `--quiet-for` (1h: the chat has gone quiet)
//! and younger than `--since` (24h), chosen at random, the same ones again
//! for the same seed; one line each: id, customer, exchanges, handed off or
//! not, its refunds and their states, the router's labels of its first
//! routed turn and a person's intent (`-`: none). A forgotten
//! customer's conversations are gone, so no sample lists them.

use std::time::Duration;

use refund_chat::clock::now_ms;
use refund_chat::ledger::dynamo::DynamoLedger;
use refund_chat::ledger::dynamo::conversations::DynamoConversations;
use refund_chat::untrusted::visible;

use crate::{Ending, Outcome};

pub struct Sample {
    pub since: Duration,
    pub quiet_for: Duration,
    pub n: usize,
    pub seed: u64,
}

pub async fn run(ledger: &DynamoLedger, conversations: &DynamoConversations, sample: Sample) -> Outcome {
    let now = now_ms();
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let from = now.saturating_sub(millis(sample.since));
    let to = now.saturating_sub(millis(sample.quiet_for));
    let mut quiet = conversations.ended_between(from, to, now).await?;
    shuffle(&mut quiet, sample.seed);
    quiet.truncate(sample.n);
    if quiet.is_empty() {
        println!("no conversation went quiet in that time");
        return Ok(Ending::Done);
    }
    for conversation in &quiet {
        let mut refunds = Vec::new();
        for record_id in &conversation.refund_records {
            let state = match ledger.record(record_id).await? {
                Some(record) => record.state.to_string(),
                None => "missing".to_owned(),
            };
            refunds.push(format!("{}:{state}", visible(record_id)));
        }
        let routed = conversations.routing_of(&conversation.id).await?;
        let router = routed.as_ref().and_then(|r| r.first_router.as_deref()).unwrap_or("-");
        let person = routed
            .as_ref()
            .and_then(|r| r.verdict)
            .map_or("-", |intent| intent.as_str());
        // Changes of address (contract 26): the order and the outcome, never the address.
        let joined = |list: Option<&Vec<String>>| {
            list.map(|outcomes| outcomes.join(","))
                .filter(|joined| !joined.is_empty())
                .unwrap_or_else(|| "none".to_owned())
        };
        let addresses = joined(routed.as_ref().map(|r| &r.addresses));
        // Returns (contract 28): the order and the outcome.
        let returns = joined(routed.as_ref().map(|r| &r.returns));
        println!(
            "{}  customer {}  exchanges {}  {}  last {}  refunds {}  router {}  person {person}  addresses {}  returns {}",
            visible(&conversation.id),
            visible(&conversation.customer),
            conversation.exchanges,
            if conversation.handed_off {
                "handed off"
            } else {
                "not handed off"
            },
            conversation.last_at,
            if refunds.is_empty() {
                "none".to_owned()
            } else {
                refunds.join(",")
            },
            visible(router),
            visible(&addresses),
            visible(&returns),
        );
    }
    Ok(Ending::Done)
}

/// Fisher-Yates with splitmix64: the same seed, the same sample.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// `90s`, `30m`, `1h`, `2d`, or seconds alone.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let count: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (90s, 30m, 1h, 2d)"))?;
    let unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?} is not a duration (90s, 30m, 1h, 2d)")),
    };
    Ok(Duration::from_secs(count.saturating_mul(unit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_the_seeded_shuffle() {
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        for bad in ["", "h", "1w", "-1h", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        let shuffled = |seed| {
            let mut items: Vec<u32> = (0..20).collect();
            shuffle(&mut items, seed);
            items
        };
        assert_eq!(shuffled(7), shuffled(7), "repeatable with a seed");
        assert_ne!(shuffled(7), shuffled(8));
        let mut sorted = shuffled(7);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..20).collect::<Vec<_>>(), "a permutation");
    }
}
