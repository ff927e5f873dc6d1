//! A desired-state document (`netadm apply`): a whole [`LinkState`] in the
//! `links.toml` schema, as TOML or JSON, with the position of every key so
//! that an error found later (a VNIC over a link that does not exist) can
//! name the line and key it comes from, as a parse error does.

use std::fmt;

use netadm_model::PropName;

use crate::links::LinkState;
use crate::location::Location;

/// The format of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocFormat {
    /// The `links.toml` schema as TOML.
    Toml,
    /// The same schema as JSON.
    Json,
}

/// A parsed document: the configuration it describes and where each of
/// its keys is.
#[derive(Debug, Clone)]
pub struct Document {
    /// The configuration it describes.
    pub state: LinkState,
    /// Its format (JSON if its first non-blank character is `{`).
    pub format: DocFormat,
    text: String,
    /// Every key: its dotted path and the byte range of key and value.
    keys: Vec<(Vec<String>, usize, usize)>,
}

/// What a document error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocErrorKind {
    /// The text is not TOML or JSON, or not the schema: an unknown key, a
    /// wrong type, a malformed name.
    Schema,
    /// A value the schema's type refuses: a link property's value out of
    /// its range or choices.
    Value,
}

/// A document that does not parse, or whose content is refused: the
/// line (1-based; 0 when no key can be placed) and the key it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocError {
    /// What kind of thing is wrong.
    pub kind: DocErrorKind,
    /// 1-based line, 0 if unknown.
    pub line: usize,
    /// The dotted key (`vnic.v1.over`), empty if none.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for DocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.key.is_empty()) {
            (0, true) => write!(f, "{}", self.message),
            (0, false) => write!(f, "key {}: {}", self.key, self.message),
            (l, true) => write!(f, "line {l}: {}", self.message),
            (l, false) => write!(f, "line {l}, key {}: {}", self.key, self.message),
        }
    }
}

impl std::error::Error for DocError {}

/// Renders a key path as TOML would write it (`address."net0/v4".addr`).
pub fn dotted(path: &[impl AsRef<str>]) -> String {
    path.iter()
        .map(|k| {
            let k = k.as_ref();
            if !k.is_empty()
                && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                k.to_owned()
            } else {
                format!("{k:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

impl Document {
    /// Parses `text` (TOML, or JSON when it starts with `{`). Unknown keys,
    /// wrong types and values the schema refuses are errors naming the
    /// line and the key.
    pub fn parse(text: &str) -> Result<Document, DocError> {
        let json = text.trim_start().starts_with('{');
        let mut keys = vec![];
        let state = if json {
            let at = |e: &serde_json::Error| offset_of(text, e.line(), e.column());
            let v: serde_json::Value = serde_json::from_str(text).map_err(|e| DocError {
                kind: DocErrorKind::Schema,
                line: e.line(),
                key: String::new(),
                message: strip_position(&e.to_string()),
            })?;
            drop(v);
            json_keys(text.as_bytes(), &mut 0, &mut vec![], &mut keys);
            serde_json::from_str::<LinkState>(text).map_err(|e| {
                let off = at(&e);
                error_at(text, &keys, off, strip_position(&e.to_string()))
            })?
        } else {
            let table = toml::de::DeTable::parse(text).map_err(|e| {
                let off = e.span().map_or(0, |s| s.start);
                DocError {
                    kind: DocErrorKind::Schema,
                    line: Location::of(text, off).line,
                    key: String::new(),
                    message: e.message().to_owned(),
                }
            })?;
            toml_keys(table.get_ref(), &mut vec![], &mut keys);
            toml::from_str::<LinkState>(text).map_err(|e| {
                let off = e.span().map_or(0, |s| s.start);
                error_at(text, &keys, off, e.message().to_owned())
            })?
        };
        Ok(Document {
            state,
            format: if json { DocFormat::Json } else { DocFormat::Toml },
            text: text.to_owned(),
            keys,
        })
    }

    /// An error about `path` (`["vnic", "v1", "over"]`): the line of that
    /// key, or of the longest part of it the document has.
    pub fn error(&self, path: &[&str], message: impl Into<String>) -> DocError {
        let mut line = 0;
        for n in (1..=path.len()).rev() {
            if let Some((_, k, _)) = self
                .keys
                .iter()
                .find(|(p, _, _)| p.len() == n && p.iter().zip(path).all(|(a, b)| a == b))
            {
                line = Location::of(&self.text, *k).line;
                break;
            }
        }
        DocError { kind: DocErrorKind::Schema, line, key: dotted(path), message: message.into() }
    }
}

/// The deepest key whose key-to-value range holds `off`.
fn error_at(
    text: &str,
    keys: &[(Vec<String>, usize, usize)],
    off: usize,
    message: String,
) -> DocError {
    let path = keys
        .iter()
        .filter(|(_, a, b)| *a <= off && off <= *b)
        .max_by_key(|(p, _, _)| p.len())
        .map(|(p, _, _)| p.as_slice())
        .unwrap_or_default();
    // A link property whose name is known: what is wrong is its value.
    let kind = match path {
        [_, _, props, name] if props == "props" && name.parse::<PropName>().is_ok() => {
            DocErrorKind::Value
        }
        _ => DocErrorKind::Schema,
    };
    DocError { kind, line: Location::of(text, off).line, key: dotted(path), message }
}

/// serde_json's messages end in " at line L column C": the line is given
/// apart.
fn strip_position(m: &str) -> String {
    match m.rfind(" at line ") {
        Some(i) => m[..i].to_owned(),
        None => m.to_owned(),
    }
}

/// The byte offset of a 1-based line and column (serde_json's).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
    (start + column.saturating_sub(1)).min(text.len())
}

fn toml_keys(
    t: &toml::de::DeTable<'_>,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, usize, usize)>,
) {
    for (k, v) in t {
        path.push(k.get_ref().to_string());
        let (ks, vs) = (k.span(), v.span());
        out.push((path.clone(), ks.start.min(vs.start), ks.end.max(vs.end)));
        if let toml::de::DeValue::Table(inner) = v.get_ref() {
            toml_keys(inner, path, out);
        }
        path.pop();
    }
}

/// Records every object key of a JSON text (already known to be valid)
/// with the range from the key to the end of its value.
fn json_keys(
    b: &[u8],
    i: &mut usize,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, usize, usize)>,
) {
    let ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    ws(i);
    match b.get(*i) {
        Some(b'{') => {
            *i += 1;
            loop {
                ws(i);
                if b.get(*i) != Some(&b'"') {
                    *i += 1; // '}'
                    return;
                }
                let start = *i;
                let key = json_string(b, i);
                ws(i);
                *i += 1; // ':'
                path.push(key);
                let at = out.len();
                out.push((path.clone(), start, start));
                json_keys(b, i, path, out);
                out[at].2 = *i;
                path.pop();
                ws(i);
                if b.get(*i) == Some(&b',') {
                    *i += 1;
                }
            }
        }
        Some(b'[') => {
            *i += 1;
            loop {
                ws(i);
                if matches!(b.get(*i), Some(b']') | None) {
                    *i += 1;
                    return;
                }
                json_keys(b, i, path, out);
                ws(i);
                if b.get(*i) == Some(&b',') {
                    *i += 1;
                }
            }
        }
        Some(b'"') => {
            json_string(b, i);
        }
        _ => {
            while *i < b.len()
                && !matches!(b[*i], b',' | b'}' | b']')
                && !b[*i].is_ascii_whitespace()
            {
                *i += 1;
            }
        }
    }
}

/// A JSON string at `*i` (escapes kept as written: keys in this schema are
/// plain), leaving `*i` after its closing quote.
fn json_string(b: &[u8], i: &mut usize) -> String {
    *i += 1;
    let start = *i;
    while *i < b.len() && b[*i] != b'"' {
        if b[*i] == b'\\' {
            *i += 1;
        }
        *i += 1;
    }
    let s = String::from_utf8_lossy(&b[start..(*i).min(b.len())]).into_owned();
    *i += 1;
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = "version = 1\n\n[vnic.v1]\nover = \"i40e0\"\nmac = \"2:8:20:0:0:1\"\nmac_mode = \"fixed\"\n\n[address.\"v1/v4\"]\naddr = \"192.0.2.1/24\"\n";

    #[test]
    fn toml_keys_have_lines() {
        let d = Document::parse(TOML).unwrap();
        assert_eq!(d.format, DocFormat::Toml);
        assert_eq!(d.state.vnic.len(), 1);
        let e = d.error(&["vnic", "v1", "over"], "no such link");
        assert_eq!(e.to_string(), "line 4, key vnic.v1.over: no such link");
        let e = d.error(&["address", "v1/v4"], "x");
        assert_eq!(e.to_string(), "line 8, key address.\"v1/v4\": x");
        // A key the document lacks: the longest part it has.
        assert_eq!(d.error(&["vnic", "v1", "props", "mtu"], "x").line, 3);
    }

    #[test]
    fn a_property_value_the_spec_refuses_is_a_value_error_at_its_key_and_an_unknown_name_is_not() {
        let with = |props: &str| {
            TOML.replace(
                "mac_mode = \"fixed\"\n",
                &format!("mac_mode = \"fixed\"\nprops = {{ {props} }}\n"),
            )
        };
        let d = Document::parse(&with("mtu = \"9000\", maxbw = \"100M\"")).unwrap();
        let v1 = &d.state.vnic[&"v1".parse::<netadm_model::LinkName>().unwrap()];
        assert_eq!(v1.props[&PropName::Maxbw], netadm_model::PropValue::Bandwidth(100_000_000));
        let e = Document::parse(&with("mtu = \"99999\"")).unwrap_err();
        assert_eq!(
            (e.kind, e.line, e.key.as_str()),
            (DocErrorKind::Value, 7, "vnic.v1.props.mtu"),
            "{e}"
        );
        assert!(e.message.contains("out of range"), "{e}");
        let e = Document::parse(&with("colour = \"red\"")).unwrap_err();
        assert_eq!((e.kind, e.key.as_str()), (DocErrorKind::Schema, "vnic.v1.props.colour"), "{e}");
        let json = r#"{"version": 1, "vnic": {"v1": {"over": "i40e0", "mac": "2:8:20:0:0:1",
            "mac_mode": "fixed", "props": {"mtu": 99999}}}}"#;
        let e = Document::parse(json).unwrap_err();
        assert_eq!(
            (e.kind, e.line, e.key.as_str()),
            (DocErrorKind::Value, 2, "vnic.v1.props.mtu"),
            "{e}"
        );
    }

    #[test]
    fn toml_errors_name_line_and_key() {
        let e = Document::parse(&TOML.replace("over =", "ovr =")).unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert_eq!(e.key, "vnic.v1.ovr", "{e}");
        assert!(e.message.contains("unknown field"), "{e}");
        let e = Document::parse(&TOML.replace("\"192.0.2.1/24\"", "24")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (9, "address.\"v1/v4\".addr"), "{e}");
        let e = Document::parse("version = 1\n[vnic.v1\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn json_the_same() {
        let j = "{\n \"version\": 1,\n \"vnic\": {\n  \"v1\": {\n   \"over\": \"i40e0\",\n   \"mac\": \"2:8:20:0:0:1\",\n   \"mac_mode\": \"fixed\"\n  }\n }\n}\n";
        let d = Document::parse(j).unwrap();
        assert_eq!(d.format, DocFormat::Json);
        assert_eq!(d.error(&["vnic", "v1", "over"], "x").line, 5);
        let e = Document::parse(&j.replace("\"over\"", "\"ovr\"")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (5, "vnic.v1.ovr"), "{e}");
        let e = Document::parse(&j.replace("\"version\": 1", "\"version\": \"1\"")).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "version"), "{e}");
        // A number where the TOML form has one is taken in JSON too.
        let d = Document::parse(
            &j.replace("\"mac_mode\": \"fixed\"", "\"mac_mode\": \"fixed\", \"vid\": 12"),
        )
        .unwrap();
        assert_eq!(d.state.vnic.values().next().unwrap().vid.map(|v| v.get()), Some(12));
        let e = Document::parse("{\n\"version\": 1,\n").unwrap_err();
        assert!(e.line >= 2, "{e}");
    }
}
