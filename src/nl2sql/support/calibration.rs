//! Calibration and evaluation prompts for the sparse FFN: nl2sql prompts over a few schemas
//! (rendered exactly as the nl2sql engine renders them), handed to `sparse` as plain text.

use crate::nl2sql::plan::prompt::{prefix, question};
use crate::nl2sql::schema::render::render_schema;
use crate::nl2sql::schema::tables::{SchemaInfo, Table, TableKind};

/// A table with `cols` (`name type` pairs) and the first column as primary key.
fn table(name: &str, cols: &[(&str, &str)]) -> Table {
    let mut t = Table::new("public", name, TableKind::Table);
    for (c, ty) in cols {
        t = t.column(c, ty, *c != cols[0].0);
    }
    t.primary_key = vec![cols[0].0.to_string()];
    t
}

/// Three small schemas (shop, HR, library) with questions about them.
fn schemas() -> Vec<(SchemaInfo, Vec<&'static str>)> {
    vec![shop(), hr(), library()]
}

/// A shop (customers, orders, products, order items) with questions about it.
fn shop() -> (SchemaInfo, Vec<&'static str>) {
    let shop = SchemaInfo::new(
        vec![
            table(
                "customers",
                &[
                    ("id", "integer"),
                    ("name", "text"),
                    ("email", "text"),
                    ("country", "text"),
                    ("created_at", "timestamp"),
                ],
            ),
            table(
                "orders",
                &[
                    ("id", "integer"),
                    ("customer_id", "integer"),
                    ("status", "text"),
                    ("total", "numeric(10,2)"),
                    ("ordered_at", "timestamp"),
                ],
            ),
            table(
                "products",
                &[
                    ("id", "integer"),
                    ("name", "text"),
                    ("category", "text"),
                    ("price", "numeric(10,2)"),
                    ("stock", "integer"),
                ],
            ),
            table(
                "order_items",
                &[
                    ("id", "integer"),
                    ("order_id", "integer"),
                    ("product_id", "integer"),
                    ("quantity", "integer"),
                    ("unit_price", "numeric(10,2)"),
                ],
            ),
        ],
        Some("public"),
    );
    (
        shop,
        vec![
            "how many customers are there?",
            "list the 5 most expensive products",
            "total revenue per country in 2024",
            "which customers have never placed an order?",
            "average order total by status",
            "top 3 categories by number of items sold",
            "products with less than 10 units in stock",
            "how many orders were placed last month?",
        ],
    )
}

/// A company's HR tables with questions about them.
fn hr() -> (SchemaInfo, Vec<&'static str>) {
    let hr = SchemaInfo::new(
        vec![
            table(
                "employees",
                &[
                    ("id", "integer"),
                    ("first_name", "text"),
                    ("last_name", "text"),
                    ("department_id", "integer"),
                    ("salary", "numeric"),
                    ("hired_on", "date"),
                ],
            ),
            table(
                "departments",
                &[
                    ("id", "integer"),
                    ("name", "text"),
                    ("location", "text"),
                    ("manager_id", "integer"),
                ],
            ),
            table(
                "timesheets",
                &[
                    ("id", "integer"),
                    ("employee_id", "integer"),
                    ("work_date", "date"),
                    ("hours", "numeric(4,2)"),
                ],
            ),
        ],
        Some("public"),
    );
    (
        hr,
        vec![
            "how many employees work in each department?",
            "who earns the highest salary?",
            "average salary per department location",
            "employees hired after 2020 ordered by hire date",
            "total hours worked by each employee in March 2024",
            "departments without a manager",
            "list employees whose salary is above the company average",
        ],
    )
}

/// A library (books, authors, members, loans) with questions about it.
fn library() -> (SchemaInfo, Vec<&'static str>) {
    let lib = SchemaInfo::new(
        vec![
            table(
                "books",
                &[
                    ("id", "integer"),
                    ("title", "text"),
                    ("author_id", "integer"),
                    ("published_year", "integer"),
                    ("isbn", "text"),
                ],
            ),
            table(
                "authors",
                &[("id", "integer"), ("name", "text"), ("born", "date"), ("nationality", "text")],
            ),
            table(
                "loans",
                &[
                    ("id", "integer"),
                    ("book_id", "integer"),
                    ("member_id", "integer"),
                    ("loaned_at", "timestamp"),
                    ("returned_at", "timestamp"),
                ],
            ),
            table(
                "members",
                &[("id", "integer"), ("name", "text"), ("joined_at", "date"), ("city", "text")],
            ),
        ],
        Some("public"),
    );
    (
        lib,
        vec![
            "how many books were published before 1950?",
            "which authors have more than 3 books?",
            "books that are currently on loan",
            "members who borrowed the most books this year",
            "average loan duration in days",
            "list all authors from France with their book count",
            "which city has the most members?",
        ],
    )
}

/// nl2sql prompts: every schema with each of its questions, chat template included (`parse_special`
/// encoding turns the template markers into the special tokens, as the engine does).
/// `split` selects questions by index parity (0: even, 1: odd, None: all) to keep calibration and
/// evaluation questions apart.
pub fn nl2sql_prompts(split: Option<usize>) -> Vec<String> {
    let mut out = Vec::new();
    for (s, qs) in schemas() {
        let ddl = render_schema(&s);
        for (i, q) in qs.iter().enumerate() {
            if split.is_some_and(|p| i % 2 != p) {
                continue;
            }
            out.push(format!("{}{}", prefix(&ddl).text(), question(q).text()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_cover_the_schemas() {
        assert!(nl2sql_prompts(Some(0)).len() > 5);
    }
}
