//! Text between the database's encoding and the engine's UTF-8.
//!
//! pgrx converts `text` to `&str`/`String` only when the bytes happen to be UTF-8: in a LATIN1
//! (or any other single-byte) database, a non-ASCII question, identifier, comment or statistics
//! value made it panic ("datums converted to &str should be valid UTF-8", XX000), and a `String`
//! returned as `text` was stored as raw UTF-8 bytes, which such a database reads as other
//! characters. Everything that crosses between SQL text and the engine goes through here instead:
//!
//! * arguments: [`Text`] and [`TextArray`] (SQL `text`, `text[]`), converted with PostgreSQL's
//!   own `pg_server_to_any`;
//! * results: [`TextOut`] and [`Jsonb`] (SQL `text`, `jsonb`), converted with `pg_any_to_server`;
//!   a character the database encoding cannot represent is ERROR 22021
//!   (character_not_in_repertoire) naming what held it;
//! * SPI: catalog queries return text as UTF-8 `bytea` (`convert_to(x, 'UTF8')`, [`spi_text`])
//!   and take names as UTF-8 JSON (`bytea`, [`spi_names`] + [`NAMES_PARAM`]).
//!
//! SQL_ASCII databases have no known encoding: PostgreSQL itself treats their bytes as UTF-8
//! when converting to UTF-8 (validated, not converted), and so does this module: UTF-8 text works,
//! other bytes above 127 are ERROR 22021 ("invalid byte sequence for encoding UTF8"). UTF-8
//! databases take the same paths as before (no conversion happens).

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::datum::Datum;
use pgrx::nullable::Nullable;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::{CaughtError, ErrorReport};
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum, PgSqlErrorCode, PgTryBuilder};
use std::ffi::{c_char, c_int, CStr, CString};

/// Whether the database encoding is UTF-8 (no conversion needed either way).
fn database_is_utf8() -> bool {
    // SAFETY: reads a backend-global set at connection start.
    unsafe { pg_sys::GetDatabaseEncoding() == pg_sys::pg_enc::PG_UTF8 as c_int }
}

/// The database encoding's name (`LATIN1`, `SQL_ASCII`, ...).
pub fn database_encoding() -> String {
    // SAFETY: returns a pointer to a static, NUL-terminated name.
    unsafe { CStr::from_ptr(pg_sys::GetDatabaseEncodingName()).to_string_lossy().into_owned() }
}

/// `bytes` in the database encoding as UTF-8. Raises PostgreSQL's ERROR 22021 for bytes that are
/// invalid in it (in SQL_ASCII: not UTF-8).
pub fn from_server(bytes: &[u8]) -> String {
    if database_is_utf8() || bytes.is_ascii() {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let len = c_int::try_from(bytes.len()).unwrap_or(c_int::MAX);
    // SAFETY: pg_server_to_any reads `len` bytes; it returns either its input (no conversion
    // needed, validated) or a palloc'd NUL-terminated copy, which is copied and freed here.
    unsafe {
        let src = bytes.as_ptr() as *const c_char;
        let out = pg_sys::pg_server_to_any(src, len, pg_sys::pg_enc::PG_UTF8 as c_int);
        if std::ptr::eq(out, src) {
            String::from_utf8_lossy(bytes).into_owned()
        } else {
            let s = String::from_utf8_lossy(CStr::from_ptr(out).to_bytes()).into_owned();
            pg_sys::pfree(out.cast());
            s
        }
    }
}

/// `s` in the database encoding, for text handed to PostgreSQL. `what` names the text in the
/// ERROR 22021 raised when a character has no equivalent in the database encoding.
pub fn to_server(s: &str, what: &str) -> Vec<u8> {
    try_to_server(s).unwrap_or_else(|reason| {
        let message = format!("turboinfer: {what} contains a character that the database encoding {} cannot represent", database_encoding());
        ErrorReport::new(PgSqlErrorCode::ERRCODE_CHARACTER_NOT_IN_REPERTOIRE, message, "nl2sql")
            .set_detail(reason)
            .set_hint("Ask in terms the database encoding can represent, or use a UTF8 database.")
            .report(PgLogLevel::ERROR);
        unreachable!("ERROR does not return")
    })
}

/// `s` in the database encoding, or PostgreSQL's reason why a character has no equivalent there.
pub fn try_to_server(s: &str) -> Result<Vec<u8>, String> {
    if database_is_utf8() || s.is_ascii() {
        return Ok(s.as_bytes().to_vec());
    }
    let len = c_int::try_from(s.len()).unwrap_or(c_int::MAX);
    // SAFETY: as in from_server, in the other direction; the conversion's ERROR is caught (it
    // only allocates memory) and turned into ours.
    PgTryBuilder::new(|| unsafe {
        let src = s.as_ptr() as *const c_char;
        let out = pg_sys::pg_any_to_server(src, len, pg_sys::pg_enc::PG_UTF8 as c_int);
        if std::ptr::eq(out, src) {
            Ok(s.as_bytes().to_vec())
        } else {
            let v = CStr::from_ptr(out).to_bytes().to_vec();
            pg_sys::pfree(out.cast());
            Ok(v)
        }
    })
    .catch_when(PgSqlErrorCode::ERRCODE_UNTRANSLATABLE_CHARACTER, |e| match e {
        CaughtError::PostgresError(r) => Err(r.message().to_string()),
        other => other.rethrow(),
    })
    .execute()
}

/// `s` for an ERROR or NOTICE message: in a database whose encoding is neither UTF-8 nor
/// SQL_ASCII, non-ASCII characters are written as `\uXXXX` (the message bytes are taken to be in
/// the database encoding, and a conversion could itself fail while reporting an error).
pub fn for_message(s: String) -> String {
    // SAFETY: reads a backend-global set at connection start.
    let raw_ok = database_is_utf8()
        || unsafe { pg_sys::GetDatabaseEncoding() } == pg_sys::pg_enc::PG_SQL_ASCII as c_int;
    if raw_ok || s.is_ascii() {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{:04X}", c as u32));
        }
    }
    out
}

/// Text of an ERROR that pgrx caught and copied with a lossy UTF-8 conversion (in a database
/// whose encoding is not UTF-8, each non-UTF-8 byte sequence became U+FFFD, which such an
/// encoding cannot represent): U+FFFD written as `?`, so the text can be returned and shown.
/// Unchanged in a UTF-8 database (the copy was exact).
pub fn caught_text(s: &str) -> String {
    if database_is_utf8() {
        s.to_string()
    } else {
        s.replace('\u{FFFD}', "?")
    }
}

/// A `text` argument, converted from the database encoding.
pub struct Text(pub String);

impl FromDatum for Text {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Text> {
        if is_null || datum.is_null() {
            return None;
        }
        // SAFETY: a text datum (the SQL signature says so); detoasting copies when needed.
        unsafe {
            let v = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
            Some(Text(from_server(pgrx::varlena::varlena_to_byte_slice(v))))
        }
    }
}

// SAFETY: unboxes through FromDatum exactly like pgrx's own String arguments.
unsafe impl<'fcx> ArgAbi<'fcx> for Text {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe {
            arg.unbox_arg_using_from_datum()
                .unwrap_or_else(|| panic!("argument {index} must not be null"))
        }
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum().into() }
    }
}

impl_sql_translatable!(Text, "TEXT");

/// A `text[]` argument, converted from the database encoding. A NULL element is ERROR 22004.
pub struct TextArray(pub Vec<String>);

impl FromDatum for TextArray {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<TextArray> {
        if is_null || datum.is_null() {
            return None;
        }
        // SAFETY: a text[] datum (the SQL signature says so); deconstruct_array_builtin knows
        // text's layout and returns `n` datums and null flags in palloc'd arrays.
        unsafe {
            let arr = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) as *mut pg_sys::ArrayType;
            let mut elems: *mut pg_sys::Datum = std::ptr::null_mut();
            let mut nulls: *mut bool = std::ptr::null_mut();
            let mut n: c_int = 0;
            pg_sys::deconstruct_array_builtin(arr, pg_sys::TEXTOID, &mut elems, &mut nulls, &mut n);
            let n = usize::try_from(n).unwrap_or(0);
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                if *nulls.add(i) {
                    ErrorReport::new(
                        PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                        "turboinfer: the array must not contain NULL",
                        "nl2sql",
                    )
                    .set_detail(format!("Element {} is NULL.", i + 1))
                    .report(PgLogLevel::ERROR);
                }
                let v = pg_sys::pg_detoast_datum_packed((*elems.add(i)).cast_mut_ptr());
                out.push(from_server(pgrx::varlena::varlena_to_byte_slice(v)));
            }
            Some(TextArray(out))
        }
    }
}

// SAFETY: as for Text.
unsafe impl<'fcx> ArgAbi<'fcx> for TextArray {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe {
            arg.unbox_arg_using_from_datum()
                .unwrap_or_else(|| panic!("argument {index} must not be null"))
        }
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum().into() }
    }
}

impl_sql_translatable!(TextArray, "TEXT[]");

/// `BoxRet` for a result type whose datum is its `IntoDatum` (SQL NULL for `None`).
macro_rules! box_ret_via_into_datum {
    ($t:ty) => {
        // SAFETY: returns the datum built by into_datum, like pgrx's own IntoDatum results.
        unsafe impl BoxRet for $t {
            unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> Datum<'fcx> {
                match self.into_datum() {
                    Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
                    None => fcinfo.return_null(),
                }
            }
        }
    };
}

/// A `text` result, converted to the database encoding; `.1` names it for the 22021 ERROR.
pub struct TextOut(pub String, pub &'static str);

impl IntoDatum for TextOut {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        let bytes = to_server(&self.0, self.1);
        let len = c_int::try_from(bytes.len()).unwrap_or(c_int::MAX);
        // SAFETY: copies `len` bytes into a new palloc'd text.
        Some(pg_sys::Datum::from(unsafe {
            pg_sys::cstring_to_text_with_len(bytes.as_ptr() as *const c_char, len)
        }))
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::TEXTOID
    }
}

box_ret_via_into_datum!(TextOut);

impl_sql_translatable!(TextOut, "TEXT");

/// A `jsonb` result: the JSON text converted to the database encoding, then `jsonb_in`.
pub struct Jsonb(pub serde_json::Value);

impl IntoDatum for Jsonb {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        // serde_json escapes control characters, so the text has no NUL byte.
        let text = serde_json::to_string(&self.0).unwrap_or_else(|_| "null".into());
        jsonb_datum(&text, "the JSON report")
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

box_ret_via_into_datum!(Jsonb);

impl_sql_translatable!(Jsonb, "jsonb");

/// A jsonb datum from JSON text (UTF-8), converted to the database encoding (`what` names it in
/// a conversion error), then `jsonb_in`.
fn jsonb_datum(text: &str, what: &str) -> Option<pg_sys::Datum> {
    let c = CString::new(to_server(text, what)).unwrap_or_default();
    // SAFETY: jsonb_in copies its NUL-terminated input.
    unsafe {
        pgrx::fcinfo::direct_function_call_as_datum(
            pg_sys::jsonb_in,
            &[Some(pg_sys::Datum::from(c.as_ptr()))],
        )
    }
}

/// A `jsonb` result from JSON text (UTF-8, e.g. a row of `readonly::run_read_only`): converted
/// to the database encoding, then `jsonb_in` (lossless: numbers keep their digits).
pub struct JsonbText(pub String);

impl IntoDatum for JsonbText {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        jsonb_datum(&self.0, "a result row")
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

box_ret_via_into_datum!(JsonbText);

impl_sql_translatable!(JsonbText, "jsonb");

/// A text column selected as `convert_to(x, 'UTF8')`, as a `String`.
pub fn spi_text(v: Option<Vec<u8>>) -> Option<String> {
    v.map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// A `text[]` column selected as `convert_to(to_json(x)::text, 'UTF8')`, as strings (NULL
/// elements kept as `None`).
pub fn spi_text_array(v: Option<Vec<u8>>) -> Option<Vec<Option<String>>> {
    v.and_then(|b| serde_json::from_slice(&b).ok())
}

/// Names passed to a catalog query as one `bytea` parameter (UTF-8 JSON), turned back into a
/// `text[]` in the database encoding by [`NAMES_PARAM`] (with `$1` as the parameter).
pub fn spi_names(names: &[String]) -> Vec<u8> {
    serde_json::to_vec(names).unwrap_or_else(|_| b"[]".to_vec())
}

/// The SQL of parameter `$1` built by [`spi_names`] as a `text[]`.
pub const NAMES_PARAM: &str = "ARRAY(SELECT pg_catalog.json_array_elements_text(pg_catalog.convert_from($1, 'UTF8')::pg_catalog.json))";
