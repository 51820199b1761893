//! One model of a report, rendered by each format: a [`Document`] of
//! [`Section`]s, each a heading and blocks (paragraphs, tables, lists,
//! charts). `lemon report` and the reliability report build their model
//! once; [`text`], [`markdown`] and [`html`] render any model, so a
//! section is written once, not once per format.
//!
//! The model holds text already formatted for people (numbers rounded,
//! times in UTC): formats differ in layout, never in what a figure reads.

pub mod html;
pub mod markdown;
pub mod text;

/// A whole report: its title, the blocks under it, and its sections.
/// Charts may borrow the data they draw (`'a`).
#[derive(Default)]
pub struct Document<'a> {
    pub title: String,
    pub preamble: Vec<Block<'a>>,
    pub sections: Vec<Section<'a>>,
}

/// A heading and what it heads.
pub struct Section<'a> {
    pub heading: String,
    pub blocks: Vec<Block<'a>>,
}

impl<'a> Section<'a> {
    pub fn new(heading: impl Into<String>) -> Section<'a> {
        Section {
            heading: heading.into(),
            blocks: Vec::new(),
        }
    }

    /// Adds a block; returns the section, for building in one expression.
    pub fn with(mut self, block: impl Into<Block<'a>>) -> Section<'a> {
        self.blocks.push(block.into());
        self
    }

    pub fn push(&mut self, block: impl Into<Block<'a>>) {
        self.blocks.push(block.into());
    }
}

/// One piece of a section.
pub enum Block<'a> {
    Paragraph(Paragraph),
    Table(Table),
    /// Items, each with items under it (a node and its evidence).
    List(Vec<Item>),
    /// Lines kept as they are (a summary another module wrote).
    Preformatted(String),
    Chart(Box<dyn Chart + 'a>),
}

/// A figure drawn from data: an SVG element on a page; in text, lines
/// (or nothing, where a terminal cannot show it).
pub trait Chart {
    /// The chart as one inline `<svg>` element.
    fn svg(&self) -> String;
    /// The chart as lines of plain text, if it has a text form.
    fn text_lines(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What a paragraph is for, which decides where it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    /// Figures held back for want of data: says what is missing.
    Withheld,
    /// How a figure was computed: shown on pages (HTML, Markdown), left
    /// out of the terse text for terminals and mail.
    Note,
}

/// A run of text, with an optional id for scrapers and tests.
pub struct Paragraph {
    pub kind: Kind,
    pub id: Option<String>,
    pub spans: Vec<Span>,
}

impl Paragraph {
    pub fn new(kind: Kind, spans: Vec<Span>) -> Paragraph {
        Paragraph {
            kind,
            id: None,
            spans,
        }
    }

    /// A plain paragraph of spans (figures, code, emphasis).
    pub fn spans(spans: Vec<Span>) -> Paragraph {
        Paragraph::new(Kind::Plain, spans)
    }

    pub fn plain(text: impl Into<String>) -> Paragraph {
        Paragraph::new(Kind::Plain, vec![Span::Text(text.into())])
    }

    pub fn note(text: impl Into<String>) -> Paragraph {
        Paragraph::new(Kind::Note, vec![Span::Text(text.into())])
    }

    pub fn withheld(text: impl Into<String>) -> Paragraph {
        Paragraph::new(Kind::Withheld, vec![Span::Text(text.into())])
    }

    pub fn id(mut self, id: impl Into<String>) -> Paragraph {
        self.id = Some(id.into());
        self
    }
}

impl From<Paragraph> for Block<'_> {
    fn from(p: Paragraph) -> Self {
        Block::Paragraph(p)
    }
}

impl From<Table> for Block<'_> {
    fn from(t: Table) -> Self {
        Block::Table(t)
    }
}

/// Inline text.
#[derive(Debug, Clone, PartialEq)]
pub enum Span {
    Text(String),
    /// Stands out: a tripped rule, a refusal.
    Strong(String),
    /// Set apart: a row that is not data.
    Emphasis(String),
    /// A name or command, as typed.
    Code(String),
    /// A key figure, with an id scrapers and tests read it by.
    Figure {
        id: String,
        text: String,
    },
}

impl Span {
    /// The text without its markup.
    pub fn plain(&self) -> &str {
        match self {
            Span::Text(t) | Span::Strong(t) | Span::Emphasis(t) | Span::Code(t) => t,
            Span::Figure { text, .. } => text,
        }
    }

    pub fn figure(id: &str, text: impl Into<String>) -> Span {
        Span::Figure {
            id: id.into(),
            text: text.into(),
        }
    }
}

impl From<String> for Span {
    fn from(s: String) -> Span {
        Span::Text(s)
    }
}

impl From<&str> for Span {
    fn from(s: &str) -> Span {
        Span::Text(s.to_string())
    }
}

/// The spans' text without markup, joined.
pub fn plain(spans: &[Span]) -> String {
    spans.iter().map(Span::plain).collect()
}

/// A list item and the items under it.
pub struct Item {
    pub spans: Vec<Span>,
    pub children: Vec<Item>,
}

impl Item {
    pub fn new(spans: Vec<Span>) -> Item {
        Item {
            spans,
            children: Vec::new(),
        }
    }

    pub fn text(text: impl Into<String>) -> Item {
        Item::new(vec![Span::Text(text.into())])
    }

    pub fn child(mut self, item: Item) -> Item {
        self.children.push(item);
        self
    }
}

/// How a column lines up in text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A column: its heading, and in text its alignment and least width.
pub struct Column {
    pub head: String,
    pub align: Align,
    pub width: usize,
}

/// A table with a heading row; `id` names it on pages.
pub struct Table {
    pub id: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Span>>,
}

impl Table {
    pub fn new(id: &str) -> Table {
        Table {
            id: id.into(),
            columns: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// A left-aligned column at least `width` wide in text.
    pub fn left(self, head: &str, width: usize) -> Table {
        self.column(head, Align::Left, width)
    }

    /// A right-aligned column at least `width` wide in text.
    pub fn right(self, head: &str, width: usize) -> Table {
        self.column(head, Align::Right, width)
    }

    fn column(mut self, head: &str, align: Align, width: usize) -> Table {
        self.columns.push(Column {
            head: head.into(),
            align,
            width,
        });
        self
    }

    /// Adds a row of plain cells.
    pub fn row<S: Into<Span>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Adds plain rows; returns the table.
    pub fn rows<R, S>(mut self, rows: impl IntoIterator<Item = R>) -> Table
    where
        R: IntoIterator<Item = S>,
        S: Into<Span>,
    {
        for r in rows {
            self.row(r);
        }
        self
    }
}
