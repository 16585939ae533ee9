//! Saved replies (contract 30): the answers a refund desk gives all day,
//! managed by approvers and put into the reply box by the desk's page,
//! where the person may change one before sending it: a saved reply is
//! never sent by itself. At most [`MAX_SAVED_REPLIES`], each with a title
//! of 1 to 80 characters and a text checked and masked as a reply is;
//! every change is recorded with who and when
//! ([`crate::ledger::dynamo::saved_replies`]).

use crate::clock::now_ms;
use crate::conversation::person::Person;
use crate::ledger::LedgerError;
use crate::ledger::dynamo::saved_replies::{Deleted, Saved, SavedReply};
use crate::untrusted::{acts_on_a_terminal, visible};

use super::Staff;
use super::decide::{Decided, Kind, Outcome, checked_text, noted};

pub const MAX_SAVED_REPLIES: usize = 100;
pub const MAX_TITLE_CHARS: usize = 80;
/// An id is the page's slug of its title: short, and safe in a path.
pub const MAX_ID_CHARS: usize = 64;

/// The saved replies in use, by title.
pub async fn list(staff: &Staff) -> Result<Vec<SavedReply>, LedgerError> {
    staff.conversations.saved_replies().await
}

/// An id of 1 to 64 letters, digits, `-` and `_`.
pub fn checked_id(id: &str) -> Result<&str, String> {
    let ok = !id.is_empty()
        && id.chars().count() <= MAX_ID_CHARS
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(id)
    } else {
        Err(format!(
            "a saved reply's id is 1 to {MAX_ID_CHARS} letters, digits, - and _"
        ))
    }
}

/// A title: one line of 1 to 80 characters, trimmed.
pub fn checked_title(title: &str) -> Result<&str, String> {
    let title = title.trim();
    if title.is_empty() {
        return Err("the title is empty".into());
    }
    if title.chars().any(acts_on_a_terminal) {
        return Err("the title is one line of plain text".into());
    }
    let chars = title.chars().count();
    if chars > MAX_TITLE_CHARS {
        return Err(format!("the title is {chars} characters; at most {MAX_TITLE_CHARS}"));
    }
    Ok(title)
}

/// Saves reply `id`, new or changed.
pub async fn save(staff: &Staff, id: &str, title: &str, text: &str, by: Person<'_>) -> Result<Decided, LedgerError> {
    let checked = checked_id(id).and_then(|id| Ok((id, checked_title(title)?, checked_text(text)?)));
    let decided = match checked {
        Err(why) => Decided::new(Outcome::Invalid, why.replace("the reply", "the saved reply")),
        Ok((id, title, text)) => {
            let text = crate::mask::masked(&text);
            match staff
                .conversations
                .save_reply(id, title, &text, by, MAX_SAVED_REPLIES, now_ms())
                .await?
            {
                Saved::Saved => Decided::done(format!("saved reply {} is saved", visible(id))),
                Saved::Full => Decided::new(
                    Outcome::LimitReached,
                    format!("there are {MAX_SAVED_REPLIES} saved replies already: delete one first"),
                ),
            }
        }
    };
    noted(staff, Kind::SaveReply, id, by, &decided).await;
    Ok(decided)
}

/// Deletes reply `id`; its record stays, with who and when.
pub async fn delete(staff: &Staff, id: &str, by: Person<'_>) -> Result<Decided, LedgerError> {
    let decided = match staff.conversations.delete_saved_reply(id, by, now_ms()).await? {
        Deleted::Deleted => Decided::done(format!("saved reply {} is deleted", visible(id))),
        Deleted::NotFound => Decided::new(Outcome::NotFound, format!("no saved reply {}", visible(id))),
    };
    noted(staff, Kind::DeleteReply, id, by, &decided).await;
    Ok(decided)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_a_short_slug_and_a_title_one_line_of_at_most_80() {
        assert!(checked_id("where-is-my-refund_2").is_ok());
        assert!(checked_id("").is_err());
        assert!(checked_id("a/b").is_err());
        assert!(checked_id(&"a".repeat(65)).is_err());
        assert_eq!(checked_title("  Refund on its way "), Ok("Refund on its way"));
        assert!(checked_title(" ").is_err());
        assert!(checked_title("a\nb").is_err());
        assert!(checked_title(&"t".repeat(80)).is_ok());
        assert!(checked_title(&"t".repeat(81)).is_err());
    }
}
