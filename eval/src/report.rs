//! The report: per task and per family, pass^1 (the share of runs that
//! passed) and pass^k (every one of the k runs passed), whether the rules
//! held, tokens, cost and latency; then every failure with its transcript.
//! Written as markdown and as JSON.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::run::RunResult;
use crate::tasks::Family;

#[derive(Debug, Serialize)]
pub struct TaskSummary {
    pub task: String,
    pub family: String,
    pub safety: bool,
    pub runs: usize,
    pub passed: usize,
    pub pass_1: f64,
    pub pass_k: bool,
    pub rules_held: bool,
    pub known_local_failure: Option<String>,
    pub why_hard: String,
    /// Made from a real conversation: the hash of its id.
    pub replayed_from: Option<String>,
    pub mean_tokens: f64,
    pub mean_cost_usd: f64,
    pub mean_latency_ms: f64,
}

#[derive(Debug, Serialize)]
pub struct FamilySummary {
    pub family: String,
    pub safety: bool,
    pub tasks: usize,
    pub pass_1: f64,
    pub pass_k: f64,
    pub rules_held: f64,
    /// The share of runs whose router labels were the expected ones, over
    /// the runs of tasks that expect labels; none when no task does.
    pub router_accuracy: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub model: String,
    pub k: usize,
    pub tasks: Vec<TaskSummary>,
    pub families: Vec<FamilySummary>,
    pub runs: Vec<RunResult>,
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.collect();
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

pub fn summarise(model: &str, k: usize, families: &[Family], runs: Vec<RunResult>) -> Report {
    let mut tasks = Vec::new();
    for family in families {
        for task in &family.tasks {
            let of_task: Vec<&RunResult> = runs.iter().filter(|r| r.task == task.id).collect();
            if of_task.is_empty() {
                continue;
            }
            let passed = of_task.iter().filter(|r| r.grade.passed).count();
            tasks.push(TaskSummary {
                task: task.id.clone(),
                family: family.family.clone(),
                safety: family.safety,
                runs: of_task.len(),
                passed,
                pass_1: passed as f64 / of_task.len() as f64,
                pass_k: passed == of_task.len(),
                rules_held: of_task.iter().all(|r| r.grade.rules_held),
                known_local_failure: task.local_model_fails.clone(),
                why_hard: task.why_hard.clone(),
                replayed_from: task.replayed_from.clone(),
                mean_tokens: mean(of_task.iter().map(|r| (r.prompt_tokens + r.completion_tokens) as f64)),
                mean_cost_usd: mean(of_task.iter().map(|r| r.cost_usd)),
                mean_latency_ms: mean(of_task.iter().map(|r| r.latency_ms)),
            });
        }
    }
    let families_summary = families
        .iter()
        .filter_map(|family| {
            let of_family: Vec<&TaskSummary> = tasks.iter().filter(|t| t.family == family.family).collect();
            (!of_family.is_empty()).then(|| FamilySummary {
                family: family.family.clone(),
                safety: family.safety,
                tasks: of_family.len(),
                pass_1: mean(of_family.iter().map(|t| t.pass_1)),
                pass_k: mean(of_family.iter().map(|t| f64::from(u8::from(t.pass_k)))),
                rules_held: mean(of_family.iter().map(|t| f64::from(u8::from(t.rules_held)))),
                router_accuracy: router_accuracy(runs.iter().filter(|r| r.family == family.family)),
            })
        })
        .collect();
    Report {
        model: model.to_owned(),
        k,
        tasks,
        families: families_summary,
        runs,
    }
}

/// Of the runs graded for their router labels, the share right.
fn router_accuracy<'a>(runs: impl Iterator<Item = &'a RunResult>) -> Option<f64> {
    let graded: Vec<bool> = runs.filter_map(|run| run.grade.router_right).collect();
    (!graded.is_empty()).then(|| mean(graded.iter().map(|&right| f64::from(u8::from(right)))))
}

pub fn markdown(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# refund-chat evaluation\n\nModel: {}; k = {} runs per task.\n\n",
        report.model, report.k
    ));
    out.push_str("## By family\n\n");
    out.push_str("pass^1: share of runs whose end state and reply were right (the model did well).\n");
    out.push_str(
        "pass^k: share of tasks right in all k runs. Rules held: no money moved that the task does not expect\n",
    );
    out.push_str("(the policy in code; for safety families it must be 1.00 whatever the model does).\n");
    out.push_str("Router: share of runs whose routing labels named the task's expected intents and risk (blank: no\n");
    out.push_str("task of the family expects labels).\n\n");
    out.push_str(
        "| family | safety | tasks | pass^1 | pass^k | rules held | router |\n| --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for f in &report.families {
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {} |\n",
            f.family,
            if f.safety { "yes" } else { "" },
            f.tasks,
            f.pass_1,
            f.pass_k,
            f.rules_held,
            f.router_accuracy.map(|a| format!("{a:.2}")).unwrap_or_default()
        ));
    }
    out.push_str("\n## By task\n\n");
    out.push_str("| task | family | passed | pass^1 | pass^k | rules held | tokens | cost (USD) | latency (ms) | known local failure |\n");
    out.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for t in &report.tasks {
        out.push_str(&format!(
            "| {} | {}{} | {}/{} | {:.2} | {} | {} | {:.0} | {:.6} | {:.0} | {} |\n",
            t.task,
            t.family,
            if t.replayed_from.is_some() { " (replayed)" } else { "" },
            t.passed,
            t.runs,
            t.pass_1,
            if t.pass_k { "yes" } else { "no" },
            if t.rules_held { "yes" } else { "**NO**" },
            t.mean_tokens,
            t.mean_cost_usd,
            t.mean_latency_ms,
            t.known_local_failure.as_deref().unwrap_or("")
        ));
    }
    let failures: Vec<&RunResult> = {
        let mut seen = BTreeMap::new();
        for run in report.runs.iter().filter(|r| !r.grade.passed) {
            seen.entry(run.task.clone()).or_insert(run);
        }
        seen.into_values().collect()
    };
    if !failures.is_empty() {
        out.push_str("\n## Failures (the first failing run of each task)\n");
        for run in failures {
            out.push_str(&format!(
                "\n### {} (run {})\n\n- why it is hard: {}\n- {}\n- reply ({}): {}\n\n```json\n{}\n```\n",
                run.task,
                run.attempt,
                report
                    .tasks
                    .iter()
                    .find(|t| t.task == run.task)
                    .map(|t| t.why_hard.as_str())
                    .unwrap_or(""),
                run.grade.failures.join("\n- "),
                run.end.status,
                run.end.reply,
                serde_json::to_string_pretty(&run.transcript).unwrap_or_default()
            ));
        }
    }
    out
}
