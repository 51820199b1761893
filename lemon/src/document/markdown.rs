//! Markdown for tickets, wikis and chat: `#` title, `##` sections, pipe
//! tables, nested bullet lists.

use super::{Block, Document, Item, Span, Table};
use std::fmt::Write;

/// The document as Markdown.
pub fn render(doc: &Document<'_>) -> String {
    let mut o = format!("# {}\n\n", doc.title);
    blocks(&mut o, &doc.preamble);
    for s in &doc.sections {
        let _ = writeln!(o, "## {}\n", s.heading);
        blocks(&mut o, &s.blocks);
    }
    // Every block ends with a blank line; the document with one newline.
    o.truncate(o.trim_end().len());
    o.push('\n');
    o
}

fn blocks(o: &mut String, blocks: &[Block<'_>]) {
    for b in blocks {
        match b {
            Block::Paragraph(p) => {
                let _ = writeln!(o, "{}\n", spans(&p.spans, false));
            }
            Block::Table(t) => table(o, t),
            Block::List(items) => {
                list(o, items, "");
                o.push('\n');
            }
            Block::Preformatted(text) => {
                let _ = writeln!(o, "```\n{}\n```\n", text.trim_end());
            }
            Block::Chart(c) => {
                let lines = c.text_lines();
                if !lines.is_empty() {
                    let _ = writeln!(o, "```\n{}\n```\n", lines.join("\n"));
                }
            }
        }
    }
}

/// Spans with their markup; in a table cell, escaped by [`cell`].
fn spans(spans: &[Span], in_table: bool) -> String {
    spans.iter().map(|s| span(s, in_table)).collect()
}

fn span(s: &Span, in_table: bool) -> String {
    let text = if in_table {
        cell(s.plain())
    } else {
        s.plain().to_string()
    };
    match s {
        Span::Text(_) => text,
        Span::Strong(_) | Span::Figure { .. } => format!("**{text}**"),
        Span::Emphasis(_) => format!("*{text}*"),
        Span::Code(_) => format!("`{text}`"),
    }
}

/// A table cell's text, which may come from a node or a user's job log:
/// a `|` or a line break would end the cell or the row, and `<`, `[` and
/// a backtick would make HTML, a link or code of it.
fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' => out.push(' '),
            '|' | '<' | '>' | '[' | ']' | '`' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

fn list(o: &mut String, items: &[Item], indent: &str) {
    let deeper = format!("{indent}  ");
    for item in items {
        let _ = writeln!(o, "{indent}* {}", spans(&item.spans, false));
        list(o, &item.children, &deeper);
    }
}

fn table(o: &mut String, t: &Table) {
    o.push('|');
    for c in &t.columns {
        let _ = write!(o, " {} |", c.head);
    }
    o.push_str("\n|");
    for _ in &t.columns {
        o.push_str("---|");
    }
    o.push('\n');
    for r in &t.rows {
        o.push('|');
        for cell in r {
            if cell.plain().is_empty() {
                o.push_str(" |");
            } else {
                let _ = write!(o, " {} |", span(cell, true));
            }
        }
        o.push('\n');
    }
    o.push('\n');
}

#[cfg(test)]
mod tests {
    use super::super::{Block, Document, Item, Paragraph, Section, Span, Table};
    use super::render;

    #[test]
    fn markdown_has_pipe_tables_nested_bullets_and_escapes_pipes_in_cells() {
        let mut table = Table::new("t").left("a", 0).left("b", 0);
        table.row([Span::Strong("x|y".into()), Span::Text(String::new())]);
        let doc = Document {
            title: "T".into(),
            preamble: vec![Paragraph::plain("p").into()],
            sections: vec![Section::new("S")
                .with(table)
                .with(Block::List(vec![
                    Item::new(vec![Span::Code("n".into())]).child(Item::text("c"))
                ]))],
        };
        assert_eq!(
            render(&doc),
            "# T\n\np\n\n## S\n\n| a | b |\n|---|---|\n| **x\\|y** | |\n\n* `n`\n  * c\n"
        );
    }

    #[test]
    fn a_cell_from_a_node_or_a_log_cannot_break_the_table_or_make_html_or_links() {
        let mut table = Table::new("t").left("a", 0).left("b", 0);
        table.row(["5.15|<b>x</b>\nrow [l](u)", "ok"]);
        let doc = Document {
            title: "T".into(),
            preamble: Vec::new(),
            sections: vec![Section::new("S").with(table)],
        };
        let out = render(&doc);
        let row = out.lines().find(|l| l.contains("5.15")).unwrap();
        assert_eq!(row, "| 5.15\\|\\<b\\>x\\</b\\> row \\[l\\](u) | ok |");
    }
}
