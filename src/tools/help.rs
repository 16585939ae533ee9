//! `search_help_centre` (contract 17): the shop's own passages, at most 3;
//! spends no latch. The articles shown are kept for the exchange and the
//! summary.

use super::{Session, Step};
use crate::chat::Declared;
use crate::confirm::WriteKind;
use crate::help::Citation;
use crate::help::tool::{self, TOOL_NAME};

pub(super) const DECLARED: Declared = Declared {
    name: TOOL_NAME,
    description: tool::TOOL_DESCRIPTION,
    parameters: tool::declared_parameters,
};
pub(super) const STEP: Step = Step::HelpCentre;
pub(super) const KIND: Option<WriteKind> = None;

/// Everyone's, visitors' too.
pub(super) fn offered<G, O>(_: &Session<'_, G, O>) -> bool {
    true
}

pub(super) async fn carry_out<G, O>(session: &mut Session<'_, G, O>, arguments: &str) -> String {
    let query = match tool::parse_arguments(arguments) {
        Ok(query) => query,
        Err(error) => {
            return session
                .rejected(TOOL_NAME, error.schema_paths(), error.to_string())
                .to_json();
        }
    };
    let found = session.ports.help.search(&query);
    let cited = tool::citations(&found);
    // The query paraphrases the customer: only its length is logged.
    tracing::info!(
        event = "tool_call",
        tool = TOOL_NAME,
        validation = "ok",
        query_chars = query.chars().count(),
        results = found.len(),
        articles = %cited.iter().map(Citation::to_string).collect::<Vec<_>>().join(" "),
    );
    for citation in cited {
        if !session.stats.articles.contains(&citation) {
            session.stats.articles.push(citation);
        }
    }
    tool::result(&found).to_string()
}
