//! Plain text for terminals and cron mail: the title, then each section's
//! heading with its blocks indented by two spaces and tables aligned in
//! columns. Notes (how a figure was computed) are left out.

use super::{plain, Align, Block, Document, Item, Kind, Table};

const INDENT: &str = "  ";

/// The document as plain text.
pub fn render(doc: &Document<'_>) -> String {
    let mut o = String::new();
    o.push_str(&doc.title);
    o.push('\n');
    blocks(&mut o, &doc.preamble, "");
    for s in &doc.sections {
        o.push('\n');
        o.push_str(&s.heading);
        o.push('\n');
        blocks(&mut o, &s.blocks, INDENT);
    }
    o
}

fn blocks(o: &mut String, blocks: &[Block<'_>], indent: &str) {
    for b in blocks {
        match b {
            Block::Paragraph(p) if p.kind == Kind::Note => {}
            Block::Paragraph(p) => line(o, indent, &plain(&p.spans)),
            Block::Table(t) => table(o, t, indent),
            Block::List(items) => list(o, items, indent),
            Block::Preformatted(text) => text.lines().for_each(|l| line(o, indent, l)),
            Block::Chart(c) => c.text_lines().iter().for_each(|l| line(o, indent, l)),
        }
    }
}

/// One line, without the spaces a padded last cell leaves.
fn line(o: &mut String, indent: &str, text: &str) {
    o.push_str(indent);
    o.push_str(text.trim_end());
    o.push('\n');
}

fn list(o: &mut String, items: &[Item], indent: &str) {
    let deeper = format!("{indent}{INDENT}");
    for item in items {
        line(o, indent, &plain(&item.spans));
        list(o, &item.children, &deeper);
    }
}

/// The heading row and the rows, each column as wide as its widest cell
/// (at least its own width), separated by one space.
fn table(o: &mut String, t: &Table, indent: &str) {
    let widths: Vec<usize> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            t.rows
                .iter()
                .filter_map(|r| r.get(i))
                .map(|s| s.plain().chars().count())
                .chain([c.width, c.head.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let cells = |texts: Vec<&str>| -> String {
        let padded: Vec<String> = texts
            .iter()
            .zip(&t.columns)
            .zip(&widths)
            .map(|((text, c), &w)| pad(text, c.align, w))
            .collect();
        padded.join(" ")
    };
    line(
        o,
        indent,
        &cells(t.columns.iter().map(|c| c.head.as_str()).collect()),
    );
    for r in &t.rows {
        line(o, indent, &cells(r.iter().map(|s| s.plain()).collect()));
    }
}

fn pad(text: &str, align: Align, width: usize) -> String {
    match align {
        Align::Left => format!("{text:<width$}"),
        Align::Right => format!("{text:>width$}"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Document, Item, Paragraph, Section, Span, Table};
    use super::render;

    #[test]
    fn text_indents_sections_aligns_columns_and_leaves_notes_out() {
        let table = Table::new("t")
            .left("name", 6)
            .right("n", 3)
            .rows([["a", "1"], ["longer name", "22"]]);
        let doc = Document {
            title: "Title".into(),
            preamble: vec![Paragraph::plain("intro").into()],
            sections: vec![Section::new("Part")
                .with(Paragraph::note("how it was computed"))
                .with(table)
                .with(super::super::Block::List(vec![Item::new(vec![
                    Span::Code("x".into()),
                    ": y".into(),
                ])
                .child(Item::text("under"))]))],
        };
        assert_eq!(
            render(&doc),
            "Title\nintro\n\nPart\n  name          n\n  a             1\n  longer name  22\n  x: y\n    under\n"
        );
    }
}
