//! The `search_help_centre` tool (contract 17): its declaration, the checks
//! its arguments pass (the contract's schema verbatim, compiled once), and
//! what the model reads back: the passages with their article's id,
//! version, title and link. It moves no money and spends no refund latch.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::Citation;
use super::search::Found;
use crate::refund::tool::{SchemaFailure, ToolSchema};

pub const TOOL_NAME: &str = "search_help_centre";

pub const TOOL_DESCRIPTION: &str = "Search the shop's own help centre for its rules: refunds and their time \
     limits, damaged items, delivery, talking to a person. Use it for every question about what the shop allows \
     or how long something takes, and answer only from the passages it returns, with the article's url. query: \
     the customer's question in a few words. An empty results list means the help centre does not answer it: \
     say you are not sure and offer a person. Moves no money.";

/// The contract's schema, verbatim (section 17).
const PARAMETERS_JSON: &str = r#"{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":500}},"required":["query"],"additionalProperties":false}"#;

static SCHEMA: LazyLock<ToolSchema> = LazyLock::new(|| ToolSchema::compile(PARAMETERS_JSON));

pub fn parameters_schema() -> &'static Value {
    SCHEMA.parameters()
}

/// The schema declared to the model with `strict: true`.
pub fn declared_parameters() -> &'static Value {
    SCHEMA.declared()
}

/// Compiles the validator before the first request needs it.
pub fn warm_up() {
    LazyLock::force(&SCHEMA);
}

/// The query the model asked for, once it passed the schema.
pub fn parse_arguments(raw: &str) -> Result<String, SchemaFailure> {
    let value = SCHEMA.parse(TOOL_NAME, raw)?;
    value["query"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| SchemaFailure::invalid_field(TOOL_NAME, "query"))
}

/// What the model reads: exactly the contract's fields, best first.
pub fn result(found: &[Found<'_>]) -> Value {
    json!({
        "results": found.iter().map(|found| json!({
            "article_id": found.article.id,
            "version": found.article.version,
            "title": found.article.title,
            "url": found.article.url,
            "passage": found.passage,
        })).collect::<Vec<_>>()
    })
}

/// The articles a result showed the model, as the exchange keeps them.
pub fn citations(found: &[Found<'_>]) -> Vec<Citation> {
    distinct(
        found
            .iter()
            .map(|found| (found.article.id.as_str(), found.article.version.as_str())),
    )
}

/// The citations in stored results of this tool (what [`result`] wrote).
pub fn citations_in<'a>(contents: impl IntoIterator<Item = &'a str>) -> Vec<Citation> {
    let results: Vec<Value> = contents
        .into_iter()
        .filter_map(|content| serde_json::from_str::<Value>(content).ok())
        .flat_map(|value| value["results"].as_array().cloned().unwrap_or_default())
        .collect();
    distinct(
        results
            .iter()
            .filter_map(|result| Some((result["article_id"].as_str()?, result["version"].as_str()?))),
    )
}

/// Each (article, version) once, in the order first shown.
fn distinct<'a>(cited: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<Citation> {
    let mut distinct: Vec<Citation> = Vec::new();
    for (article_id, version) in cited {
        if !distinct
            .iter()
            .any(|c| c.article_id == article_id && c.version == version)
        {
            distinct.push(Citation {
                article_id: article_id.to_owned(),
                version: version.to_owned(),
            });
        }
    }
    distinct
}
