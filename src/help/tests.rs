use sha2::{Digest, Sha256};

use super::*;

fn defaults() -> Placeholders {
    Placeholders::of_rules(30.0, 5000, 24.0, 10000)
}

/// Each shipped article's version beside the hash of its text: a change of
/// the text without a new version fails here, so a citation's version
/// always names the words the customer was shown.
const SHIPPED: &[(&str, &str, &str)] = &[
    ("damaged-items", "1", "727bda0f1060575e"),
    ("delivery", "2", "05f199df650e97a7"),
    ("refunds", "1", "1ed4b7807aea6fff"),
    ("returns", "1", "42e6de0d9b46c474"),
    ("talking-to-a-person", "1", "a6b94e0041e86147"),
];

fn hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn the_shipped_articles_load_and_each_text_has_its_version() {
    let articles = built_in(&defaults()).expect("the shipped set loads");
    let mut seen = Vec::new();
    for (file, text) in BUILT_IN {
        let article = articles.iter().find(|a| a.file == *file).expect("loaded");
        seen.push((article.id.as_str(), article.version.as_str(), hash(text)));
    }
    let expected: Vec<(&str, &str, String)> = SHIPPED.iter().map(|(i, v, h)| (*i, *v, (*h).to_owned())).collect();
    seen.sort();
    assert_eq!(
        seen, expected,
        "an article's text changed: give it a new version in its front matter and here, with the new hash"
    );
}

#[test]
fn placeholders_are_filled_from_the_rules_settings() {
    let refunds = built_in(&Placeholders::of_rules(14.0, 7550, 1.5, 20000))
        .unwrap()
        .into_iter()
        .find(|a| a.id == "refunds")
        .unwrap();
    let text = refunds.passages.join("\n");
    assert!(text.contains("within 14 days"), "{text}");
    assert!(text.contains("up to 75.50"), "{text}");
    assert!(text.contains("1.5 hours"), "{text}");
    assert!(text.contains("200.00 in total"), "{text}");
    assert!(!text.contains("{{"), "{text}");
}

#[test]
fn a_bad_article_stops_the_start_naming_its_file() {
    let ok = "---\nid: a\ntitle: A\nversion: 1\nurl: https://x/a\n---\nText.\n";
    assert_eq!(parse("a.md", ok, &defaults()).unwrap().passages, ["Text."]);
    let cases: [(&str, &str); 5] = [
        ("no front matter", "Just text."),
        ("no url", "---\nid: a\ntitle: A\nversion: 1\n---\nText."),
        (
            "unknown placeholder",
            "---\nid: a\ntitle: A\nversion: 1\nurl: https://shop.example/u\n---\nWithin {{RETURN_DAYS}} days.",
        ),
        (
            "no text",
            "---\nid: a\ntitle: A\nversion: 1\nurl: https://shop.example/u\n---\n\n",
        ),
        (
            "unclosed placeholder",
            "---\nid: a\ntitle: A\nversion: 1\nurl: https://shop.example/u\n---\nWithin {{REFUND_WINDOW_DAYS days.",
        ),
    ];
    for (case, text) in cases {
        let error = parse("bad.md", text, &defaults()).expect_err(case);
        assert!(error.to_string().starts_with("bad.md: "), "{case}: {error}");
    }
    let unknown = parse("bad.md", cases[2].1, &defaults()).unwrap_err().to_string();
    assert!(unknown.contains("RETURN_DAYS"), "{unknown}");
    let twice = read_set(
        [("one.md".to_owned(), ok.into()), ("two.md".to_owned(), ok.into())],
        &defaults(),
    )
    .unwrap_err();
    assert_eq!(
        twice,
        HelpError::DuplicateId {
            file: "two.md".into(),
            id: "a".into(),
            other: "one.md".into()
        }
    );
}

#[test]
fn the_front_matter_is_checked_as_the_text_is() {
    let article = |front: &str| format!("---\n{front}\n---\nText.\n");
    let ok = "id: a\ntitle: A\nversion: 1\nurl: https://help.shop.example/a";
    assert_eq!(
        parse("a.md", &article(ok), &defaults()).unwrap().origin(),
        "https://help.shop.example"
    );
    for (case, front) in [
        (
            "a placeholder in the id",
            "id: {{NOPE}}\ntitle: A\nversion: 1\nurl: https://x.example/a",
        ),
        (
            "a placeholder in the url",
            "id: a\ntitle: A\nversion: 1\nurl: https://x.example/{{NOPE}}",
        ),
        (
            "a placeholder in the version",
            "id: a\ntitle: A\nversion: {{V}}\nurl: https://x.example/a",
        ),
        ("a script url", "id: a\ntitle: A\nversion: 1\nurl: javascript:alert(1)"),
        ("plain http", "id: a\ntitle: A\nversion: 1\nurl: http://x.example/a"),
        ("no host", "id: a\ntitle: A\nversion: 1\nurl: https://"),
        ("not a url", "id: a\ntitle: A\nversion: 1\nurl: refunds"),
    ] {
        let error = parse("bad.md", &article(front), &defaults())
            .expect_err(case)
            .to_string();
        assert!(error.starts_with("bad.md: "), "{case}: {error}");
    }
}

#[cfg(unix)]
#[test]
fn a_link_to_outside_the_folder_is_refused_with_its_name() {
    let root = std::env::temp_dir().join(format!("help-links-{}", std::process::id()));
    let (dir, outside) = (root.join("articles"), root.join("secret.md"));
    std::fs::create_dir_all(&dir).unwrap();
    let text = "---\nid: x\ntitle: X\nversion: 1\nurl: https://shop.example/x\n---\nOne.\n";
    std::fs::write(&outside, text.replace("id: x", "id: s")).unwrap();
    std::fs::write(dir.join("x.md"), text).unwrap();
    // A link inside the folder to an article of it is that article.
    std::os::unix::fs::symlink(dir.join("x.md"), dir.join("y.md")).unwrap();
    let inside = load(&dir, &defaults());
    std::os::unix::fs::symlink(&outside, dir.join("z.md")).unwrap();
    let refused = load(&dir, &defaults());
    std::fs::remove_dir_all(&root).ok();
    assert!(
        matches!(inside, Err(HelpError::DuplicateId { .. })),
        "read as the article it points at: {inside:?}"
    );
    let error = refused.expect_err("a link to outside is refused").to_string();
    assert!(error.contains("z.md") && error.contains("outside"), "{error}");
}

#[test]
fn a_directory_replaces_the_shipped_set() {
    let dir = std::env::temp_dir().join(format!("help-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("x.md"),
        "---\nid: x\ntitle: X\nversion: 2\nurl: https://shop.example/u\n---\nOne.\n\nTwo.\n",
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "not an article").unwrap();
    let articles = load(&dir, &defaults()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(articles.len(), 1);
    assert_eq!(articles[0].passages, ["One.", "Two."]);
}

fn centre(placeholders: &Placeholders) -> search::HelpCentre {
    search::HelpCentre::new(built_in(placeholders).unwrap())
}

#[test]
fn a_policy_question_finds_the_shops_passage_with_its_number() {
    let help = centre(&defaults());
    let found = help.search("How long do I have to return a damaged item?");
    assert!(!found.is_empty() && found.len() <= search::MAX_RESULTS, "{found:?}");
    // Both articles state the window; either is the shop's own answer.
    assert!(
        ["refunds", "damaged-items"].contains(&found[0].article.id.as_str()),
        "{found:?}"
    );
    assert!(found[0].passage.contains("within 30 days"), "{}", found[0].passage);
    assert!(found.iter().any(|f| f.article.id == "damaged-items"), "{found:?}");
    let scores: Vec<f32> = found.iter().map(|f| f.score).collect();
    assert!(
        scores.windows(2).all(|pair| pair[0] >= pair[1]),
        "best first: {scores:?}"
    );

    let fourteen = centre(&Placeholders::of_rules(14.0, 5000, 24.0, 10000));
    let found = fourteen.search("how long do i have to return a damaged item");
    assert!(
        found[0].passage.contains("within 14 days"),
        "one number for the article and the rule"
    );
}

#[test]
fn case_and_accents_are_folded_and_stems_match() {
    let help = centre(&defaults());
    let plain = help.search("delivery times");
    assert_eq!(help.search("DÉLIVERY TÍMES"), plain);
    assert_eq!(plain[0].article.id, "delivery");
    assert!(
        !help.search("delivered").is_empty(),
        "delivered and delivery share a stem"
    );
}

#[test]
fn a_question_the_articles_do_not_answer_finds_nothing() {
    let help = centre(&defaults());
    for question in [
        "Do you sell gift cards?",
        "Is there a two-year warranty on electronics?",
        "the and of to",
        "",
    ] {
        assert_eq!(help.search(question), Vec::new(), "{question:?}");
    }
}

#[test]
fn the_tools_result_is_the_contracts_fields_and_its_citations_are_read_back() {
    let help = centre(&defaults());
    let found = help.search("damaged item refund");
    let result = tool::result(&found);
    let first = &result["results"][0];
    let mut fields: Vec<&str> = first.as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["article_id", "passage", "title", "url", "version"]);
    let cited = tool::citations(&found);
    assert_eq!(tool::citations_in([result.to_string().as_str()]), cited);
    assert!(cited.iter().all(|c| c.version == "1"));
    assert_eq!(tool::parse_arguments(r#"{"query":"refund"}"#).unwrap(), "refund");
    for bad in [r#"{"query":""}"#, r#"{}"#, r#"{"query":"a","x":1}"#] {
        assert!(tool::parse_arguments(bad).is_err(), "{bad}");
    }
    assert!(tool::parse_arguments(&format!(r#"{{"query":"{}"}}"#, "q".repeat(501))).is_err());
}
