//! One self-contained HTML page: inline CSS and inline SVG charts, no
//! script at all, so it can be mailed, archived and opened offline.
//! Paragraphs, tables and key figures carry the ids the model gives them,
//! so that tests and scrapers can read them.

use super::{Block, Document, Item, Kind, Paragraph, Span, Table};
use std::fmt::Write;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}\
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #eee}\
th{background:#f5f5f5}td:first-child,th:first-child{text-align:left}.note{color:#666;font-size:.9em}\
.figure{font-weight:bold}svg{display:block;margin:.6em 0}pre{font-size:.9em}";

/// The document as one HTML page.
pub fn render(doc: &Document<'_>) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>",
        t = esc(&doc.title)
    );
    blocks(&mut o, &doc.preamble);
    for s in &doc.sections {
        let _ = write!(o, "<h2>{}</h2>", esc(&s.heading));
        blocks(&mut o, &s.blocks);
    }
    o.push_str("</body></html>\n");
    o
}

/// Escapes text for HTML content and attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn blocks(o: &mut String, blocks: &[Block<'_>]) {
    for b in blocks {
        match b {
            Block::Paragraph(p) => paragraph(o, p),
            Block::Table(t) => table(o, t),
            Block::List(items) => list(o, items),
            Block::Preformatted(text) => {
                let _ = write!(o, "<pre>{}</pre>", esc(text));
            }
            Block::Chart(c) => o.push_str(&c.svg()),
        }
    }
}

fn paragraph(o: &mut String, p: &Paragraph) {
    o.push_str("<p");
    match p.kind {
        Kind::Plain => {}
        Kind::Withheld => o.push_str(" class=\"withheld\""),
        Kind::Note => o.push_str(" class=\"note\""),
    }
    if let Some(id) = &p.id {
        let _ = write!(o, " id=\"{}\"", esc(id));
    }
    o.push('>');
    spans(o, &p.spans);
    o.push_str("</p>");
}

fn spans(o: &mut String, spans: &[Span]) {
    for s in spans {
        let _ = match s {
            Span::Text(t) => write!(o, "{}", esc(t)),
            Span::Strong(t) => write!(o, "<strong>{}</strong>", esc(t)),
            Span::Emphasis(t) => write!(o, "<em>{}</em>", esc(t)),
            Span::Code(t) => write!(o, "<code>{}</code>", esc(t)),
            Span::Figure { id, text } => write!(
                o,
                "<span class=\"figure\" id=\"{}\">{}</span>",
                esc(id),
                esc(text)
            ),
        };
    }
}

fn list(o: &mut String, items: &[Item]) {
    o.push_str("<ul>");
    for item in items {
        o.push_str("<li>");
        spans(o, &item.spans);
        if !item.children.is_empty() {
            list(o, &item.children);
        }
        o.push_str("</li>");
    }
    o.push_str("</ul>");
}

fn table(o: &mut String, t: &Table) {
    let _ = write!(o, "<table id=\"{}\"><thead><tr>", esc(&t.id));
    for c in &t.columns {
        let _ = write!(o, "<th>{}</th>", esc(&c.head));
    }
    o.push_str("</tr></thead><tbody>");
    for row in &t.rows {
        o.push_str("<tr>");
        for cell in row {
            o.push_str("<td>");
            spans(o, std::slice::from_ref(cell));
            o.push_str("</td>");
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::super::{Document, Paragraph, Section, Span, Table};
    use super::render;

    #[test]
    fn html_escapes_text_and_keeps_ids_on_figures_and_tables() {
        let mut table = Table::new("t").left("a<b", 0);
        table.row([Span::figure("n", "1 & 2")]);
        let doc = Document {
            title: "R&D".into(),
            preamble: vec![Paragraph::withheld("not yet").id("w").into()],
            sections: vec![Section::new("S").with(table)],
        };
        let html = render(&doc);
        assert!(html.contains("<title>R&amp;D</title>"), "{html}");
        assert!(html.contains("<p class=\"withheld\" id=\"w\">not yet</p>"));
        assert!(html.contains("<h2>S</h2><table id=\"t\"><thead><tr><th>a&lt;b</th>"));
        assert!(html.contains("<td><span class=\"figure\" id=\"n\">1 &amp; 2</span></td>"));
        assert!(!html.contains("<script"));
    }
}
