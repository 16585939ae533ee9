//! The shop's help centre (contract 17): the articles the agent answers
//! the shop's rules from, so that an answer about a rule quotes the shop's
//! own words, and the article and the code read one number.
//!
//! Articles are Markdown files opening with a front matter of `id`,
//! `title`, `version` and `url`. They are read and checked once at start
//! ([`load`] for `HELP_ARTICLES_DIR`, [`built_in`] for the project's own
//! `help/`, compiled into the function); a file without its front matter,
//! two files with one id, or a `{{...}}` that names no setting stops the
//! container with a message that names the file. The placeholders are
//! filled from the values the refund rules read ([`Placeholders`]). Each
//! paragraph is a passage: what a search returns and the model quotes.
//! [`search::HelpCentre`] indexes them once per container; the model reads
//! them through the `search_help_centre` tool ([`tool`]), and every exchange
//! keeps which article, in which version, it was shown ([`Citation`]).

pub mod search;
pub mod tool;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// An article the model was shown, and its version: what a complaint is
/// checked against ("the rule that was live that day").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    pub article_id: String,
    pub version: String,
}

/// `refunds@1`, as the summary line and the admin print it.
impl fmt::Display for Citation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.article_id, self.version)
    }
}

/// The project's own articles, compiled into the function.
const BUILT_IN: &[(&str, &str)] = &[
    ("damaged-items.md", include_str!("../../help/damaged-items.md")),
    ("delivery.md", include_str!("../../help/delivery.md")),
    ("refunds.md", include_str!("../../help/refunds.md")),
    ("returns.md", include_str!("../../help/returns.md")),
    (
        "talking-to-a-person.md",
        include_str!("../../help/talking-to-a-person.md"),
    ),
];

/// One article, its placeholders filled, cut into passages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Article {
    pub id: String,
    pub title: String,
    pub version: String,
    pub url: String,
    /// The file it came from, for messages.
    pub file: String,
    /// Its paragraphs, in order.
    pub passages: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelpError {
    #[error("{file}: the article must open with a front matter (--- lines around id, title, version and url)")]
    NoFrontMatter { file: String },
    #[error("{file}: the front matter has no {field}")]
    MissingField { file: String, field: &'static str },
    #[error("{file}: {{{{{name}}}}} names no setting (known: {known})")]
    UnknownPlaceholder { file: String, name: String, known: String },
    #[error("{file}: the id {id:?} is already the id of {other}")]
    DuplicateId { file: String, id: String, other: String },
    #[error("{file}: the article has no text")]
    Empty { file: String },
    #[error("{file}: the url {url:?} is not an https URL")]
    NotHttps { file: String, url: String },
    #[error("{file}: a link to outside the articles' folder")]
    OutsideTheFolder { file: String },
    #[error("{dir}: {error}")]
    Unreadable { dir: String, error: String },
}

/// The settings an article may name, with their values as the article
/// shows them (`{{AUTO_REFUND_LIMIT}}` as money: `50.00`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placeholders(BTreeMap<&'static str, String>);

impl Placeholders {
    /// The values the refund rules read: `refund_window_days` (rule 5),
    /// the automatic limit and the daily limit in cents (rules 1 and 3),
    /// the order's window in hours (rule 2).
    pub fn of_rules(
        refund_window_days: f64,
        auto_limit_cents: u64,
        order_window_hours: f64,
        daily_limit_cents: u64,
    ) -> Self {
        let money = |cents: u64| format!("{}.{:02}", cents / 100, cents % 100);
        // Whole numbers as such (30, not 30.0); a decimal as configured.
        let number = |value: f64| {
            if value.fract() == 0.0 {
                format!("{value:.0}")
            } else {
                format!("{value}")
            }
        };
        Placeholders(BTreeMap::from([
            ("REFUND_WINDOW_DAYS", number(refund_window_days)),
            ("AUTO_REFUND_LIMIT", money(auto_limit_cents)),
            ("ORDER_REFUND_WINDOW_HOURS", number(order_window_hours)),
            ("USER_DAILY_AUTO_LIMIT", money(daily_limit_cents)),
            (
                "RETURN_WINDOW_DAYS",
                crate::orders::returns::DEFAULT_WINDOW_DAYS.to_string(),
            ),
        ]))
    }

    /// With the days a return may be started in (`RETURN_WINDOW_DAYS`,
    /// contract 28): the article and the return's check read one number.
    pub fn with_return_window(mut self, days: u32) -> Self {
        self.0.insert("RETURN_WINDOW_DAYS", days.to_string());
        self
    }

    /// The same, from the rules' settings themselves.
    pub fn of_limits(limits: &crate::refund::policy::Limits) -> Self {
        Placeholders::of_rules(
            limits.refund_window.as_secs_f64() / 86_400.0,
            limits.auto_refund_limit.cents(),
            limits.order_window.as_secs_f64() / 3600.0,
            limits.user_daily_auto_limit.cents(),
        )
    }

    fn fill(&self, file: &str, text: &str) -> Result<String, HelpError> {
        let mut filled = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            filled.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            // An unclosed `{{` is a placeholder misspelt: refused, never shown.
            let end = after.find("}}").unwrap_or(after.len());
            let name = after[..end].trim();
            let value = self.0.get(name).ok_or_else(|| HelpError::UnknownPlaceholder {
                file: file.to_owned(),
                name: name.to_owned(),
                known: self.0.keys().copied().collect::<Vec<_>>().join(", "),
            })?;
            filled.push_str(value);
            rest = &after[(end + 2).min(after.len())..];
        }
        filled.push_str(rest);
        Ok(filled)
    }
}

/// Reads one article from `text` (`file` names it in messages).
pub fn parse(file: &str, text: &str, placeholders: &Placeholders) -> Result<Article, HelpError> {
    let no_front_matter = || HelpError::NoFrontMatter { file: file.to_owned() };
    let text = text.trim_start_matches('\u{feff}');
    let body = text.strip_prefix("---").ok_or_else(no_front_matter)?;
    let (front, body) = body.split_once("\n---").ok_or_else(no_front_matter)?;
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    for line in front.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let (key, value) = line.split_once(':').ok_or_else(no_front_matter)?;
        fields.insert(key.trim(), value.trim());
    }
    let field = |name: &'static str| {
        fields
            .get(name)
            .filter(|value| !value.is_empty())
            .map(|value| (*value).to_owned())
            .ok_or(HelpError::MissingField {
                file: file.to_owned(),
                field: name,
            })
    };
    // The front matter is text a shop wrote, as the body is: filled, and a
    // placeholder that names no setting is refused there too.
    let filled = |name| field(name).and_then(|value| placeholders.fill(file, &value));
    let (id, title, version, url) = (filled("id")?, filled("title")?, filled("version")?, filled("url")?);
    if !is_https(&url) {
        return Err(HelpError::NotHttps {
            file: file.to_owned(),
            url,
        });
    }
    let body = placeholders.fill(file, body.trim_start_matches('-'))?;
    let passages: Vec<String> = body
        .split("\n\n")
        .map(|paragraph| paragraph.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|paragraph| !paragraph.is_empty())
        .collect();
    if passages.is_empty() {
        return Err(HelpError::Empty { file: file.to_owned() });
    }
    Ok(Article {
        id,
        title,
        version,
        url,
        file: file.to_owned(),
        passages,
    })
}

/// An article's link is what the page makes clickable: https, with a host.
fn is_https(url: &str) -> bool {
    reqwest::Url::parse(url)
        .is_ok_and(|parsed| parsed.scheme() == "https" && parsed.host_str().is_some_and(|h| !h.is_empty()))
}

impl Article {
    /// `https://help.shop.example`: where the page may link (contract 18).
    pub fn origin(&self) -> String {
        reqwest::Url::parse(&self.url)
            .map(|url| url.origin().ascii_serialization())
            .unwrap_or_default()
    }
}

/// The origins a page may link to (contract 18): those of the articles the
/// function loads, from `dir` (`HELP_ARTICLES_DIR`) or the built-in set.
pub fn link_origins(dir: Option<&Path>, placeholders: &Placeholders) -> Result<Vec<String>, HelpError> {
    let articles = match dir {
        Some(dir) => load(dir, placeholders)?,
        None => built_in(placeholders)?,
    };
    Ok(origins(&articles))
}

/// The origins of a set of articles, each once, in order.
pub fn origins(articles: &[Article]) -> Vec<String> {
    let mut origins: Vec<String> = articles.iter().map(Article::origin).collect();
    origins.sort();
    origins.dedup();
    origins
}

/// Reads a set of articles: each checked, no two with one id.
fn read_set<'a>(
    files: impl IntoIterator<Item = (String, std::borrow::Cow<'a, str>)>,
    placeholders: &Placeholders,
) -> Result<Vec<Article>, HelpError> {
    let mut articles: Vec<Article> = Vec::new();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for (file, text) in files {
        let article = parse(&file, &text, placeholders)?;
        if let Some(other) = ids.insert(article.id.clone(), file.clone()) {
            return Err(HelpError::DuplicateId {
                file,
                id: article.id,
                other,
            });
        }
        articles.push(article);
    }
    Ok(articles)
}

/// The project's own articles.
pub fn built_in(placeholders: &Placeholders) -> Result<Vec<Article>, HelpError> {
    read_set(
        BUILT_IN
            .iter()
            .map(|(file, text)| ((*file).to_owned(), std::borrow::Cow::Borrowed(*text))),
        placeholders,
    )
}

/// Every `*.md` of `dir` (`HELP_ARTICLES_DIR`), in file-name order.
pub fn load(dir: &Path, placeholders: &Placeholders) -> Result<Vec<Article>, HelpError> {
    let unreadable = |error: std::io::Error| HelpError::Unreadable {
        dir: dir.display().to_string(),
        error: error.to_string(),
    };
    let folder = dir.canonicalize().map_err(unreadable)?;
    let mut paths: BTreeSet<std::path::PathBuf> = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        if path.extension().is_some_and(|extension| extension == "md") {
            paths.insert(path);
        }
    }
    let mut files = Vec::new();
    for path in paths {
        // A link is followed only to a file of the folder itself.
        if !path.canonicalize().map_err(unreadable)?.starts_with(&folder) {
            return Err(HelpError::OutsideTheFolder {
                file: path.display().to_string(),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(unreadable)?;
        files.push((path.display().to_string(), std::borrow::Cow::Owned(text)));
    }
    read_set(files, placeholders)
}

#[cfg(test)]
mod tests;
