//! One renderer for every show verb: tables for people, `-p -o` parsable
//! lines for scripts, and `--json`.
//!
//! A show verb builds a [`Table`]: its column names (uppercase, as headers)
//! and rows of (column, [`Cell`]) pairs. A cell knows how it reads in each
//! form, so `SPEED` can be a number in JSON and text elsewhere, and an empty
//! `OVER` can be `--` for people but `[]` in JSON.

use serde_json::{Map, Value};

use crate::error::CliError;

/// One value of one row, in each output form. Most cells read the same in
/// every form, so only what differs is stored: a table of 10,000 links
/// builds 60,000 cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Parsable lines, and tables unless `table` says otherwise.
    text: String,
    /// Tables, when not `text`.
    table: Option<String>,
    /// JSON, when not the string `text`.
    json: Option<Value>,
}

impl Cell {
    /// Text, the same in every form.
    pub fn text(s: impl Into<String>) -> Self {
        Self { text: s.into(), table: None, json: None }
    }

    /// Text, shown as `--` in tables and parsable output when empty (JSON
    /// keeps the empty string).
    pub fn text_or_dash(s: impl Into<String>) -> Self {
        let s = s.into();
        if s.is_empty() {
            Self { text: "--".to_owned(), table: None, json: Some(Value::String(s)) }
        } else {
            Self::text(s)
        }
    }

    /// A number: decimal text, a JSON number.
    pub fn num(n: impl Into<u64>) -> Self {
        let n = n.into();
        Self { text: n.to_string(), table: None, json: Some(Value::from(n)) }
    }

    /// A list: space-separated (`--` when empty), a JSON array of strings.
    pub fn list(items: &[String]) -> Self {
        let shown = if items.is_empty() { "--".to_owned() } else { items.join(" ") };
        Self { text: shown, table: None, json: Some(Value::from(items.to_vec())) }
    }

    /// Overrides the table form only.
    pub fn table_as(mut self, s: impl Into<String>) -> Self {
        self.table = Some(s.into());
        self
    }

    /// Overrides the JSON form only.
    pub fn json_as(mut self, v: impl Into<Value>) -> Self {
        self.json = Some(v.into());
        self
    }

    fn table(&self) -> &str {
        self.table.as_deref().unwrap_or(&self.text)
    }

    fn json(&self) -> Value {
        self.json.clone().unwrap_or_else(|| Value::String(self.text.clone()))
    }
}

/// One row: cells by column, JSON-only extras, and whether it appears in
/// JSON at all (summary rows such as `show-aggr -x`'s aggregation line are
/// for people and scripts reading lines, not for JSON).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    cells: Vec<(&'static str, Cell)>,
    extra: Vec<(&'static str, Value)>,
    not_json: bool,
}

impl Row {
    /// An empty row.
    pub fn new() -> Self {
        Self { cells: Vec::with_capacity(8), ..Self::default() }
    }

    /// Adds the cell of `column` (as named in [`Table::columns`]).
    pub fn cell(mut self, column: &'static str, cell: Cell) -> Self {
        self.cells.push((column, cell));
        self
    }

    /// Adds several cells, in order.
    pub fn cells<const N: usize>(mut self, cells: [(&'static str, Cell); N]) -> Self {
        self.cells.extend(cells);
        self
    }

    /// Adds a JSON-only key, shown when no `-o` narrows the output.
    pub fn extra(mut self, key: &'static str, v: impl Into<Value>) -> Self {
        self.extra.push((key, v.into()));
        self
    }

    /// Leaves this row out of JSON output.
    pub fn not_json(mut self) -> Self {
        self.not_json = true;
        self
    }

    /// The text of the cell of `column`, if the row has one.
    pub fn text_of(&self, column: &str) -> Option<&str> {
        self.get(column).map(|c| c.text.as_str())
    }

    fn get(&self, column: &str) -> Option<&Cell> {
        self.cells.iter().find(|(c, _)| *c == column).map(|(_, v)| v)
    }
}

/// What a show verb prints: columns in their default order, and rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Column names, uppercase.
    pub columns: &'static [&'static str],
    /// Rows; each has a cell for every column.
    pub rows: Vec<Row>,
}

/// How to print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Format {
    /// `--json`.
    pub json: bool,
    /// `-p` (or `-c` for `show-linkprop`).
    pub parsable: bool,
    /// The option that asked for parsable output, for the error when `-o`
    /// is missing: `-p` or `-c`.
    pub parsable_flag: &'static str,
    /// `-o FIELD,...`.
    pub fields: Option<String>,
    /// With `json`: the array on one line (JSON Lines, a table an
    /// interval), not pretty-printed.
    pub lines: bool,
}

/// Picks the columns `-o` names (case-insensitive; `all` for every one) or,
/// without `-o`, all of them. An unknown or empty field name is an
/// `InvalidArgument` error naming it.
pub fn select(
    columns: &[&'static str],
    fields: Option<&str>,
) -> Result<Vec<&'static str>, CliError> {
    let Some(spec) = fields else {
        return Ok(columns.to_vec());
    };
    if spec.eq_ignore_ascii_case("all") {
        return Ok(columns.to_vec());
    }
    let valid = || columns.iter().map(|c| c.to_ascii_lowercase()).collect::<Vec<_>>().join(", ");
    spec.split(',')
        .map(|f| {
            if f.is_empty() {
                return Err(CliError::invalid_argument(format!(
                    "empty field name in -o {spec:?} (fields: {})",
                    valid()
                )));
            }
            columns.iter().copied().find(|c| c.eq_ignore_ascii_case(f)).ok_or_else(|| {
                CliError::invalid_argument(format!("unknown field {f:?} (fields: {})", valid()))
            })
        })
        .collect()
}

/// dladm's parsable escaping, applied when more than one field is printed:
/// `\` becomes `\\` and `:` becomes `\:`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\\' || c == ':' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Renders `table` as `fmt` asks, ending with a newline unless empty.
pub fn render(table: &Table, fmt: &Format) -> Result<String, CliError> {
    if fmt.parsable && fmt.fields.is_none() {
        return Err(CliError::invalid_argument(format!("{} requires -o", fmt.parsable_flag)));
    }
    let cols = select(table.columns, fmt.fields.as_deref())?;
    // Borrowed, not copied: a table of 10,000 links has 60,000 cells.
    let missing = Cell::text("--");
    fn cell_of<'a>(row: &'a Row, c: &str, missing: &'a Cell) -> &'a Cell {
        debug_assert!(row.get(c).is_some(), "row lacks column {c}");
        row.get(c).unwrap_or(missing)
    }
    let cell = |row, c| cell_of(row, c, &missing);
    if fmt.json {
        let objs: Vec<Value> = table
            .rows
            .iter()
            .filter(|r| !r.not_json)
            .map(|r| {
                let mut m = Map::new();
                for c in &cols {
                    m.insert(c.to_ascii_lowercase(), cell(r, c).json());
                }
                if fmt.fields.is_none() {
                    for (k, v) in &r.extra {
                        m.insert((*k).to_owned(), v.clone());
                    }
                }
                Value::Object(m)
            })
            .collect();
        let objs = Value::Array(objs);
        let mut s = if fmt.lines {
            objs.to_string()
        } else {
            serde_json::to_string_pretty(&objs).expect("JSON values print")
        };
        s.push('\n');
        return Ok(s);
    }
    let mut out = String::new();
    if fmt.parsable {
        for r in &table.rows {
            let fields: Vec<String> = cols
                .iter()
                .map(|c| {
                    let v = &cell(r, c).text;
                    if cols.len() > 1 { escape(v) } else { v.clone() }
                })
                .collect();
            out.push_str(&fields.join(":"));
            out.push('\n');
        }
        return Ok(out);
    }
    if table.rows.is_empty() {
        return Ok(out);
    }
    let grid: Vec<Vec<&str>> =
        table.rows.iter().map(|r| cols.iter().map(|c| cell(r, c).table()).collect()).collect();
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| grid.iter().map(|r| r[i].chars().count()).chain([c.len()]).max().unwrap_or(0))
        .collect();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, c) in cells.enumerate() {
            if i > 0 {
                l.push(' ');
            }
            l.push_str(c);
            let pad = widths[i].saturating_sub(c.chars().count());
            l.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut cols.iter().copied());
    for r in &grid {
        line(&mut r.iter().copied());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: &[&str] = &["LINK", "CLASS", "MTU", "OVER"];

    fn table() -> Table {
        Table {
            columns: COLS,
            rows: vec![
                Row::new()
                    .cell("LINK", Cell::text("i40e0"))
                    .cell("CLASS", Cell::text("phys"))
                    .cell("MTU", Cell::num(1500u32))
                    .cell("OVER", Cell::list(&[])),
                Row::new()
                    .cell("LINK", Cell::text("aggr10"))
                    .cell("CLASS", Cell::text("aggr"))
                    .cell("MTU", Cell::num(9000u32))
                    .cell("OVER", Cell::list(&["i40e0".into(), "i40e1".into()]))
                    .extra("persistent", true),
            ],
        }
    }

    fn fmt(parsable: bool, fields: Option<&str>) -> Format {
        Format {
            parsable,
            parsable_flag: "-p",
            fields: fields.map(str::to_owned),
            ..Format::default()
        }
    }

    #[test]
    fn table_pads_to_widest_cell() {
        let s = render(&table(), &fmt(false, None)).unwrap();
        assert_eq!(
            s,
            "LINK   CLASS MTU  OVER\n\
             i40e0  phys  1500 --\n\
             aggr10 aggr  9000 i40e0 i40e1\n"
        );
    }

    #[test]
    fn o_picks_and_orders_columns_case_insensitively() {
        let s = render(&table(), &fmt(false, Some("mtu,Link"))).unwrap();
        assert_eq!(s, "MTU  LINK\n1500 i40e0\n9000 aggr10\n");
        let all = render(&table(), &fmt(false, Some("ALL"))).unwrap();
        assert_eq!(all, render(&table(), &fmt(false, None)).unwrap());
    }

    #[test]
    fn unknown_field_is_invalid_argument_naming_it() {
        let e = render(&table(), &fmt(false, Some("link,bogus"))).unwrap_err();
        assert_eq!(e.kind, "InvalidArgument");
        assert!(e.message.contains("\"bogus\""), "{}", e.message);
        assert!(e.message.contains("link, class, mtu, over"), "{}", e.message);
        let e = render(&table(), &fmt(false, Some("link,"))).unwrap_err();
        assert_eq!(e.kind, "InvalidArgument");
    }

    #[test]
    fn parsable_requires_o() {
        let e = render(&table(), &fmt(true, None)).unwrap_err();
        assert_eq!(e, CliError::invalid_argument("-p requires -o"));
        let mut f = fmt(true, None);
        f.parsable_flag = "-c";
        assert_eq!(render(&table(), &f).unwrap_err().message, "-c requires -o");
    }

    #[test]
    fn parsable_escapes_only_with_several_fields() {
        let t = Table {
            columns: &["A", "B"],
            rows: vec![Row::new().cell("A", Cell::text("fe80::1")).cell("B", Cell::text(r"x\y"))],
        };
        assert_eq!(render(&t, &fmt(true, Some("a,b"))).unwrap(), "fe80\\:\\:1:x\\\\y\n");
        assert_eq!(render(&t, &fmt(true, Some("a"))).unwrap(), "fe80::1\n");
        assert_eq!(render(&t, &fmt(true, Some("b"))).unwrap(), "x\\y\n");
    }

    #[test]
    fn parsable_has_no_header_and_no_padding() {
        let s = render(&table(), &fmt(true, Some("link,mtu,over"))).unwrap();
        assert_eq!(s, "i40e0:1500:--\naggr10:9000:i40e0 i40e1\n");
    }

    #[test]
    fn json_types_and_extras() {
        let mut f = fmt(false, None);
        f.json = true;
        let v: Value = serde_json::from_str(&render(&table(), &f).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!([
                {"link": "i40e0", "class": "phys", "mtu": 1500, "over": []},
                {"link": "aggr10", "class": "aggr", "mtu": 9000,
                 "over": ["i40e0", "i40e1"], "persistent": true},
            ])
        );
        f.fields = Some("LINK,mtu".into());
        let v: Value = serde_json::from_str(&render(&table(), &f).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!([{"link": "i40e0", "mtu": 1500}, {"link": "aggr10", "mtu": 9000}])
        );
    }

    #[test]
    fn json_skips_people_only_rows_and_dash_stays_empty() {
        let t = Table {
            columns: &["A"],
            rows: vec![
                Row::new().cell("A", Cell::text_or_dash("")).not_json(),
                Row::new().cell("A", Cell::text_or_dash("")),
            ],
        };
        let s = render(&t, &fmt(false, None)).unwrap();
        assert_eq!(s, "A\n--\n--\n");
        let f = Format { json: true, ..fmt(false, None) };
        assert_eq!(
            serde_json::from_str::<Value>(&render(&t, &f).unwrap()).unwrap(),
            serde_json::json!([{"a": ""}])
        );
    }

    #[test]
    fn empty_table_prints_nothing_but_json_prints_empty_array() {
        let t = Table { columns: COLS, rows: vec![] };
        assert_eq!(render(&t, &fmt(false, None)).unwrap(), "");
        let f = Format { json: true, ..fmt(false, None) };
        assert_eq!(render(&t, &f).unwrap().trim(), "[]");
    }

    #[test]
    fn table_form_can_differ() {
        let t = Table {
            columns: &["TOTAL"],
            rows: vec![Row::new().cell("TOTAL", Cell::num(12345u64).table_as("12.3"))],
        };
        assert_eq!(render(&t, &fmt(false, None)).unwrap(), "TOTAL\n12.3\n");
        assert_eq!(render(&t, &fmt(true, Some("total"))).unwrap(), "12345\n");
    }
}
