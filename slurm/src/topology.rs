//! The `block` topology of Slurm's `topology.yaml` (Slurm 25.05 on): which
//! nodes form each block. On GB200/GB300 NVL72 racks a block is usually one
//! rack, one NVLink domain.
//!
//! The file is a YAML list of topologies (`topology.yaml(5)`):
//!
//! ```yaml
//! - topology: topo2
//!   cluster_default: false
//!   block:
//!     block_sizes:
//!       - 4
//!     blocks:
//!       - block: b1
//!         nodes: node[01-04]
//! ```
//!
//! This reads the block-style YAML the manual shows (mappings and lists by
//! indentation, `#` comments, quoted or plain scalars) and nothing more: no
//! YAML library for one small file, and a flow-style value (`[..]`, `{..}`)
//! is an error naming its line rather than a guess. Of several topologies,
//! the block topology marked `cluster_default: true` is taken, else the
//! first block topology; a file without one has no blocks.

use thiserror::Error;

/// Longest file read, in bytes: a topology of a large cluster is a few
/// hundred kilobytes.
pub const MAX_BYTES: usize = 4 << 20;

/// Why `topology.yaml` could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TopologyError {
    #[error("topology.yaml line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("topology.yaml: larger than {MAX_BYTES} bytes")]
    TooLarge,
}

/// One block: its name and its nodes, a Slurm hostlist as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub name: String,
    pub nodes: String,
}

/// The block topology chosen from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockTopology {
    /// The `topology:` name.
    pub name: String,
    pub blocks: Vec<Block>,
}

/// What a topology of the file is.
#[derive(Debug, Default)]
struct Topology {
    name: String,
    default: bool,
    is_block: bool,
    /// Past its `blocks:` key: each list item is a block.
    in_blocks: bool,
    /// The blocks, each with the line its item starts on.
    blocks: Vec<(usize, Block)>,
}

/// One meaningful line: whether it starts a list item,
/// the key and the value (empty for a key that opens a nested block).
struct Line<'a> {
    item: bool,
    key: &'a str,
    value: String,
}

fn error(line: usize, message: impl Into<String>) -> TopologyError {
    TopologyError::Line {
        line,
        message: message.into(),
    }
}

/// The line without its comment: `#` at its start or after a space, outside quotes.
fn without_comment(text: &str) -> &str {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '#') if previous.is_whitespace() => return &text[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            _ => {}
        }
        previous = c;
    }
    text
}

fn scalar(raw: &str, number: usize) -> Result<String, TopologyError> {
    let raw = raw.trim();
    if raw.starts_with('[') || raw.starts_with('{') {
        return Err(error(
            number,
            format!("flow-style value `{raw}` is not read"),
        ));
    }
    for q in ['"', '\''] {
        if let Some(inner) = raw.strip_prefix(q) {
            return inner
                .strip_suffix(q)
                .map(str::to_string)
                .ok_or_else(|| error(number, format!("unterminated quote in `{raw}`")));
        }
    }
    Ok(raw.to_string())
}

/// Splits one line; `None` for blank lines, comments, `---` and bare list
/// values (`- 4` of `block_sizes`).
fn split(text: &str, number: usize) -> Result<Option<Line<'_>>, TopologyError> {
    let body = without_comment(text).trim();
    if body.is_empty() || body == "---" || body == "..." {
        return Ok(None);
    }
    let (item, rest) = match body.strip_prefix('-') {
        Some(rest) if rest.is_empty() || rest.starts_with(' ') => (true, rest.trim_start()),
        _ => (false, body),
    };
    let Some((key, value)) = rest.split_once(':') else {
        return if item {
            Ok(None)
        } else {
            Err(error(
                number,
                format!("expected `key: value`, found `{body}`"),
            ))
        };
    };
    if !value.is_empty() && !value.starts_with(' ') {
        return Err(error(number, format!("expected a space after `{key}:`")));
    }
    Ok(Some(Line {
        item,
        key: key.trim(),
        value: scalar(value, number)?,
    }))
}

/// Reads the file's text into its topologies, in order.
fn topologies(text: &str) -> Result<Vec<Topology>, TopologyError> {
    let mut out: Vec<Topology> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let Some(line) = split(raw, number)? else {
            continue;
        };
        if line.key == "topology" {
            if !line.item {
                return Err(error(number, "`topology:` must start a list item"));
            }
            out.push(Topology {
                name: line.value,
                ..Topology::default()
            });
            continue;
        }
        let Some(current) = out.last_mut() else {
            return Err(error(number, "expected `- topology: <name>` first"));
        };
        if current.in_blocks && line.item {
            let empty = Block {
                name: String::new(),
                nodes: String::new(),
            };
            current.blocks.push((number, empty));
        }
        match (line.key, line.value.as_str()) {
            ("cluster_default", v) => current.default = v == "true",
            ("block", "") if !current.in_blocks => current.is_block = true,
            ("blocks", "") if current.is_block => current.in_blocks = true,
            ("block" | "nodes", value) if current.is_block => {
                let Some((_, block)) = current.blocks.last_mut() else {
                    return Err(error(number, format!("`{}:` outside a block", line.key)));
                };
                let field = if line.key == "block" {
                    &mut block.name
                } else {
                    &mut block.nodes
                };
                *field = value.to_string();
            }
            // Tree switches, block sizes, `flat: true`: not ours to read.
            _ => {}
        }
    }
    Ok(out)
}

/// The block topology of a `topology.yaml` text: the cluster default one if
/// it is a block topology, else the first block topology; `None` when the
/// file has none.
pub fn parse(text: &str) -> Result<Option<BlockTopology>, TopologyError> {
    if text.len() > MAX_BYTES {
        return Err(TopologyError::TooLarge);
    }
    let all = topologies(text)?;
    let chosen = all
        .iter()
        .find(|t| t.is_block && t.default)
        .or_else(|| all.iter().find(|t| t.is_block));
    let Some(t) = chosen else {
        return Ok(None);
    };
    if let Some((line, _)) = t.blocks.iter().find(|(_, b)| b.name.is_empty()) {
        return Err(error(*line, "a block without its `block:` name"));
    }
    Ok(Some(BlockTopology {
        name: t.name.clone(),
        blocks: t.blocks.iter().map(|(_, b)| b.clone()).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAN_EXAMPLE: &str = include_str!("../../tests/fixtures/slurm-topology/man-example.yaml");
    const NVL72: &str = include_str!("../../tests/fixtures/slurm-topology/nvl72.yaml");

    fn names(t: &BlockTopology) -> Vec<(&str, &str)> {
        t.blocks
            .iter()
            .map(|b| (b.name.as_str(), b.nodes.as_str()))
            .collect()
    }

    #[test]
    fn the_manuals_example_gives_its_block_topology_not_the_tree() {
        let t = parse(MAN_EXAMPLE).unwrap().unwrap();
        assert_eq!(t.name, "topo2");
        assert_eq!(
            names(&t),
            [
                ("b1", "node[01-04]"),
                ("b2", "node[05-08]"),
                ("b3", "node[09-12]"),
                ("b4", "node[13-16]")
            ]
        );
    }

    #[test]
    fn nvl72_racks_are_blocks_with_comments_and_quotes_read() {
        let t = parse(NVL72).unwrap().unwrap();
        assert_eq!(t.name, "nvl72");
        assert_eq!(
            names(&t),
            [("rack01", "gb[001-018]"), ("rack02", "gb[019-036]")]
        );
    }

    #[test]
    fn the_cluster_default_block_topology_wins_over_an_earlier_one() {
        let text = "- topology: a\n  block:\n    blocks:\n      - block: x\n        nodes: n1\n\
                    - topology: b\n  cluster_default: true\n  block:\n    blocks:\n      - block: y\n        nodes: n2\n";
        assert_eq!(parse(text).unwrap().unwrap().name, "b");
    }

    #[test]
    fn a_blocks_keys_may_come_in_any_order() {
        let text =
            "- topology: t\n  block:\n    blocks:\n      - nodes: gb[1-2]\n        block: r1\n";
        let t = parse(text).unwrap().unwrap();
        assert_eq!(names(&t), [("r1", "gb[1-2]")]);
        let unnamed = "- topology: t\n  block:\n    blocks:\n      - nodes: gb[1-2]\n";
        assert!(matches!(
            parse(unnamed),
            Err(TopologyError::Line { line: 4, .. })
        ));
    }

    #[test]
    fn a_file_without_a_block_topology_has_none() {
        assert_eq!(parse("- topology: t\n  flat: true\n").unwrap(), None);
        assert_eq!(parse("").unwrap(), None);
    }

    #[test]
    fn what_it_does_not_read_is_an_error_naming_the_line() {
        let flow =
            "- topology: t\n  block:\n    blocks:\n      - block: b\n        nodes: [a, b]\n";
        assert!(matches!(
            parse(flow),
            Err(TopologyError::Line { line: 5, .. })
        ));
        let orphan = "- topology: t\n  block:\n    blocks:\n    nodes: n1\n";
        assert!(matches!(
            parse(orphan),
            Err(TopologyError::Line { line: 4, .. })
        ));
        let first = "cluster_default: true\n";
        assert!(matches!(
            parse(first),
            Err(TopologyError::Line { line: 1, .. })
        ));
        let quote = "- topology: \"t\n";
        assert!(matches!(
            parse(quote),
            Err(TopologyError::Line { line: 1, .. })
        ));
        let big = "#".repeat(MAX_BYTES + 1);
        assert_eq!(parse(&big), Err(TopologyError::TooLarge));
    }
}

/// Random input: any text reads as blocks or an error, never a panic.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn any_text_reads_without_a_panic(text in any::<String>()) {
            let _ = parse(&text);
        }

        #[test]
        fn any_lines_of_the_right_words_read_without_a_panic(
            lines in proptest::collection::vec("[ -]{0,6}(topology|block|nodes|blocks|cluster_default)?:? ?[a-z\\[\\]0-9\"'#-]{0,12}", 0..20)
        ) {
            let _ = parse(&lines.join("\n"));
        }
    }
}
