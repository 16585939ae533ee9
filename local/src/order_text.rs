//! Finds an order id and an amount in a customer's message, the way the local
//! model "understands" it: order ids look like `A-1001`, amounts like `12.50`,
//! `€5` or `12,50`.

/// An order id: 1 to 4 capital letters, a dash, digits (`A-1001`, `ORD-77`).
pub fn find_order_id(text: &str) -> Option<String> {
    words(text).find(|word| is_order_id(word)).map(str::to_owned)
}

/// Every order id, in the order written.
pub fn find_order_ids(text: &str) -> Vec<String> {
    words(text)
        .filter(|word| is_order_id(word))
        .map(str::to_owned)
        .collect()
}

/// The amount that goes with `order_id` in cents: the one just before it
/// ("12.50 on A-1001", "12.50 for A-1001"), else the first one after it and
/// before the next order id ("A-1001 12.50 and A-1002 8.00"), else the
/// nearest one before it.
pub fn find_amount_for(text: &str, order_id: &str) -> Option<u64> {
    let words: Vec<&str> = words(text).collect();
    let at = words.iter().position(|word| *word == order_id)?;
    let amount = |word: &&str| (!is_order_id(word)).then(|| amount_cents(word)).flatten();
    let joined_before = match at.checked_sub(2).map(|i| (words[i], words[i + 1])) {
        Some((number, "on" | "for" | "of")) => amount(&number),
        _ => None,
    };
    // Up to the next order id: its amount is its own.
    let mut after = words[at + 1..].iter().take_while(|word| !is_order_id(word));
    let mut before = words[..at].iter().rev().take_while(|word| !is_order_id(word));
    joined_before
        .or_else(|| after.find_map(amount))
        .or_else(|| before.find_map(amount))
}

/// The first amount that is not part of an order id, in cents.
pub fn find_amount_cents(text: &str) -> Option<u64> {
    words(text).filter(|word| !is_order_id(word)).find_map(amount_cents)
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace().map(|word| {
        word.trim_matches(|c: char| matches!(c, ',' | '.' | '!' | '?' | ';' | ':' | '(' | ')' | '"' | '\''))
    })
}

fn is_order_id(word: &str) -> bool {
    let Some((letters, digits)) = word.split_once('-') else {
        return false;
    };
    (1..=4).contains(&letters.len())
        && letters.chars().all(|c| c.is_ascii_uppercase())
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
}

fn amount_cents(word: &str) -> Option<u64> {
    let number = word
        .trim_start_matches(['$', '€', '£'])
        .trim_end_matches(['€', '$', '£']);
    let number = number.replace(',', ".");
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let (units, fraction) = number.split_once('.').unwrap_or((&number, ""));
    if units.is_empty() || fraction.len() > 2 {
        return None;
    }
    let cents: u64 = format!("{fraction:0<2}").parse().ok()?;
    let cents = units.parse::<u64>().ok()?.checked_mul(100)?.checked_add(cents)?;
    (cents > 0).then_some(cents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_order_ids_and_amounts() {
        let text = "My mug from order A-1001 arrived broken, please refund 12.50.";
        assert_eq!(find_order_id(text).as_deref(), Some("A-1001"));
        assert_eq!(find_amount_cents(text), Some(1250));
        assert_eq!(find_amount_cents("refund €5 please"), Some(500));
        assert_eq!(find_amount_cents("refund 12,5 on B-2001"), Some(1250));
        assert_eq!(find_amount_cents("order B-2001"), None);
        assert_eq!(find_order_id("how long does a refund take?"), None);
    }

    #[test]
    fn pairs_each_order_with_its_own_amount() {
        let text = "Refund A-1001 12.50 and A-1002 8.00 please";
        assert_eq!(find_order_ids(text), ["A-1001", "A-1002"]);
        assert_eq!(find_amount_for(text, "A-1001"), Some(1250));
        assert_eq!(find_amount_for(text, "A-1002"), Some(800));
        assert_eq!(find_amount_for("12.50 for A-1001", "A-1001"), Some(1250));
        assert_eq!(find_amount_for("A-1001 and A-1002 8.00", "A-1001"), None);
        let on = "Refund 12.50 on A-1001 and 5.00 on A-1003.";
        assert_eq!(find_amount_for(on, "A-1001"), Some(1250));
        assert_eq!(find_amount_for(on, "A-1003"), Some(500));
    }
}
