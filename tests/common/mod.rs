//! Shared helpers for integration tests: where the real models and the llama.cpp fixtures live.
#![allow(dead_code)]

use std::path::PathBuf;
use turboinfer::nl2sql::{Engine, ForeignKey, SchemaInfo, Table, TableKind};

/// Default directory of the model files (`$TURBOINFER_MODELS_DIR` overrides it).
pub const DEFAULT_MODELS_DIR: &str = "/var/lib/turboinfer/models";

/// True when `$TURBOINFER_REQUIRE_MODELS` (comma-separated model names) lists `name`.
pub fn model_required(name: &str) -> bool {
    std::env::var("TURBOINFER_REQUIRE_MODELS")
        .map(|v| v.split(',').any(|n| n.trim() == name))
        .unwrap_or(false)
}

/// Path of model `name` (e.g. `"smollm2-135m"` -> `<dir>/smollm2-135m.gguf`), or `None` after
/// printing a skip notice when it is absent. Panics when it is absent but required.
pub fn model_path(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("TURBOINFER_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_MODELS_DIR));
    let path = dir.join(format!("{name}.gguf"));
    if path.is_file() {
        return Some(path);
    }
    if model_required(name) {
        panic!("required model {name} not found at {} (TURBOINFER_REQUIRE_MODELS)", path.display());
    }
    println!("skipping: {name} not found at {}", path.display());
    None
}

/// Directory of sentence encoder `name` (`<models dir>/<name>/`, as `turboinfer-fetch-model`
/// installs it), or `None` after printing a skip notice when it is absent. Panics when it is
/// absent but required.
pub fn encoder_dir(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("TURBOINFER_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_MODELS_DIR))
        .join(name);
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    if model_required(name) {
        panic!(
            "required encoder {name} not found at {} (TURBOINFER_REQUIRE_MODELS)",
            dir.display()
        );
    }
    println!("skipping: {name} not found at {}", dir.display());
    None
}

/// Directory of the llama.cpp reference fixtures (`$TURBOINFER_FIXTURES_DIR`, default
/// `<crate root>/../shared/fixtures`).
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("TURBOINFER_FIXTURES_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("shared").join("fixtures")
    })
}

/// The fixture file of model `name` (`<fixtures>/<file>.llamacpp.json`).
pub fn fixture_path(name: &str) -> PathBuf {
    let file = match name {
        "qwen2.5-coder-0.5b" => "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "qwen2.5-coder-1.5b" => "qwen2.5-coder-1.5b-instruct-q4_k_m",
        other => other,
    };
    fixtures_dir().join(format!("{file}.llamacpp.json"))
}

/// The parsed fixture of model `name`, or `None` (with a skip notice, or a panic when the model
/// is required) when the file is absent.
pub fn load_fixture(name: &str) -> Option<serde_json::Value> {
    let path = fixture_path(name);
    match std::fs::read_to_string(&path) {
        Ok(s) => Some(
            serde_json::from_str(&s)
                .unwrap_or_else(|e| panic!("fixture {} is not JSON: {e}", path.display())),
        ),
        Err(e) if model_required(name) => {
            panic!("required fixture {} unreadable: {e}", path.display())
        }
        Err(_) => {
            println!("skipping: fixture for {name} not found at {}", path.display());
            None
        }
    }
}

/// The parsed fixture of model `name`; panics when it is absent (callers have already found the model).
pub fn fixture(name: &str) -> serde_json::Value {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("fixture {} is not JSON: {e}", path.display()))
}

/// A JSON array of integers as token ids.
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().expect("id array").iter().map(|x| x.as_u64().expect("id") as u32).collect()
}

/// The three models of this machine, smallest first.
pub const MODELS: [&str; 3] = ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"];

/// Loads model `name` as an nl2sql engine, or `None` when the model is absent (see
/// [`model_path`]).
pub fn engine(name: &str) -> Option<Engine> {
    let path = model_path(name)?;
    Some(Engine::load(&path, name).expect("model loads"))
}

/// A path for test `name` of this process under the system temporary directory (not created).
pub fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("turboinfer-it-{name}-{}", std::process::id()))
}

/// A fresh path for test `name`: [`temp_path`] with whatever an earlier run left there removed.
pub fn fresh_dir(name: &str) -> PathBuf {
    let d = temp_path(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The fixtures' users and orders in `public` (orders.user_id references users.id). With `full`,
/// the columns of the llama.cpp fixture prompt (users: country, created_at; orders: status,
/// ordered_at) are added.
pub fn users_orders(full: bool) -> SchemaInfo {
    let mut users = Table::new("public", "users", TableKind::Table)
        .column("id", "integer", false)
        .column("name", "text", false)
        .column("email", "text", true);
    let mut orders = Table::new("public", "orders", TableKind::Table)
        .column("id", "integer", false)
        .column("user_id", "integer", true)
        .column("amount", "numeric(10,2)", true);
    if full {
        users = users.column("country", "text", true).column("created_at", "timestamp", true);
        orders = orders.column("status", "text", true).column("ordered_at", "timestamp", true);
    }
    let users = users.with_primary_key(&["id"]);
    let orders =
        orders.with_primary_key(&["id"]).with_foreign_key(&["user_id"], "public", "users", &["id"]);
    SchemaInfo::new(vec![users, orders], Some("public"))
}

/// A column with a comment.
fn commented(t: Table, col: &str, comment: &str) -> Table {
    let mut t = t;
    if let Some(c) = t.columns.iter_mut().find(|c| c.name == col) {
        c.comment = Some(comment.to_string());
    }
    t
}

/// A single-column foreign key `col -> ref_table(ref_col)` in `public`.
fn fk(col: &str, ref_table: &str, ref_col: &str) -> ForeignKey {
    ForeignKey {
        columns: vec![col.into()],
        ref_schema: "public".into(),
        ref_table: ref_table.into(),
        ref_columns: vec![ref_col.into()],
    }
}

/// A table of `public` with columns `(name, type, nullable)`, primary key and comment.
fn table(name: &str, cols: &[(&str, &str, bool)], pk: &[&str], comment: &str) -> Table {
    let mut t =
        cols.iter().fold(Table::new("public", name, TableKind::Table), |t, (n, ty, null)| {
            t.column(n, ty, *null)
        });
    t.primary_key = pk.iter().map(|s| s.to_string()).collect();
    t.comment = Some(comment.to_string());
    t
}

/// demo/schema.sql as the catalog reports it (types as PostgreSQL formats them).
pub fn demo_schema() -> SchemaInfo {
    let countries = table(
        "countries",
        &[
            ("country_code", "character(2)", false),
            ("name", "text", false),
            ("continent", "text", false),
            ("currency", "character(3)", false),
        ],
        &["country_code"],
        "Countries the shop ships to (ISO 3166-1 alpha-2 codes).",
    );
    let mut users = table(
        "users",
        &[
            ("user_id", "integer", false),
            ("email", "text", false),
            ("full_name", "text", false),
            ("country_code", "character(2)", false),
            ("signed_up_at", "timestamp with time zone", false),
            ("is_active", "boolean", false),
            ("birth_year", "integer", true),
        ],
        &["user_id"],
        "Registered customers of the shop.",
    );
    users.foreign_keys.push(fk("country_code", "countries", "country_code"));
    let users = commented(
        commented(users, "is_active", "false once the customer closed the account."),
        "birth_year",
        "Optional; NULL when the customer did not say.",
    );
    let mut addresses = table(
        "addresses",
        &[
            ("address_id", "integer", false),
            ("user_id", "integer", false),
            ("kind", "text", false),
            ("street", "text", false),
            ("city", "text", false),
            ("postal_code", "text", false),
            ("country_code", "character(2)", false),
        ],
        &["address_id"],
        "Shipping and billing addresses of users; a user may have several.",
    );
    addresses.foreign_keys.push(fk("user_id", "users", "user_id"));
    addresses.foreign_keys.push(fk("country_code", "countries", "country_code"));
    let mut categories = table(
        "categories",
        &[
            ("category_id", "integer", false),
            ("name", "text", false),
            ("parent_id", "integer", true),
        ],
        &["category_id"],
        "Product categories, two levels deep (parent_id NULL for top-level).",
    );
    categories.foreign_keys.push(fk("parent_id", "categories", "category_id"));
    let mut products = table(
        "products",
        &[
            ("product_id", "integer", false),
            ("sku", "text", false),
            ("name", "text", false),
            ("category_id", "integer", false),
            ("price", "numeric(10,2)", false),
            ("stock", "integer", false),
            ("is_available", "boolean", false),
            ("created_at", "timestamp with time zone", false),
        ],
        &["product_id"],
        "Products for sale.",
    );
    products.foreign_keys.push(fk("category_id", "categories", "category_id"));
    let products = commented(
        commented(products, "price", "Current list price in EUR, VAT included."),
        "stock",
        "Units in the warehouse right now.",
    );
    let mut orders = table(
        "orders",
        &[
            ("order_id", "integer", false),
            ("user_id", "integer", false),
            ("shipping_address_id", "integer", false),
            ("status", "text", false),
            ("ordered_at", "timestamp with time zone", false),
        ],
        &["order_id"],
        "Customer orders; the amount is the sum of its order_items.",
    );
    orders.foreign_keys.push(fk("user_id", "users", "user_id"));
    orders.foreign_keys.push(fk("shipping_address_id", "addresses", "address_id"));
    let orders = commented(
        orders,
        "status",
        "pending -> paid -> shipped -> delivered, or cancelled/refunded.",
    );
    let mut items = table(
        "order_items",
        &[
            ("order_id", "integer", false),
            ("line_no", "integer", false),
            ("product_id", "integer", false),
            ("quantity", "integer", false),
            ("unit_price", "numeric(10,2)", false),
        ],
        &["order_id", "line_no"],
        "Lines of an order: product, quantity and the price paid per unit.",
    );
    items.foreign_keys.push(fk("order_id", "orders", "order_id"));
    items.foreign_keys.push(fk("product_id", "products", "product_id"));
    let items = commented(items, "unit_price", "Price per unit at the time of the order (EUR).");
    let mut payments = table(
        "payments",
        &[
            ("payment_id", "integer", false),
            ("order_id", "integer", false),
            ("method", "text", false),
            ("amount", "numeric(12,2)", false),
            ("paid_at", "timestamp with time zone", false),
        ],
        &["payment_id"],
        "One payment per paid order.",
    );
    payments.foreign_keys.push(fk("order_id", "orders", "order_id"));
    let mut shipments = table(
        "shipments",
        &[
            ("shipment_id", "integer", false),
            ("order_id", "integer", false),
            ("carrier", "text", false),
            ("tracking_no", "text", false),
            ("shipped_at", "timestamp with time zone", false),
            ("delivered_at", "timestamp with time zone", true),
        ],
        &["shipment_id"],
        "Shipments of orders; delivered_at is NULL while in transit.",
    );
    shipments.foreign_keys.push(fk("order_id", "orders", "order_id"));
    let mut reviews = table(
        "reviews",
        &[
            ("review_id", "integer", false),
            ("product_id", "integer", false),
            ("user_id", "integer", false),
            ("rating", "smallint", false),
            ("title", "text", false),
            ("created_at", "timestamp with time zone", false),
        ],
        &["review_id"],
        "Product reviews, 1 to 5 stars; at most one per user and product.",
    );
    reviews.foreign_keys.push(fk("product_id", "products", "product_id"));
    reviews.foreign_keys.push(fk("user_id", "users", "user_id"));
    SchemaInfo::new(
        vec![
            countries, users, addresses, categories, products, orders, items, payments, shipments,
            reviews,
        ],
        Some("public"),
    )
}
