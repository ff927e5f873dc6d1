//! Turning byte offsets from the TOML parser into line/column positions.

use std::fmt;

/// Where a parse error is: 1-based line and column (in characters) and the
/// text of that line, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    pub line: usize,
    pub column: usize,
    pub source_line: String,
}

impl Location {
    /// The location of byte `offset` in `text` (clamped to the text, and to
    /// the start of the character it falls in).
    pub fn of(text: &str, offset: usize) -> Self {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
        let line = text[..offset].matches('\n').count() + 1;
        let column = text[line_start..offset].chars().count() + 1;
        let source_line = text[line_start..line_end].trim_end_matches('\r').to_owned();
        Self { line, column, source_line }
    }

    /// The location of a TOML error (line 1, column 1 if it has no span).
    pub fn of_toml(text: &str, err: &toml::de::Error) -> Self {
        Self::of(text, err.span().map_or(0, |span| span.start))
    }
}

/// Renders the offending line under an error message, rustc style:
///
/// ```text
///     3 | [phys.0bad]
///       |       ^
/// ```
pub(crate) struct Snippet<'a> {
    pub line: usize,
    pub column: usize,
    pub source_line: &'a str,
}

impl fmt::Display for Snippet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let number = self.line.to_string();
        let pad = " ".repeat(number.len());
        let caret = " ".repeat(self.column.saturating_sub(1));
        write!(f, "\n {number} | {}\n {pad} | {caret}^", self.source_line)
    }
}

/// Decodes a file's bytes as UTF-8, or gives the location of the first
/// invalid byte.
pub(crate) fn decode(bytes: Vec<u8>) -> Result<String, Location> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        // The valid prefix is UTF-8 by definition.
        let prefix = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
        let mut loc = Location::of(prefix, valid);
        let rest = &bytes[valid..];
        let tail = rest.split(|&b| b == b'\n').next().unwrap_or_default();
        loc.source_line.push_str(&String::from_utf8_lossy(tail));
        loc
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_are_one_based() {
        let text = "a = 1\nbb = 2\r\n  cé = x\n";
        assert_eq!(
            Location::of(text, 0),
            Location { line: 1, column: 1, source_line: "a = 1".into() }
        );
        let x = text.find('x').unwrap();
        let loc = Location::of(text, x);
        assert_eq!((loc.line, loc.column, loc.source_line.as_str()), (3, 8, "  cé = x"));
        assert_eq!(Location::of(text, 7).source_line, "bb = 2");
        assert_eq!(Location::of(text, 10_000).line, 4);
        let bad = decode(b"ok = 1\nno = \"\xff\"\n".to_vec()).unwrap_err();
        assert_eq!((bad.line, bad.column), (2, 7));
        assert_eq!(bad.source_line, "no = \"\u{fffd}\"");
    }

    #[test]
    fn snippet_points_at_the_column() {
        let s = Snippet { line: 12, column: 4, source_line: "abcdef" }.to_string();
        assert_eq!(s, "\n 12 | abcdef\n    |    ^");
    }
}
