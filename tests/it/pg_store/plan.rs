//! The plan PostgreSQL makes for a queue page: the statement recon runs
//! (`recon::workspace::postgres_queue_page`), prepared on a connection of
//! the caller's own and shown by `EXPLAIN (FORMAT JSON) EXECUTE` with the
//! page's parameters, so the planner sees the values it sees for recon.
//! Shared by the plan tests and `benches/pg_store.rs`.

use recon::domain::{PageBound, QueueFilter};
use serde_json::Value;

/// The JSON plan of one queue page.
pub fn page_plan(
    client: &mut postgres::Client,
    filter: &QueueFilter<'_>,
    bound: PageBound<'_>,
    limit: usize,
) -> Value {
    let (sql, literals) = recon::workspace::postgres_queue_page(filter, bound, limit);
    client
        .batch_execute(&format!("PREPARE queue_page AS {sql}"))
        .expect("prepare the page's statement");
    let arguments = match literals.is_empty() {
        true => String::new(),
        false => format!("({})", literals.join(", ")),
    };
    let explain = format!("EXPLAIN (FORMAT JSON) EXECUTE queue_page{arguments}");
    let text = client
        .simple_query(&explain)
        .expect("explain the page")
        .into_iter()
        .find_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
        .expect("a plan");
    client
        .batch_execute("DEALLOCATE queue_page")
        .expect("deallocate the page's statement");
    serde_json::from_str(&text).expect("a JSON plan")
}

/// Every node of a plan, one line each: its type, and the index and the
/// table it reads when it reads one.
pub fn nodes(plan: &Value) -> Vec<String> {
    fn walk(node: &Value, out: &mut Vec<String>) {
        let field = |name: &str| node[name].as_str().map(str::to_string);
        let mut line = field("Node Type").unwrap_or_default();
        if let Some(index) = field("Index Name") {
            line.push_str(&format!(" using {index}"));
        }
        if let Some(table) = field("Relation Name") {
            line.push_str(&format!(" on {table}"));
        }
        out.push(line);
        for child in node["Plans"].as_array().into_iter().flatten() {
            walk(child, out);
        }
    }
    let mut out = Vec::new();
    for top in plan.as_array().into_iter().flatten() {
        walk(&top["Plan"], &mut out);
    }
    out
}

/// The nodes a page's cost would follow the outbox through: a sequential
/// scan of the operations table, or a sort.
pub fn outbox_sized(plan: &Value) -> Vec<String> {
    nodes(plan)
        .into_iter()
        .filter(|n| {
            n.starts_with("Seq Scan") && n.ends_with(" on operations") || n.contains("Sort")
        })
        .collect()
}
