//! What every verb prints with: the visible-text rule (a record's text
//! fields hold what a customer or the model wrote, so every cell and line
//! passes through [`visible`]), tables whose last column wraps, a
//! and a transcript's lines.

use refund_chat::chat::Message;
use refund_chat::ledger::RefundRecord;
use refund_chat::ledger::dynamo::conversations::{StoredHandoff, Transcript};
use refund_chat::untrusted::visible;

pub fn print_handoff(handoff: &StoredHandoff) {
    println!("handoff       {}", visible(&handoff.id));
    println!("  reason      {}", visible(&handoff.reason));
    println!(
        "  at          {}  (request {})",
        handoff.at,
        visible(&handoff.request_id)
    );
    match &handoff.closed {
        Some((by, at)) => println!("  closed      {at} by {}", visible(by)),
        None => println!("  open"),
    }
    // The model's words, kept apart from the facts.
    match &handoff.summary {
        Some(summary) => println!("  the model's summary: {}", visible(summary)),
        None => println!("  handed off by code: no model summary"),
    }
}

/// People's verdicts on what the customer wanted, beside the router's labels.
pub fn print_verdicts(transcript: &Transcript) {
    for verdict in &transcript.verdicts {
        println!(
            "verdict       {} by {} at {}",
            visible(&verdict.intent),
            visible(&verdict.by),
            verdict.at
        );
    }
}

/// The labels of the turn that handed the conversation off.
pub fn handoff_labels<'a>(transcript: &'a Transcript, handoff: &StoredHandoff) -> Option<&'a str> {
    transcript
        .exchanges
        .iter()
        .find(|stored| stored.request_id == handoff.request_id)
        .and_then(|stored| stored.router.as_deref())
}

pub fn print_exchanges(transcript: &Transcript) {
    for stored in &transcript.exchanges {
        println!();
        // A person's words (contract 18): who wrote them, and for which record.
        if let Some(text) = stored.exchange.person_text() {
            let by = stored.by.as_deref().unwrap_or_default();
            match &stored.note_for {
                Some(record) => println!(
                    "#{}  {}  note by {} on {}",
                    stored.seq,
                    stored.created_at,
                    visible(by),
                    visible(record)
                ),
                None => println!("#{}  {}  reply by {}", stored.seq, stored.created_at, visible(by)),
            }
            println!("  person: {}", visible(text));
            continue;
        }
        println!(
            "#{}  {}  request {}  status {}",
            stored.seq,
            stored.created_at,
            visible(&stored.request_id),
            stored.status
        );
        // What the router said of the turn (contract 21).
        if let Some(labels) = &stored.router {
            println!("  router: {}", visible(labels));
        }
        // A change of address (contract 26): the order and the outcome.
        for (order_id, outcome) in &stored.addresses {
            println!("  address: order {} {}", visible(order_id), visible(outcome));
        }
        // A return (contract 28): the order, the items, why, the outcome.
        for record in &stored.returns {
            println!("  return: {}", visible(&record.in_words()));
        }
        for message in &stored.exchange.messages {
            for line in transcript_lines(message) {
                println!("  {line}");
            }
        }
        // Which rule the customer was shown, in which version (contract 17).
        let cited = stored.exchange.citations();
        if !cited.is_empty() {
            let cited: Vec<String> = cited.iter().map(|c| visible(&c.to_string()).into_owned()).collect();
            println!("  articles cited: {}", cited.join(", "));
        }
    }
}

/// One message of a transcript, as lines for a terminal: all of it is text
/// a customer or the model wrote, so all of it is made visible.
pub fn transcript_lines(message: &Message) -> Vec<String> {
    match message {
        Message::System(text) => vec![format!("system: {}", visible(text))],
        Message::User(text) => vec![format!("customer: {}", visible(text))],
        Message::Assistant { content, tool_calls } => content
            .iter()
            .filter(|text| !text.is_empty())
            .map(|text| format!("assistant: {}", visible(text)))
            .chain(tool_calls.iter().map(|call| {
                // The new address is the tool's: its reference only (contract 26).
                match refund_chat::orders::address::parse_arguments(&call.arguments) {
                    Ok(parsed) if call.name == refund_chat::orders::address::TOOL_NAME => format!(
                        "assistant calls {} for order {} to the {}",
                        visible(&call.name),
                        visible(&parsed.order_id),
                        visible(&parsed.address.reference())
                    ),
                    _ => format!("assistant calls {} {}", visible(&call.name), visible(&call.arguments)),
                }
            }))
            .collect(),
        Message::Tool { content, .. } => vec![format!("tool result: {}", visible(content))],
    }
}

/// A table row: the record's id, time, customer, order and amount, then `more`.
pub fn row<const N: usize>(record: &RefundRecord, more: [String; N]) -> Vec<String> {
    let created = record
        .created_at
        .get(..19)
        .unwrap_or(&record.created_at)
        .replace('T', " ");
    let amount = record.amount.to_string();
    [
        record.record_id.clone(),
        created,
        record.user_id.clone(),
        record.order_id.clone(),
        amount,
    ]
    .into_iter()
    .chain(more)
    .collect()
}

/// How wide the last column of a table may be before it wraps.
const LAST_COLUMN_WIDTH: usize = 60;

/// `text` (already visible) in lines of at most `width` characters, broken
/// at spaces where it can be; a word longer than a line is cut.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line: Vec<char> = Vec::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(line.drain(..).collect());
        }
        if !line.is_empty() {
            line.push(' ');
        }
        while line.len() + word.len() > width {
            let cut = width - line.len();
            line.extend(word.drain(..cut));
            lines.push(line.drain(..).collect());
        }
        line.extend(word);
    }
    lines.push(line.into_iter().collect());
    lines
}

/// A plain table for a terminal: every cell made visible, columns padded to
/// their widest cell, and the last column wrapped onto continuation lines.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let last = header.len() - 1;
    let rows: Vec<Vec<Vec<String>>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .enumerate()
                .map(|(i, cell)| {
                    let shown = visible(cell).into_owned();
                    if i == last {
                        wrap(&shown, LAST_COLUMN_WIDTH)
                    } else {
                        vec![shown]
                    }
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .flat_map(|row| row[i].iter().map(|line| line.chars().count()))
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell}{}", " ".repeat(width - cell.chars().count())))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in &rows {
        let height = row.iter().map(Vec::len).max().unwrap_or(1);
        for at in 0..height {
            line(row.iter().map(|cell| cell.get(at).map_or("", String::as_str)).collect());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrapping_keeps_every_character_within_the_width() {
        for (text, width) in [
            ("", 5),
            ("one two three", 5),
            ("abcdefghijkl", 5),
            ("abcde fghij", 5),
            ("a  b", 3),
        ] {
            let lines = wrap(text, width);
            assert!(lines.iter().all(|l| l.chars().count() <= width), "{text:?}: {lines:?}");
            let rejoined: String = lines.concat();
            assert_eq!(rejoined.replace(' ', ""), text.replace(' ', ""), "{text:?}: {lines:?}");
        }
        assert_eq!(wrap("one two three", 7), ["one two", "three"]);
    }
}
