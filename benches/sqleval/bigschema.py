"""Distractor tables for sql-eval's big-schema mode (benches/sqleval/run load --big N).

Generic business/IT schemas (hr, inventory, logistics, ...) with realistic table and column
names, keys, some foreign keys, comments on a share of them and a few generated rows, as one SQL
text: `generate(n, seed)` is deterministic (same n and seed -> the same text). Nothing here is
shaped after the benchmark's databases or questions: the vocabulary is a generic catalog of
what operational databases hold (shared words such as customer, account, amount, status or date
are there because real schemas have them). Python 3 standard library only.

Also `gold_tables(sql, tables)`: the tables of `tables` a query names (a simple tokenizer).
"""

import random
import re

SEED = 20261128
BATCH_TABLES = 200  # tables per transaction: one transaction for 5,000 tables would exceed the lock table

# Schema -> entity nouns (singular; table names pluralize them or add a modifier) and a few
# domain columns (name, type kind).
DOMAINS = {
    "hr": (["employee", "department", "position", "payroll_run", "payslip", "leave_request", "timesheet", "benefit_plan",
            "training_course", "performance_review", "job_posting", "candidate", "interview", "onboarding_task",
            "salary_band", "overtime_entry", "expense_claim", "org_unit", "contract", "skill", "shift"],
           [("employee_number", "code"), ("job_title", "name"), ("hire_date", "date"), ("gross_salary", "money"),
            ("manager_id", "int"), ("fte", "ratio"), ("grade", "code"), ("cost_center", "code")]),
    "inventory": (["item", "stock_level", "warehouse", "warehouse_bin", "stock_movement", "cycle_count", "lot",
                   "serial_number", "reorder_rule", "unit_of_measure", "item_category", "adjustment", "reservation",
                   "kit_component", "supplier_item", "valuation", "transfer_order", "pick_list"],
                  [("sku", "code"), ("on_hand_qty", "qty"), ("reorder_point", "qty"), ("bin_code", "code"),
                   ("unit_cost", "money"), ("lot_number", "code"), ("expiry_date", "date")]),
    "logistics": (["shipment", "shipment_event", "carrier", "route", "route_stop", "vehicle", "driver", "delivery",
                   "parcel", "freight_rate", "dock_appointment", "manifest", "customs_declaration", "tracking_scan",
                   "depot", "fuel_log", "pallet", "load_plan"],
                  [("tracking_number", "code"), ("weight_kg", "float"), ("eta", "ts"), ("origin_code", "code"),
                   ("destination_code", "code"), ("distance_km", "float"), ("freight_cost", "money")]),
    "marketing": (["campaign", "ad_group", "creative", "audience_segment", "lead", "email_send", "landing_page",
                   "utm_link", "impression_daily", "click", "conversion", "newsletter", "promo_code", "channel",
                   "budget_allocation", "survey", "survey_response", "event_registration"],
                  [("channel_name", "name"), ("spend", "money"), ("clicks", "int"), ("impressions", "int"),
                   ("ctr", "ratio"), ("launch_date", "date"), ("target_region", "name")]),
    "support": (["ticket", "ticket_comment", "agent", "queue", "sla_policy", "escalation", "knowledge_article",
                 "satisfaction_survey", "macro", "chat_session", "call_log", "ticket_tag", "support_team", "incident",
                 "problem_record", "change_request", "on_call_rotation"],
                [("priority", "status"), ("severity", "status"), ("opened_at", "ts"), ("resolved_at", "ts"),
                 ("first_response_min", "int"), ("csat_score", "small"), ("channel", "status")]),
    "telemetry": (["device", "sensor", "sensor_reading", "heartbeat", "metric_sample", "alert_rule", "alert",
                   "firmware_version", "gateway", "log_line", "trace_span", "uptime_check", "deployment",
                   "host", "container", "error_event", "page_view"],
                  [("device_serial", "code"), ("reading_value", "float"), ("recorded_at", "ts"), ("unit", "code"),
                   ("host_name", "name"), ("latency_ms", "float"), ("cpu_pct", "ratio")]),
    "billing": (["invoice", "invoice_line", "payment", "refund", "credit_note", "subscription", "plan", "price_tier",
                 "tax_rate", "billing_account", "dunning_step", "usage_record", "discount", "payment_method",
                 "ledger_entry", "statement", "chargeback", "payout"],
                [("invoice_number", "code"), ("amount_due", "money"), ("amount_paid", "money"), ("currency", "currency"),
                 ("due_date", "date"), ("tax_amount", "money"), ("billing_period", "code")]),
    "crm": (["account", "contact", "opportunity", "deal_stage", "activity", "meeting", "note", "customer",
             "customer_segment", "territory", "quote", "quote_line", "partner", "lead_source", "pipeline",
             "account_team", "churn_signal", "loyalty_member"],
            [("account_name", "name"), ("industry", "name"), ("annual_revenue", "money"), ("stage", "status"),
             ("close_date", "date"), ("probability", "ratio"), ("owner_email", "email")]),
    "manufacturing": (["work_order", "bill_of_material", "bom_line", "machine", "production_run", "routing_step",
                       "quality_check", "defect", "downtime_event", "tooling", "work_center", "batch_record",
                       "scrap_entry", "maintenance_job", "spare_part", "shift_report", "yield_summary"],
                      [("batch_code", "code"), ("planned_qty", "qty"), ("produced_qty", "qty"), ("scrap_qty", "qty"),
                       ("cycle_time_s", "float"), ("line_code", "code"), ("oee", "ratio")]),
    "procurement": (["purchase_order", "po_line", "supplier", "supplier_contact", "rfq", "rfq_response", "requisition",
                     "goods_receipt", "approval_step", "contract", "catalog_item", "spend_category", "vendor_rating",
                     "blanket_order", "payment_term"],
                    [("po_number", "code"), ("supplier_code", "code"), ("order_date", "date"), ("net_amount", "money"),
                     ("lead_time_days", "int"), ("incoterm", "code"), ("buyer_name", "name")]),
    "education": (["student", "course", "course_section", "enrollment", "instructor", "grade", "assignment",
                   "submission", "classroom", "semester", "attendance", "exam", "exam_result", "scholarship",
                   "program", "advisor_meeting", "transcript"],
                  [("student_number", "code"), ("credits", "small"), ("gpa", "float"), ("term_code", "code"),
                   ("enrolled_on", "date"), ("score", "float"), ("room_code", "code")]),
    "healthcare_ops": (["ward", "bed", "bed_assignment", "staff_roster", "appointment_slot", "referral", "lab_order",
                        "lab_result", "supply_request", "equipment", "sterilization_cycle", "admission", "discharge",
                        "clinic", "waiting_list", "transport_request", "on_call_shift"],
                       [("ward_code", "code"), ("admitted_at", "ts"), ("discharged_at", "ts"), ("bed_count", "small"),
                        ("triage_level", "small"), ("requested_by", "name"), ("room_number", "code")]),
    "real_estate": (["property", "unit", "lease", "tenant", "landlord", "rent_payment", "maintenance_request",
                     "inspection", "listing", "showing", "offer", "building", "parking_space", "utility_bill",
                     "service_charge", "valuation"],
                    [("address_line", "text"), ("floor_area_m2", "float"), ("monthly_rent", "money"),
                     ("lease_start", "date"), ("lease_end", "date"), ("bedrooms", "small"), ("postcode", "code")]),
    "travel": (["booking", "itinerary", "itinerary_leg", "flight", "hotel", "hotel_room", "traveler", "fare",
                "seat_assignment", "loyalty_account", "visa_application", "trip_expense", "tour", "tour_departure",
                "car_rental", "cancellation"],
               [("pnr", "code"), ("depart_at", "ts"), ("arrive_at", "ts"), ("fare_amount", "money"),
                ("cabin_class", "status"), ("nights", "small"), ("city_code", "code")]),
    "media": (["article", "author", "section", "video", "episode", "series", "playlist", "playlist_item", "asset",
               "license", "rights_window", "comment", "view_stat", "subscriber", "podcast", "broadcast_slot",
               "editorial_tag"],
              [("headline", "name"), ("published_at", "ts"), ("duration_s", "int"), ("word_count", "int"),
               ("language", "code"), ("views", "int"), ("rating", "float")]),
    "legal": (["matter", "case_file", "filing", "hearing", "court", "counsel", "client", "billable_entry",
               "document", "clause", "contract_review", "deadline", "retainer", "conflict_check", "evidence_item",
               "settlement"],
              [("docket_number", "code"), ("filed_on", "date"), ("jurisdiction", "name"), ("hours", "float"),
               ("hourly_rate", "money"), ("practice_area", "name"), ("outcome", "status")]),
    "energy": (["meter", "meter_reading", "substation", "feeder", "outage", "generation_unit", "tariff",
                "grid_node", "load_forecast", "maintenance_window", "solar_site", "turbine", "fuel_delivery",
                "emission_report", "demand_response_event", "connection_request"],
               [("meter_number", "code"), ("kwh", "float"), ("peak_kw", "float"), ("read_at", "ts"),
                ("voltage_kv", "float"), ("capacity_mw", "float"), ("tariff_code", "code")]),
    "agriculture": (["farm", "field", "crop", "planting", "harvest", "soil_sample", "irrigation_event", "livestock",
                     "herd", "feed_ration", "vet_visit", "fertilizer_application", "weather_observation", "silo",
                     "equipment_hour", "grain_contract"],
                    [("field_code", "code"), ("area_ha", "float"), ("yield_t", "float"), ("planted_on", "date"),
                     ("variety", "name"), ("moisture_pct", "ratio"), ("ph", "float")]),
    "sports": (["team", "player", "match", "match_event", "season", "league", "venue", "ticket_sale", "roster",
                "injury", "training_session", "coach", "standing", "transfer", "referee", "fixture"],
               [("jersey_number", "small"), ("goals", "small"), ("kickoff_at", "ts"), ("attendance", "int"),
                ("position_code", "code"), ("home_score", "small"), ("away_score", "small")]),
    "gov": (["permit", "permit_application", "inspection", "license_holder", "citizen_request", "property_tax",
             "parcel", "zoning_case", "council_meeting", "agenda_item", "grant_award", "fine", "election_district",
             "public_record_request", "budget_line", "facility"],
            [("case_number", "code"), ("ward", "code"), ("submitted_on", "date"), ("fee", "money"),
             ("decision", "status"), ("assessed_value", "money"), ("district_code", "code")]),
}

# Table name modifiers: a plain plural, or the singular with one of these.
SUFFIXES = ["events", "history", "log", "audit", "snapshots", "lines", "items", "types", "statuses", "assignments",
            "summaries", "daily", "monthly", "archive", "details", "notes", "attachments", "metrics", "links",
            "versions", "approvals", "schedules", "exceptions", "costs", "totals", "targets", "mappings", "queue"]
PREFIXES = ["stg_", "legacy_", "tmp_", "dim_", "fact_", "rpt_", "ext_", "old_", "raw_", "agg_"]
YEARS = ["2019", "2020", "2021", "2022", "2023", "2024"]

# Generic columns: (name, kind).
GENERIC = [
    ("name", "name"), ("code", "code"), ("status", "status"), ("description", "text"), ("notes", "text"),
    ("created_at", "ts"), ("updated_at", "ts"), ("amount", "money"), ("quantity", "qty"), ("unit_price", "money"),
    ("currency", "currency"), ("start_date", "date"), ("end_date", "date"), ("is_active", "bool"), ("email", "email"),
    ("phone", "phone"), ("city", "name"), ("country", "country"), ("region", "name"), ("category", "status"),
    ("rating", "small"), ("total", "money"), ("external_ref", "code"), ("comment", "text"), ("type", "status"),
    ("effective_date", "date"), ("source_system", "code"), ("version", "small"), ("reference_no", "code"),
    ("approved", "bool"), ("approved_by", "name"), ("closed_at", "ts"), ("percent_complete", "ratio"),
    ("label", "name"), ("sequence_no", "int"), ("remarks", "text"), ("balance", "money"), ("valid_from", "date"),
    ("valid_to", "date"), ("owner_name", "name"), ("last_seen_at", "ts"), ("flag", "bool"), ("batch_id", "int"),
]

TYPES = {
    "int": ["integer", "bigint"], "small": ["smallint", "integer"], "qty": ["integer", "numeric(12,3)"],
    "money": ["numeric(12,2)", "numeric(14,2)", "numeric(10,2)"], "float": ["double precision", "real", "numeric(10,3)"],
    "ratio": ["numeric(5,2)", "real"], "name": ["text", "varchar(100)", "varchar(80)"], "code": ["varchar(20)", "text", "char(8)"],
    "status": ["varchar(20)", "text"], "text": ["text", "varchar(500)"], "date": ["date"],
    "ts": ["timestamp", "timestamptz", "timestamp(0)"], "bool": ["boolean"], "email": ["varchar(255)", "text"],
    "phone": ["varchar(30)"], "currency": ["char(3)"], "country": ["char(2)", "varchar(60)"],
}

WORDS = ["alpha", "bravo", "delta", "north", "south", "east", "west", "central", "prime", "basic", "premium", "standard",
         "legacy", "pilot", "phase", "group", "block", "unit", "zone", "sector", "line", "core", "edge", "hub"]
PEOPLE = ["Avery Stone", "Jordan Reyes", "Priya Natarajan", "Mateo Silva", "Hana Kobayashi", "Lena Fischer",
          "Omar Haddad", "Chloe Martin", "Kwame Mensah", "Sofia Rossi", "Ivan Petrov", "Mei Lin", "Noah Becker",
          "Amara Okafor", "Lucas Moreau", "Ingrid Dahl", "Tariq Aziz", "Elena Popescu", "Diego Ramos", "Yuki Sato"]
PLACES = ["Riverton", "Lakeside", "Fairview", "Greenville", "Oakridge", "Maplewood", "Brookfield", "Hillcrest",
          "Westport", "Eastbourne", "Northgate", "Southfield", "Cedar Falls", "Pinehurst", "Harborview"]
STATUSES = ["open", "closed", "pending", "active", "inactive", "on_hold", "cancelled", "draft", "approved", "rejected",
            "in_progress", "done", "new", "archived"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF", "SEK", "INR", "BRL"]
COUNTRIES = ["US", "DE", "FR", "GB", "JP", "CA", "AU", "IN", "BR", "SE", "NL", "ES"]

TABLE_COMMENTS = [
    "{What}.", "One row per {what_one}.", "{What}, maintained by the {schema} team.", "Stores {what}.",
    "{What} (loaded nightly from the {source} system).", "Holds {what}; see the {schema} runbook.",
    "{What}. Do not edit by hand.", "Reference data: {what}.", "{What} as of the last sync.",
    "Staging copy of {what}.", "Denormalized {what} for reporting.", "Tracks {what}.",
]
COLUMN_COMMENTS = [
    "{Col}.", "The {col}.", "{Col} of the record.", "{Col} (may be null).", "{Col}, as entered by the user.",
    "{Col} in the source system.", "Set by the application: {col}.", "{Col}; see data dictionary.",
]
SOURCES = ["ERP", "legacy", "vendor", "CSV import", "API", "mainframe", "warehouse", "partner feed"]


def plural(w):
    if re.search(r"(s|x|ch|sh)$", w):
        return w + "es"
    if re.search(r"[^aeiou]y$", w):
        return w[:-1] + "ies"
    return w + "s"


def row_name(table):
    """What one row of `table` is, for key column names: prefix and year dropped, last word singular
    (shipment_events -> shipment_event, stg_payroll_runs_2023 -> payroll_run)."""
    t = table
    for p in PREFIXES:
        if t.startswith(p):
            t = t[len(p):]
    t = re.sub(r"_(\d{4}|p\d{4})$", "", t)
    if t.endswith("ies"):
        return t[:-3] + "y"
    if re.search(r"(ses|xes|ches|shes)$", t):
        return t[:-2]
    if t.endswith("s") and not t.endswith("ss"):
        return t[:-1]
    return t


def words(name):
    return name.replace("_", " ")


def sql_str(s):
    return "'" + s.replace("'", "''") + "'"


def table_names(rng, entities, n):
    """n distinct, varied table names for one schema."""
    out, seen = [], set()
    bases = [plural(e) for e in entities]
    # Plain plurals first (the core tables), then variants.
    for b in bases:
        if len(out) < n:
            out.append(b)
            seen.add(b)
    tries = 0
    while len(out) < n and tries < n * 200:
        tries += 1
        e = rng.choice(entities)
        r = rng.random()
        if r < 0.55:
            name = f"{e}_{rng.choice(SUFFIXES)}"
        elif r < 0.7:
            name = f"{plural(e)}_{rng.choice(YEARS)}"
        elif r < 0.85:
            name = f"{rng.choice(PREFIXES)}{rng.choice([plural(e), e + '_' + rng.choice(SUFFIXES)])}"
        else:
            other = rng.choice(entities)
            if other == e:
                continue
            name = f"{e}_{plural(other)}"
        if len(name) > 60 or name in seen:
            continue
        seen.add(name)
        out.append(name)
    i = 0
    while len(out) < n:  # vocabulary exhausted (very large n): numbered partitions
        i += 1
        name = f"{bases[i % len(bases)]}_p{i:04d}"
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


def value(rng, kind, typ, row):
    if kind in ("int",):
        return str(rng.randint(1, 100000))
    if kind == "small":
        return str(rng.randint(0, 10))
    if kind == "qty":
        return str(rng.randint(0, 500))
    if kind == "money":
        return f"{rng.randint(0, 9999999) / 100:.2f}"
    if kind == "float":
        return f"{rng.uniform(0, 1000):.3f}"
    if kind == "ratio":
        return f"{rng.uniform(0, 100):.2f}"
    if kind == "date":
        return f"DATE '{rng.randint(2018, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}'"
    if kind == "ts":
        return (f"TIMESTAMP '{rng.randint(2018, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}'")
    if kind == "bool":
        return rng.choice(["true", "false"])
    if kind == "status":
        return sql_str(rng.choice(STATUSES))
    if kind == "currency":
        return sql_str(rng.choice(CURRENCIES))
    if kind == "country":
        return sql_str(rng.choice(COUNTRIES))
    if kind == "email":
        p = rng.choice(PEOPLE).lower().replace(" ", ".")
        return sql_str(f"{p}{row}@example.org")
    if kind == "phone":
        return sql_str(f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}")
    if kind == "code":
        m = re.search(r"\((\d+)\)", typ)
        width = int(m.group(1)) if m else 10
        c = f"{rng.choice('ABCDEFGHKMNPRSTVWXZ')}{rng.choice('ABCDEFGHKMNPRSTVWXZ')}-{rng.randint(100, 99999)}"
        return sql_str(c[:width])
    if kind == "name":
        return sql_str(rng.choice(PEOPLE if rng.random() < 0.5 else PLACES))
    # text
    return sql_str(" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))))


def generate(n=5000, seed=SEED):
    """(sql text, info): n distractor tables over the schemas of DOMAINS, deterministic in (n, seed).
    info: {"schemas": [...], "tables": n, "columns": total, "foreign_keys": k, "table_comments": k,
    "column_comments": k, "rows": k}."""
    rng = random.Random(seed)
    schemas = list(DOMAINS)
    per = [n // len(schemas) + (1 if i < n % len(schemas) else 0) for i in range(len(schemas))]
    stmts = []  # (sql) per table, batched below
    info = {"schemas": schemas, "tables": 0, "columns": 0, "foreign_keys": 0, "table_comments": 0,
            "column_comments": 0, "rows": 0}
    for schema, count in zip(schemas, per):
        entities, domain_cols = DOMAINS[schema]
        stmts.append(f"CREATE SCHEMA {schema};")
        made = []  # (table, pk column, row count)
        for t in table_names(rng, entities, count):
            one = row_name(t)
            pk = rng.choice(["id", f"{one}_id"])
            ncols = rng.randint(3, 15)
            cols = [(pk, rng.choice(["integer", "bigint"]), "pk", False)]
            used = {pk}
            fks = []
            if made and ncols > 3 and rng.random() < 0.45:
                for _ in range(rng.randint(1, 2)):
                    ref, ref_pk, ref_rows = rng.choice(made[-40:])
                    cname = f"{row_name(ref)}_id"
                    if cname in used or len(cname) > 60:
                        continue
                    used.add(cname)
                    cols.append((cname, "bigint", ("fk", ref, ref_pk, ref_rows), False))
                    fks.append((cname, ref, ref_pk))
            pool = domain_cols * 2 + GENERIC
            while len(cols) < ncols:
                cname, kind = rng.choice(pool)
                if cname in used:
                    if len(used) >= len({c for c, _ in pool}) + 3:
                        break
                    continue
                used.add(cname)
                cols.append((cname, rng.choice(TYPES[kind]), kind, kind in ("name", "status") and rng.random() < 0.3))
            lines = []
            for cname, typ, kind, notnull in cols:
                extra = " PRIMARY KEY" if kind == "pk" else (" NOT NULL" if notnull else "")
                lines.append(f"  {cname} {typ}{extra}")
            for cname, ref, ref_pk in fks:
                lines.append(f"  FOREIGN KEY ({cname}) REFERENCES {schema}.{ref} ({ref_pk})")
            stmts.append(f"CREATE TABLE {schema}.{t} (\n" + ",\n".join(lines) + "\n);")
            info["foreign_keys"] += len(fks)
            info["columns"] += len(cols)
            what = words(t)
            if rng.random() < 0.6:
                tmpl = rng.choice(TABLE_COMMENTS)
                c = tmpl.format(What=what[0].upper() + what[1:], what=what, what_one=words(one), schema=schema.replace("_", " "),
                                source=rng.choice(SOURCES))
                stmts.append(f"COMMENT ON TABLE {schema}.{t} IS {sql_str(c)};")
                info["table_comments"] += 1
                for cname, _, kind, _ in cols:
                    if kind != "pk" and rng.random() < 0.4:
                        cw = words(cname)
                        cc = rng.choice(COLUMN_COMMENTS).format(Col=cw[0].upper() + cw[1:], col=cw)
                        stmts.append(f"COMMENT ON COLUMN {schema}.{t}.{cname} IS {sql_str(cc)};")
                        info["column_comments"] += 1
            nrows = rng.choice([0, 0] + list(range(1, 21)))
            if nrows:
                vals = []
                for r in range(1, nrows + 1):
                    row = []
                    for cname, typ, kind, notnull in cols:
                        if kind == "pk":
                            row.append(str(r))
                        elif isinstance(kind, tuple):
                            ref_rows = kind[3]
                            row.append(str(rng.randint(1, ref_rows)) if ref_rows and rng.random() < 0.9 else "NULL")
                        elif not notnull and rng.random() < 0.08:
                            row.append("NULL")
                        else:
                            row.append(value(rng, kind, typ, r))
                    vals.append("(" + ", ".join(row) + ")")
                stmts.append(f"INSERT INTO {schema}.{t} ({', '.join(c[0] for c in cols)}) VALUES\n  " + ",\n  ".join(vals) + ";")
                info["rows"] += nrows
            made.append((t, pk, nrows))
            info["tables"] += 1
    # Transactions of BATCH_TABLES tables (the lock table holds a few thousand locks).
    out, k = ["BEGIN;"], 0
    for s in stmts:
        out.append(s)
        if s.startswith("CREATE TABLE"):
            k += 1
            if k % BATCH_TABLES == 0:
                out.append("COMMIT;\nBEGIN;")
    out.append("COMMIT;")
    return "\n".join(out) + "\n", info


IDENT = re.compile(r'(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)(?:\s*\.\s*(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*))*')


def _part(p):
    p = p.strip()
    return p[1:-1].replace('""', '"') if p.startswith('"') else p.lower()


def gold_tables(sql, tables):
    """The names of `tables` (lower case) that `sql` uses: identifiers outside string literals and
    comments, not preceded by AS (an alias) nor followed by `(` (a function); `table`,
    `schema.table` and `table.column` count as `table`. A column named like a table would count
    too: good enough for the benchmark's queries (a simple tokenizer, as documented)."""
    want = {t.lower() for t in tables}
    s = re.sub(r"'(?:[^']|'')*'", " ", sql)
    s = re.sub(r"--[^\n]*|/\*.*?\*/", " ", s, flags=re.S)
    found, prev = [], ""
    for m in IDENT.finditer(s):
        parts = [_part(p) for p in re.findall(r'"(?:[^"]|"")+"|[^.\s]+', m.group(0))]
        after = s[m.end():].lstrip()
        if prev == "as" or after.startswith("("):
            prev = parts[-1]
            continue
        if len(parts) == 1:
            cand = parts[0]
        elif len(parts) == 2:
            cand = parts[1] if parts[1] in want else parts[0]
        else:
            cand = parts[-2]
        if cand in want and cand not in found:
            found.append(cand)
        prev = parts[-1]
    return found
