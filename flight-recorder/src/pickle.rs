//! A pickle reader for plain data only: dict, list, tuple, str, bytes, int,
//! float, bool and None, in protocols 2 to 5.
//!
//! A flight-recorder dump is written by the job's user (any process of the
//! job can write into the dump directory) and read by root, so it is
//! hostile input. Python's own `pickle.loads` would run whatever a GLOBAL +
//! REDUCE names; this reader has no such opcodes at all: GLOBAL,
//! STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, PERSID,
//! BINPERSID, the EXT codes and out-of-band buffers are refused by name
//! with their byte offset, as is any byte that is not an opcode.
//!
//! Every claim in the input is checked before it costs anything: a string
//! length against the bytes left and [`Limits::max_string`], a container
//! against [`Limits::max_len`], the values made against [`Limits::max_values`]
//! (a memo reference re-used many times, the "billion laughs", is counted
//! each time it is expanded), and nesting against [`Limits::max_depth`]
//! (which also stops a list that contains itself).
//!
//! Containers live in an arena while parsing so that the memo keeps
//! pickle's reference semantics: `EMPTY_DICT, BINPUT 3, MARK ... SETITEMS`
//! fills the very dict that a later `BINGET 3` names (PyTorch's pickler
//! shares one frame dict between all the entries whose stacks hold it).

use std::collections::HashMap;
use thiserror::Error;

/// A plain-data value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// Pairs in the order written; a later duplicate key wins, as in Python.
    Dict(Vec<(Value, Value)>),
}

impl Value {
    /// The value of the string key `key` in a dict (the last one written).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(pairs) => pairs
                .iter()
                .rev()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The kind's Python name, for errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
        }
    }
}

/// Caps on what one pickle may cost.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The whole input, in bytes.
    pub max_bytes: usize,
    /// Nesting of containers in the result.
    pub max_depth: usize,
    /// Items of one list, tuple or dict.
    pub max_len: usize,
    /// Bytes of one str or bytes value.
    pub max_string: usize,
    /// Values made, counting each expansion of a memo reference.
    pub max_values: usize,
}

impl Default for Limits {
    /// Sized for PyTorch's default ring of 2000 entries with stack frames
    /// (a few MiB) with room to spare; see `DEFAULT_MAX_DUMP_BYTES`.
    fn default() -> Limits {
        Limits {
            max_bytes: crate::DEFAULT_MAX_DUMP_BYTES as usize,
            max_depth: 32,
            max_len: 1 << 20,
            max_string: 1 << 20,
            max_values: 8 << 20,
        }
    }
}

/// Why a pickle was refused: what, at which byte.
#[derive(Debug, Error, PartialEq)]
#[error("pickle byte {offset}: {problem}")]
pub struct PickleError {
    pub offset: usize,
    pub problem: Problem,
}

#[derive(Debug, Error, PartialEq)]
pub enum Problem {
    #[error("opcode {name} (0x{code:02x}) is not plain data: refused, nothing in a dump needs it")]
    Forbidden { name: &'static str, code: u8 },
    #[error("unknown opcode 0x{0:02x}")]
    Unknown(u8),
    #[error("protocol {0} is not supported (2 to 5 are)")]
    Protocol(u8),
    #[error("input of {size} bytes is over the cap of {cap}")]
    InputTooLarge { size: usize, cap: usize },
    #[error("truncated: needs {need} bytes, {left} left")]
    Truncated { need: u64, left: usize },
    #[error("a string of {0} bytes is over the cap")]
    StringTooLong(u64),
    #[error("a container of over {0} items is over the cap")]
    TooLong(usize),
    #[error("over {0} values (a memo reference expanded too often?)")]
    TooManyValues(usize),
    #[error("nesting deeper than {0}")]
    TooDeep(usize),
    #[error("integer wider than 64 bits")]
    IntTooWide,
    #[error("string is not UTF-8")]
    NotUtf8,
    #[error("stack empty")]
    StackEmpty,
    #[error("no MARK open")]
    NoMark,
    #[error("memo {0} was never stored")]
    NoMemo(u64),
    #[error("{0} applied to a {1}")]
    WrongTarget(&'static str, &'static str),
    #[error("a {0} cannot be a dict key")]
    Unhashable(&'static str),
    #[error("SETITEMS with an odd number of items")]
    OddItems,
    #[error("the input ends without STOP")]
    NoStop,
    #[error("STOP with {0} values on the stack (expected 1)")]
    BadStop(usize),
    #[error("bad text argument")]
    BadText,
}

/// Parses one pickle of plain data.
pub fn parse(input: &[u8], limits: &Limits) -> Result<Value, PickleError> {
    if input.len() > limits.max_bytes {
        return Err(PickleError {
            offset: 0,
            problem: Problem::InputTooLarge {
                size: input.len(),
                cap: limits.max_bytes,
            },
        });
    }
    let mut machine = Machine {
        input,
        pos: 0,
        op_start: 0,
        limits,
        arena: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    let root = machine.run()?;
    // Count first, so that an expansion over the cap costs no allocation.
    machine.expanded_size(root, 0, &mut vec![0; machine.arena.len()])?;
    let mut budget = limits.max_values;
    machine.materialize(root, 0, &mut budget)
}

/// A value under construction; containers hold arena indices.
enum Node {
    Scalar(Value),
    List(Vec<usize>),
    Tuple(Vec<usize>),
    Dict(Vec<(usize, usize)>),
}

struct Machine<'a> {
    input: &'a [u8],
    pos: usize,
    op_start: usize,
    limits: &'a Limits,
    arena: Vec<Node>,
    stack: Vec<usize>,
    marks: Vec<usize>,
    memo: HashMap<u64, usize>,
}

/// Opcodes that make objects or call code, by name.
fn forbidden(code: u8) -> Option<&'static str> {
    Some(match code {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        _ => return None,
    })
}

impl<'a> Machine<'a> {
    fn fail<T>(&self, problem: Problem) -> Result<T, PickleError> {
        Err(PickleError {
            offset: self.op_start,
            problem,
        })
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], PickleError> {
        let left = self.input.len() - self.pos;
        if n > left as u64 {
            return self.fail(Problem::Truncated { need: n, left });
        }
        let bytes = &self.input[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(bytes)
    }

    fn uint(&mut self, n: u64) -> Result<u64, PickleError> {
        let bytes = self.take(n)?;
        Ok(bytes
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// A decimal argument ended by a newline (PUT, GET).
    fn text_uint(&mut self) -> Result<u64, PickleError> {
        let rest = &self.input[self.pos..];
        let Some(end) = rest.iter().take(24).position(|&b| b == b'\n') else {
            return self.fail(Problem::BadText);
        };
        let text = std::str::from_utf8(&rest[..end]).ok();
        self.pos += end + 1;
        match text.and_then(|t| t.parse::<u64>().ok()) {
            Some(n) => Ok(n),
            None => self.fail(Problem::BadText),
        }
    }

    fn push_node(&mut self, node: Node) -> Result<(), PickleError> {
        if self.arena.len() >= self.limits.max_values {
            return self.fail(Problem::TooManyValues(self.limits.max_values));
        }
        self.arena.push(node);
        self.stack.push(self.arena.len() - 1);
        Ok(())
    }

    fn scalar(&mut self, v: Value) -> Result<(), PickleError> {
        self.push_node(Node::Scalar(v))
    }

    fn pop(&mut self) -> Result<usize, PickleError> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            // Popping across a MARK would corrupt the frame being built.
            return self.fail(Problem::StackEmpty);
        }
        match self.stack.pop() {
            Some(i) => Ok(i),
            None => self.fail(Problem::StackEmpty),
        }
    }

    fn top(&self) -> Result<usize, PickleError> {
        match self.stack.last() {
            Some(&i) => Ok(i),
            None => self.fail(Problem::StackEmpty),
        }
    }

    /// The items since the last MARK, which is closed.
    fn pop_mark(&mut self) -> Result<Vec<usize>, PickleError> {
        let Some(mark) = self.marks.pop() else {
            return self.fail(Problem::NoMark);
        };
        Ok(self.stack.split_off(mark))
    }

    fn string(&mut self, len: u64, utf8: bool) -> Result<(), PickleError> {
        if len > self.limits.max_string as u64 {
            return self.fail(Problem::StringTooLong(len));
        }
        let bytes = self.take(len)?;
        let value = if utf8 {
            match std::str::from_utf8(bytes) {
                Ok(s) => Value::Str(s.to_string()),
                Err(_) => return self.fail(Problem::NotUtf8),
            }
        } else {
            Value::Bytes(bytes.to_vec())
        };
        self.scalar(value)
    }

    /// LONG1/LONG4: little-endian two's complement, at most 8 bytes here.
    fn long(&mut self, len: u64) -> Result<(), PickleError> {
        if len > 8 {
            return self.fail(Problem::IntTooWide);
        }
        let bytes = self.take(len)?;
        let mut v: i64 = 0;
        for (i, &b) in bytes.iter().enumerate() {
            v |= i64::from(b) << (8 * i);
        }
        if len > 0 && len < 8 && bytes[len as usize - 1] & 0x80 != 0 {
            v -= 1i64 << (8 * len);
        }
        self.scalar(Value::Int(v))
    }

    fn memo_put(&mut self, index: u64) -> Result<(), PickleError> {
        let top = self.top()?;
        if self.memo.len() >= self.limits.max_values && !self.memo.contains_key(&index) {
            return self.fail(Problem::TooManyValues(self.limits.max_values));
        }
        self.memo.insert(index, top);
        Ok(())
    }

    fn memo_get(&mut self, index: u64) -> Result<(), PickleError> {
        match self.memo.get(&index) {
            Some(&node) => {
                self.stack.push(node);
                Ok(())
            }
            None => self.fail(Problem::NoMemo(index)),
        }
    }

    fn check_len(&self, len: usize) -> Result<(), PickleError> {
        if len > self.limits.max_len {
            return self.fail(Problem::TooLong(self.limits.max_len));
        }
        Ok(())
    }

    fn append(&mut self, items: Vec<usize>) -> Result<(), PickleError> {
        let target = self.top()?;
        let max = self.limits.max_len;
        match &mut self.arena[target] {
            Node::List(list) if list.len() + items.len() <= max => {
                list.extend(items);
                Ok(())
            }
            Node::List(_) => self.fail(Problem::TooLong(max)),
            other => {
                let kind = node_kind(other);
                self.fail(Problem::WrongTarget("APPEND", kind))
            }
        }
    }

    fn set_items(&mut self, items: Vec<usize>) -> Result<(), PickleError> {
        if items.len() % 2 == 1 {
            return self.fail(Problem::OddItems);
        }
        for pair in items.chunks(2) {
            if let Node::List(_) | Node::Dict(_) = self.arena[pair[0]] {
                let kind = node_kind(&self.arena[pair[0]]);
                return self.fail(Problem::Unhashable(kind));
            }
        }
        let target = self.top()?;
        let max = self.limits.max_len;
        match &mut self.arena[target] {
            Node::Dict(pairs) if pairs.len() + items.len() / 2 <= max => {
                pairs.extend(items.chunks(2).map(|p| (p[0], p[1])));
                Ok(())
            }
            Node::Dict(_) => self.fail(Problem::TooLong(max)),
            other => {
                let kind = node_kind(other);
                self.fail(Problem::WrongTarget("SETITEM", kind))
            }
        }
    }

    fn tuple(&mut self, n: usize) -> Result<(), PickleError> {
        if self.stack.len() < n || self.marks.last().is_some_and(|&m| m > self.stack.len() - n) {
            return self.fail(Problem::StackEmpty);
        }
        let items = self.stack.split_off(self.stack.len() - n);
        self.push_node(Node::Tuple(items))
    }

    /// Runs opcodes up to STOP; returns the arena index of the result.
    fn run(&mut self) -> Result<usize, PickleError> {
        loop {
            self.op_start = self.pos;
            let Some(&code) = self.input.get(self.pos) else {
                return self.fail(Problem::NoStop);
            };
            self.pos += 1;
            if code == b'.' {
                if self.stack.len() != 1 || !self.marks.is_empty() {
                    return self.fail(Problem::BadStop(self.stack.len()));
                }
                return Ok(self.stack[0]);
            }
            self.step(code)?;
        }
    }

    fn step(&mut self, code: u8) -> Result<(), PickleError> {
        if let Some(name) = forbidden(code) {
            return self.fail(Problem::Forbidden { name, code });
        }
        match code {
            0x80 => {
                let v = self.uint(1)? as u8;
                if !(2..=5).contains(&v) {
                    return self.fail(Problem::Protocol(v));
                }
            }
            0x95 => {
                // FRAME: a length hint; the bytes are read as they come.
                let len = self.uint(8)?;
                let left = self.input.len() - self.pos;
                if len > left as u64 {
                    return self.fail(Problem::Truncated { need: len, left });
                }
            }
            b'N' => self.scalar(Value::None)?,
            0x88 => self.scalar(Value::Bool(true))?,
            0x89 => self.scalar(Value::Bool(false))?,
            b'K' => {
                let v = self.uint(1)? as i64;
                self.scalar(Value::Int(v))?
            }
            b'M' => {
                let v = self.uint(2)? as i64;
                self.scalar(Value::Int(v))?
            }
            b'J' => {
                let v = self.uint(4)? as u32 as i32;
                self.scalar(Value::Int(i64::from(v)))?
            }
            0x8a => {
                let n = self.uint(1)?;
                self.long(n)?
            }
            0x8b => {
                let n = self.uint(4)?;
                self.long(n)?
            }
            b'G' => {
                let bits = self.take(8)?;
                let v = f64::from_be_bytes(bits.try_into().expect("8 bytes"));
                self.scalar(Value::Float(v))?
            }
            _ => self.step_data(code)?,
        }
        Ok(())
    }

    fn step_data(&mut self, code: u8) -> Result<(), PickleError> {
        match code {
            0x8c => {
                let n = self.uint(1)?;
                self.string(n, true)?
            }
            b'X' => {
                let n = self.uint(4)?;
                self.string(n, true)?
            }
            0x8d => {
                let n = self.uint(8)?;
                self.string(n, true)?
            }
            b'C' => {
                let n = self.uint(1)?;
                self.string(n, false)?
            }
            b'B' => {
                let n = self.uint(4)?;
                self.string(n, false)?
            }
            0x8e | 0x96 => {
                let n = self.uint(8)?;
                self.string(n, false)?
            }
            b'}' => self.push_node(Node::Dict(Vec::new()))?,
            b']' => self.push_node(Node::List(Vec::new()))?,
            b')' => self.push_node(Node::Tuple(Vec::new()))?,
            _ => self.step_structure(code)?,
        }
        Ok(())
    }

    fn step_structure(&mut self, code: u8) -> Result<(), PickleError> {
        match code {
            b'(' => {
                if self.marks.len() >= self.limits.max_depth {
                    return self.fail(Problem::TooDeep(self.limits.max_depth));
                }
                self.marks.push(self.stack.len());
            }
            b't' => {
                let items = self.pop_mark()?;
                self.check_len(items.len())?;
                self.push_node(Node::Tuple(items))?
            }
            0x85 => self.tuple(1)?,
            0x86 => self.tuple(2)?,
            0x87 => self.tuple(3)?,
            b'l' => {
                let items = self.pop_mark()?;
                self.check_len(items.len())?;
                self.push_node(Node::List(items))?
            }
            b'd' => {
                let items = self.pop_mark()?;
                self.push_node(Node::Dict(Vec::new()))?;
                self.set_items(items)?
            }
            b'a' => {
                let item = self.pop()?;
                self.append(vec![item])?
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.append(items)?
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                self.set_items(vec![key, value])?
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.set_items(items)?
            }
            _ => self.step_stack(code)?,
        }
        Ok(())
    }

    fn step_stack(&mut self, code: u8) -> Result<(), PickleError> {
        match code {
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let top = self.top()?;
                self.stack.push(top);
            }
            b'q' => {
                let i = self.uint(1)?;
                self.memo_put(i)?
            }
            b'r' => {
                let i = self.uint(4)?;
                self.memo_put(i)?
            }
            b'p' => {
                let i = self.text_uint()?;
                self.memo_put(i)?
            }
            0x94 => {
                let i = self.memo.len() as u64;
                self.memo_put(i)?
            }
            b'h' => {
                let i = self.uint(1)?;
                self.memo_get(i)?
            }
            b'j' => {
                let i = self.uint(4)?;
                self.memo_get(i)?
            }
            b'g' => {
                let i = self.text_uint()?;
                self.memo_get(i)?
            }
            other => return self.fail(Problem::Unknown(other)),
        }
        Ok(())
    }

    /// How many values the tree under `i` has once shared nodes are copied;
    /// an error past [`Limits::max_values`] or [`Limits::max_depth`]. Each
    /// node is counted once (`sizes`, 0 for not yet), so this costs the
    /// arena's size.
    fn expanded_size(
        &self,
        i: usize,
        depth: usize,
        sizes: &mut [usize],
    ) -> Result<usize, PickleError> {
        if depth > self.limits.max_depth {
            return self.fail(Problem::TooDeep(self.limits.max_depth));
        }
        if sizes[i] != 0 {
            return Ok(sizes[i]);
        }
        let mut total = 1usize;
        let mut add = |c: usize, sizes: &mut [usize]| -> Result<(), PickleError> {
            total = total.saturating_add(self.expanded_size(c, depth + 1, sizes)?);
            if total > self.limits.max_values {
                return self.fail(Problem::TooManyValues(self.limits.max_values));
            }
            Ok(())
        };
        match &self.arena[i] {
            Node::Scalar(_) => {}
            Node::List(items) | Node::Tuple(items) => {
                for &c in items {
                    add(c, sizes)?;
                }
            }
            Node::Dict(pairs) => {
                for &(k, v) in pairs {
                    add(k, sizes)?;
                    add(v, sizes)?;
                }
            }
        }
        sizes[i] = total;
        Ok(total)
    }

    /// The tree under arena node `i`: shared nodes are copied, and every
    /// copy is charged to `budget`.
    fn materialize(
        &self,
        i: usize,
        depth: usize,
        budget: &mut usize,
    ) -> Result<Value, PickleError> {
        if depth > self.limits.max_depth {
            return self.fail(Problem::TooDeep(self.limits.max_depth));
        }
        if *budget == 0 {
            return self.fail(Problem::TooManyValues(self.limits.max_values));
        }
        *budget -= 1;
        let many = |items: &[usize], budget: &mut usize| {
            items
                .iter()
                .map(|&c| self.materialize(c, depth + 1, budget))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(match &self.arena[i] {
            Node::Scalar(v) => v.clone(),
            Node::List(items) => Value::List(many(items, budget)?),
            Node::Tuple(items) => Value::Tuple(many(items, budget)?),
            Node::Dict(pairs) => {
                let mut out = Vec::with_capacity(pairs.len());
                for &(k, v) in pairs {
                    let key = self.materialize(k, depth + 1, budget)?;
                    out.push((key, self.materialize(v, depth + 1, budget)?));
                }
                Value::Dict(out)
            }
        })
    }
}

fn node_kind(node: &Node) -> &'static str {
    match node {
        Node::Scalar(v) => v.kind(),
        Node::List(_) => "list",
        Node::Tuple(_) => "tuple",
        Node::Dict(_) => "dict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_default(bytes: &[u8]) -> Result<Value, PickleError> {
        parse(bytes, &Limits::default())
    }

    #[test]
    fn a_protocol_2_dict_with_memo_references_reads_back() {
        // {'a': [1, -2, 70000, 2**40], 'b': 'a'} with 'a' stored then fetched.
        let mut p = vec![
            0x80, 2, b'}', b'q', 0, b'(', b'X', 1, 0, 0, 0, b'a', b'q', 1,
        ];
        p.extend([b']', b'q', 2, b'(', b'K', 1, b'J', 0xfe, 0xff, 0xff, 0xff]);
        p.extend([
            b'J', 0x70, 0x11, 0x01, 0x00, 0x8a, 6, 0, 0, 0, 0, 0, 1, b'e',
        ]);
        p.extend([b'X', 1, 0, 0, 0, b'b', b'h', 1, b'u', b'.']);
        let v = parse_default(&p).unwrap();
        assert_eq!(
            v.get("a"),
            Some(&Value::List(vec![
                Value::Int(1),
                Value::Int(-2),
                Value::Int(70000),
                Value::Int(1 << 40)
            ]))
        );
        assert_eq!(v.get("b"), Some(&Value::Str("a".into())));
    }

    #[test]
    fn a_memo_reference_names_the_filled_container_not_an_empty_copy() {
        // x = {'k': 1}; [x, x]: the dict is memoized while still empty.
        let p = [
            0x80, 4, b']', 0x94, b'(', b'}', 0x94, 0x8c, 1, b'k', 0x94, b'K', 1, b's', b'h', 1,
            b'e', b'.',
        ];
        let v = parse_default(&p).unwrap();
        let d = Value::Dict(vec![(Value::Str("k".into()), Value::Int(1))]);
        assert_eq!(v, Value::List(vec![d.clone(), d]));
    }

    #[test]
    fn negative_long1_integers_are_sign_extended() {
        let p = [0x80, 2, 0x8a, 2, 0x00, 0x80, b'.'];
        assert_eq!(parse_default(&p).unwrap(), Value::Int(-32768));
    }

    #[test]
    fn a_global_is_refused_by_name_at_its_offset() {
        let p = b"\x80\x02cos\nsystem\nq\x00.";
        let err = parse_default(p).unwrap_err();
        assert_eq!(err.offset, 2);
        assert!(err.to_string().contains("GLOBAL"), "{err}");
    }

    #[test]
    fn a_list_that_contains_itself_is_too_deep_not_a_stack_overflow() {
        // l = []; l.append(l)
        let p = [0x80, 4, b']', 0x94, b'h', 0, b'a', b'.'];
        let err = parse_default(&p).unwrap_err();
        assert!(matches!(err.problem, Problem::TooDeep(_)), "{err}");
    }
}
