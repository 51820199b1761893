//! Which column of sacct output holds what: from the header line when the
//! output has one (`sacct -P` without `-n`), else the fixed list lemon has
//! always read ([`FIXED_FIELDS`]).
//!
//! A header maps fields by name, in any order, and may name many more fields
//! than lemon reads (`sacct -P -o ALL` prints over a hundred).

/// The columns lemon reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    JobIdRaw,
    JobId,
    NodeList,
    NNodes,
    State,
    ExitCode,
    DerivedExitCode,
    Submit,
    Start,
    End,
    ElapsedRaw,
    Elapsed,
    Partition,
    User,
    AllocTres,
    JobName,
    StdOut,
    StdErr,
    Uid,
}

/// Every column with its name as sacct prints it in a header.
const NAMES: [(Column, &str); 19] = [
    (Column::JobIdRaw, "JobIDRaw"),
    (Column::JobId, "JobID"),
    (Column::NodeList, "NodeList"),
    (Column::NNodes, "NNodes"),
    (Column::State, "State"),
    (Column::ExitCode, "ExitCode"),
    (Column::DerivedExitCode, "DerivedExitCode"),
    (Column::Submit, "Submit"),
    (Column::Start, "Start"),
    (Column::End, "End"),
    (Column::ElapsedRaw, "ElapsedRaw"),
    (Column::Elapsed, "Elapsed"),
    (Column::Partition, "Partition"),
    (Column::User, "User"),
    (Column::AllocTres, "AllocTRES"),
    (Column::JobName, "JobName"),
    (Column::StdOut, "StdOut"),
    (Column::StdErr, "StdErr"),
    (Column::Uid, "UID"),
];

/// The fields of a file without a header, in this order: what lemon has
/// always asked sacct for, and what `--sacct-file` read before headers.
pub const FIXED_FIELDS: &str = "JobIDRaw,JobID,NodeList,NNodes,State,ExitCode,DerivedExitCode,Submit,Start,End,ElapsedRaw,Partition,User,AllocTRES";

/// Fields whose text comes from users or administrators: the only ones that
/// may hold a `|` or a line break (`--constraint="a|b"`, a `--wrap` script).
const FREE_TEXT: [&str; 12] = [
    "JobName",
    "Comment",
    "AdminComment",
    "SystemComment",
    "SubmitLine",
    "WorkDir",
    "Constraints",
    "Extra",
    "Container",
    "StdOut",
    "StdErr",
    "StdIn",
];

/// What lemon loses without an optional column, for the ingest summary.
const OPTIONAL: [(Column, &str); 7] = [
    (Column::ExitCode, "exit codes"),
    (Column::Start, "early failures"),
    (Column::Submit, "queue times"),
    (Column::AllocTres, "GPU counts"),
    (Column::User, "users"),
    (Column::Partition, "partitions"),
    (Column::JobName, "job names"),
];

/// Where each column lemon reads is, and which columns hold free text.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Number of fields of a record.
    pub width: usize,
    at: [Option<usize>; NAMES.len()],
    /// Indexes of the free-text columns, ascending.
    pub free_text: Vec<usize>,
    /// True when read from a header line.
    pub from_header: bool,
}

impl Layout {
    /// The layout of output without a header: [`FIXED_FIELDS`].
    pub fn fixed() -> Layout {
        let mut layout = Layout::from_names(FIXED_FIELDS.split(','));
        layout.from_header = false;
        // Its last fields are plain words: nothing there may hold a `|`.
        layout.free_text.clear();
        layout
    }

    fn from_names<'a>(names: impl Iterator<Item = &'a str>) -> Layout {
        let mut layout = Layout {
            width: 0,
            at: [None; NAMES.len()],
            free_text: Vec::new(),
            from_header: true,
        };
        for (i, name) in names.enumerate() {
            let name = name.trim();
            layout.width = i + 1;
            if let Some(k) = NAMES.iter().position(|(_, n)| n.eq_ignore_ascii_case(name)) {
                // The first of duplicated names wins.
                layout.at[k].get_or_insert(i);
            }
            if FREE_TEXT.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                layout.free_text.push(i);
            }
        }
        layout
    }

    /// True for a header line: field names only (letters and digits, the
    /// last one may be empty, as `sacct -p` ends lines with `|`), one of them
    /// JobID or JobIDRaw. No data row looks like that: a job id is a number.
    pub fn is_header(line: &str) -> bool {
        let mut names = line.trim_end().split('|').peekable();
        let mut has_id = false;
        while let Some(name) = names.next() {
            let name = name.trim();
            let last = names.peek().is_none();
            if name.is_empty() && last {
                break;
            }
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return false;
            }
            has_id |= name.eq_ignore_ascii_case("JobID") || name.eq_ignore_ascii_case("JobIDRaw");
        }
        has_id
    }

    /// The layout a header line describes; names the fields lemon needs
    /// that it lacks.
    pub fn from_header(line: &str) -> Result<Layout, String> {
        let layout = Layout::from_names(line.trim_end().split('|'));
        let has = |c| layout.at(c).is_some();
        let mut missing = Vec::new();
        if !has(Column::JobIdRaw) && !has(Column::JobId) {
            missing.push("JobIDRaw (or JobID)");
        }
        for (c, name) in [
            (Column::NodeList, "NodeList"),
            (Column::State, "State"),
            (Column::End, "End"),
        ] {
            if !has(c) {
                missing.push(name);
            }
        }
        if !has(Column::ElapsedRaw) && !has(Column::Elapsed) && !has(Column::Start) {
            missing.push("ElapsedRaw (or Start)");
        }
        if missing.is_empty() {
            Ok(layout)
        } else {
            Err(format!(
                "the header has no {} field; lemon needs JobIDRaw or JobID, NodeList, State, End, \
                 and ElapsedRaw or Start (export with e.g. `sacct -P -o {FIXED_FIELDS},JobName`)",
                match missing.split_last() {
                    Some((last, [])) => last.to_string(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => String::new(),
                }
            ))
        }
    }

    /// The index of a column, if the layout has it.
    pub fn at(&self, c: Column) -> Option<usize> {
        self.at[c as usize]
    }

    /// The column's field of a record split by this layout.
    pub fn get<'a>(&self, fields: &[&'a str], c: Column) -> Option<&'a str> {
        self.at(c).and_then(|i| fields.get(i).copied())
    }

    /// True when field `i` may hold `|` and line breaks.
    pub fn is_free_text(&self, i: usize) -> bool {
        self.free_text.binary_search(&i).is_ok()
    }

    /// The optional columns a header lacks and what that costs, e.g.
    /// `no ExitCode (exit codes), no JobName (job names)`; empty when none.
    pub fn missing_optional(&self) -> String {
        if !self.from_header {
            return String::new();
        }
        let absent: Vec<String> = OPTIONAL
            .iter()
            .filter(|(c, _)| self.at(*c).is_none())
            .map(|(c, what)| format!("no {} ({what})", NAMES[*c as usize].1))
            .collect();
        absent.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_maps_fields_by_name_in_any_order() {
        let h = "Account|State|end|JobName|NodeList|ElapsedRaw|JobIDRaw|WorkDir";
        assert!(Layout::is_header(h));
        let l = Layout::from_header(h).unwrap();
        assert_eq!(l.width, 8);
        assert_eq!(l.at(Column::End), Some(2));
        assert_eq!(l.at(Column::JobIdRaw), Some(6));
        assert_eq!(l.at(Column::JobId), None);
        assert_eq!(l.free_text, [3, 7]);
        assert!(l.missing_optional().contains("no ExitCode (exit codes)"));
        assert!(!l.missing_optional().contains("JobName"));
    }

    #[test]
    fn a_missing_required_field_is_named_once() {
        let err = Layout::from_header("JobID|NodeList|State|Start").unwrap_err();
        assert!(err.starts_with("the header has no End field"), "{err}");
        let err = Layout::from_header("JobID|NodeList|State|End").unwrap_err();
        assert!(err.contains("no ElapsedRaw (or Start)"), "{err}");
        let err = Layout::from_header("JobName|NodeList|State|End|Start").unwrap_err();
        assert!(err.contains("no JobIDRaw (or JobID)"), "{err}");
        let err = Layout::from_header("JobID|NodeList|Account").unwrap_err();
        assert!(
            err.starts_with("the header has no State, End or ElapsedRaw (or Start) field"),
            "{err}"
        );
    }

    #[test]
    fn data_rows_and_non_pipe_output_are_not_headers() {
        assert!(!Layout::is_header(
            "1234|1234|gpu001|1|FAILED|1:0|0:0|1|2|3|1|b|u|"
        ));
        assert!(!Layout::is_header("JobID    JobName  State"));
        assert!(Layout::is_header("JobIDRaw|NodeList|State|End|Start|"));
        assert!(!Layout::is_header("JobIDRaw||State"));
    }

    #[test]
    fn the_fixed_layout_is_the_historical_field_list() {
        let l = Layout::fixed();
        assert_eq!(l.width, 14);
        assert_eq!(l.at(Column::AllocTres), Some(13));
        assert!(l.free_text.is_empty());
        assert_eq!(l.missing_optional(), "");
    }
}
