//! An internal note (contract 30): a word for the support team that the
//! customer never reads, kept on the conversation with who and when
//! ([`crate::ledger::dynamo::internal_notes`]). Checked as a reply is (1 to
//! 4000 characters of plain text) and masked as section 23 says.

use crate::clock::now_ms;
use crate::conversation::person::Person;
use crate::ledger::LedgerError;
use crate::ledger::dynamo::internal_notes::Noted;
use crate::push::{Kind as PokeKind, Poke};
use crate::untrusted::visible;

use super::Staff;
use super::decide::{Decided, Kind, Outcome, checked_text, conversation_named, noted};

/// Keeps `text` on the conversation `id` names. `click` names the desk's
/// click (the same click keeps one note); a terminal's note is named by
/// who and when.
pub async fn add(
    staff: &Staff,
    id: &str,
    by: Person<'_>,
    text: &str,
    click: Option<&str>,
) -> Result<Decided, LedgerError> {
    let decided = match checked_text(text) {
        Err(why) => Decided::new(Outcome::Invalid, why.replace("the reply", "the note")),
        Ok(text) => {
            let conversation = conversation_named(id);
            let now = now_ms();
            let click = click.map_or_else(
                || crate::intake::admission::key::body_sha256(format!("{}\0{now}", by.name).as_bytes()),
                str::to_owned,
            );
            let kept = crate::mask::masked(&text);
            match staff
                .conversations
                .add_internal_note(&conversation, by, &kept, &click, now)
                .await?
            {
                Noted::Kept => Decided::done(format!(
                    "noted in {} for the support team; the customer does not read it",
                    visible(&conversation)
                ))
                .poking(Poke::new(&conversation, 0, PokeKind::InternalNote)),
                Noted::NotFound => Decided::new(
                    Outcome::NotFound,
                    format!(
                        "no conversation {} (unknown, or it has expired): nothing was kept",
                        visible(&conversation)
                    ),
                ),
            }
        }
    };
    noted(staff, Kind::Note, id, by, &decided).await;
    Ok(decided)
}
