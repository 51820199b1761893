//! Dumps written the way PyTorch writes them, for tests and for the planted
//! dumps of the end-to-end test (no training process runs there).
//!
//! [`Pickler`] follows the rules of `torch/csrc/jit/serialization/pickler.cpp`,
//! which `FlightRecorder::dump` uses through `pickle_str`: protocol 2
//! (`PROTO 2` ... `STOP`, no FRAME); every string memoized on first use
//! (`BINUNICODE` + `BINPUT`) and fetched with `BINGET` after; a container
//! memoized only when it is shared (the frame dicts, one per distinct stack
//! frame, referenced from every entry whose stack holds it), after it is
//! complete; dicts as `EMPTY_DICT MARK k v ... SETITEMS`, lists as
//! `EMPTY_LIST MARK ... APPENDS`, tuples of 1 to 3 items as `TUPLE1` to
//! `TUPLE3` (the `process_group` pair is a `TUPLE2`), longer ones as
//! `MARK ... TUPLE`; ints as
//! `BININT1`, `BININT2`, `BININT` or an 8-byte `LONG1`; floats as big-endian
//! `BINFLOAT`. Python's own pickler (protocol 4: FRAME, MEMOIZE,
//! SHORT_BINUNICODE) is covered by the fixtures in `tests/fixtures/`.
//!
//! `pickle_str` in `TraceUtils.h` builds the pickler with type tags off
//! (its last argument, `false`), and the dump's lists and dicts are
//! `c10::List<IValue>`/`c10::Dict<IValue, IValue>` of `AnyType`, so no
//! `GLOBAL ... REDUCE` (type tags, `build_intlist`) appears in a real dump,
//! which is what lets the reader refuse them all.

use std::collections::HashMap;
use std::rc::Rc;

/// A value to pickle; `Shared` is one object referenced from many places.
#[derive(Debug, Clone)]
pub enum P {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<P>),
    Tuple(Vec<P>),
    Dict(Vec<(P, P)>),
    Shared(Rc<P>),
}

/// `P::Str` from anything string-like.
pub fn s(x: impl Into<String>) -> P {
    P::Str(x.into())
}

/// A dict with string keys.
pub fn dict(pairs: Vec<(&str, P)>) -> P {
    P::Dict(pairs.into_iter().map(|(k, v)| (s(k), v)).collect())
}

/// PyTorch's pickler, as described in the module comment.
#[derive(Default)]
pub struct Pickler {
    out: Vec<u8>,
    memo_next: u32,
    strings: HashMap<String, u32>,
    shared: HashMap<*const P, u32>,
}

impl Pickler {
    /// The pickle of `v`.
    pub fn dumps(v: &P) -> Vec<u8> {
        let mut p = Pickler::default();
        p.out.extend([0x80, 2]);
        p.push(v);
        p.out.push(b'.');
        p.out
    }

    fn put(&mut self) -> u32 {
        let id = self.memo_next;
        self.memo_next += 1;
        if id <= 255 {
            self.out.extend([b'q', id as u8]);
        } else {
            self.out.push(b'r');
            self.out.extend(id.to_le_bytes());
        }
        id
    }

    fn get(&mut self, id: u32) {
        if id <= 255 {
            self.out.extend([b'h', id as u8]);
        } else {
            self.out.push(b'j');
            self.out.extend(id.to_le_bytes());
        }
    }

    fn push(&mut self, v: &P) {
        match v {
            P::None => self.out.push(b'N'),
            P::Bool(b) => self.out.push(if *b { 0x88 } else { 0x89 }),
            P::Int(n) => self.int(*n),
            P::Float(f) => {
                self.out.push(b'G');
                self.out.extend(f.to_be_bytes());
            }
            P::Str(text) => self.string(text),
            P::List(items) => {
                self.out.push(b']');
                if !items.is_empty() {
                    self.out.push(b'(');
                    items.iter().for_each(|i| self.push(i));
                    self.out.push(b'e');
                }
            }
            P::Tuple(items) => {
                if items.is_empty() {
                    return self.out.push(b')');
                }
                let small = items.len() <= 3;
                if !small {
                    self.out.push(b'(');
                }
                items.iter().for_each(|i| self.push(i));
                // TUPLE1, TUPLE2, TUPLE3, else MARK ... TUPLE.
                self.out.push(if small {
                    0x84 + items.len() as u8
                } else {
                    b't'
                });
            }
            P::Dict(pairs) => {
                self.out.push(b'}');
                if !pairs.is_empty() {
                    self.out.push(b'(');
                    for (k, v) in pairs {
                        self.push(k);
                        self.push(v);
                    }
                    self.out.push(b'u');
                }
            }
            P::Shared(inner) => {
                let key = Rc::as_ptr(inner);
                if let Some(&id) = self.shared.get(&key) {
                    return self.get(id);
                }
                self.push(inner);
                let id = self.put();
                self.shared.insert(key, id);
            }
        }
    }

    fn int(&mut self, n: i64) {
        if (0..=255).contains(&n) {
            self.out.extend([b'K', n as u8]);
        } else if (0..=65535).contains(&n) {
            self.out.push(b'M');
            self.out.extend((n as u16).to_le_bytes());
        } else if i32::try_from(n).is_ok() {
            self.out.push(b'J');
            self.out.extend((n as i32).to_le_bytes());
        } else {
            self.out.extend([0x8a, 8]);
            self.out.extend(n.to_le_bytes());
        }
    }

    fn string(&mut self, text: &str) {
        if let Some(&id) = self.strings.get(text) {
            return self.get(id);
        }
        self.out.push(b'X');
        self.out.extend((text.len() as u32).to_le_bytes());
        self.out.extend(text.as_bytes());
        let id = self.put();
        self.strings.insert(text.to_string(), id);
    }
}

/// One collective as a rank's ring holds it.
#[derive(Debug, Clone)]
pub struct EntrySpec {
    pub record_id: i64,
    pub seq: i64,
    pub op: String,
    pub created_ns: i64,
    pub started_ns: Option<i64>,
    pub completed_ns: Option<i64>,
    pub duration_ms: Option<f64>,
    pub numel: i64,
}

/// The dump of one rank: group "0" (the default group), these entries,
/// `pg_status` from them, and a stack of shared frames per entry.
pub fn rank_dump(entries: &[EntrySpec]) -> Vec<u8> {
    let frames: Vec<Rc<P>> = ["all_reduce", "wrapper", "train_step", "main"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            Rc::new(dict(vec![
                ("name", s(*name)),
                (
                    "filename",
                    s(format!(
                        "/opt/venv/lib/python3.11/site-packages/torch/distributed/f{i}.py"
                    )),
                ),
                ("line", P::Int(100 + i as i64 * 37)),
            ]))
        })
        .collect();
    let last = |pred: &dyn Fn(&EntrySpec) -> bool| {
        entries
            .iter()
            .filter(|e| pred(e))
            .map(|e| e.seq)
            .max()
            .unwrap_or(-1)
    };
    let status = dict(vec![
        ("last_enqueued_collective", P::Int(last(&|_| true))),
        (
            "last_started_collective",
            P::Int(last(&|e| e.started_ns.is_some())),
        ),
        (
            "last_completed_collective",
            P::Int(last(&|e| e.completed_ns.is_some())),
        ),
    ]);
    let items = entries.iter().map(|e| entry(e, &frames)).collect();
    let pg = dict(vec![
        ("name", s("0")),
        ("desc", s("default_pg")),
        ("ranks", s("[0, ...]")),
    ]);
    Pickler::dumps(&dict(vec![
        ("version", s("2.10")),
        ("pg_config", P::Dict(vec![(s("0"), pg)])),
        ("pg_status", P::Dict(vec![(s("0"), status)])),
        ("entries", P::List(items)),
    ]))
}

fn entry(e: &EntrySpec, frames: &[Rc<P>]) -> P {
    let state = match (e.started_ns, e.completed_ns) {
        (_, Some(_)) => "completed",
        (Some(_), None) => "started",
        _ => "scheduled",
    };
    let opt = |t: Option<i64>| t.map_or(P::None, P::Int);
    let mut pairs = vec![
        (
            "frames",
            P::List(frames.iter().map(|f| P::Shared(f.clone())).collect()),
        ),
        ("record_id", P::Int(e.record_id)),
        ("pg_id", P::Int(0)),
        ("process_group", P::Tuple(vec![s("0"), s("default_pg")])),
        ("collective_seq_id", P::Int(e.seq)),
        ("p2p_seq_id", P::Int(0)),
        ("op_id", P::Int(e.seq)),
        ("profiling_name", s(e.op.clone())),
        ("time_created_ns", P::Int(e.created_ns)),
    ];
    if let Some(d) = e.duration_ms {
        pairs.push(("duration_ms", P::Float(d)));
    }
    pairs.extend([
        ("input_sizes", P::List(vec![P::List(vec![P::Int(e.numel)])])),
        ("input_dtypes", P::List(vec![s("Float")])),
        (
            "output_sizes",
            P::List(vec![P::List(vec![P::Int(e.numel)])]),
        ),
        ("output_dtypes", P::List(vec![s("Float")])),
        ("state", s(state)),
        ("time_discovered_started_ns", opt(e.started_ns)),
        ("time_discovered_completed_ns", opt(e.completed_ns)),
        ("retired", P::Bool(e.completed_ns.is_some())),
        ("timeout_ms", P::Int(600_000)),
        ("is_p2p", P::Bool(false)),
    ]);
    dict(pairs)
}

/// A job to generate: `ranks` ranks that ran collectives up to `last_seq`.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub ranks: u32,
    pub last_seq: i64,
    /// Entries kept in each ring (`TORCH_NCCL_TRACE_BUFFER_SIZE`).
    pub ring: i64,
    /// Durations recorded (`TORCH_NCCL_ENABLE_TIMING=1`).
    pub timing: bool,
    /// This rank never enters `last_seq`; everyone else waits in it.
    pub hung_rank: Option<u32>,
    /// The hung rank did enqueue `last_seq`, but its kernel never started
    /// (a GPU stuck on earlier work) rather than its CPU never getting there.
    pub hung_enqueued: bool,
    /// This rank arrives `straggler_lag_ms` late at every collective.
    pub straggler: Option<u32>,
    pub straggler_lag_ms: f64,
    pub seed: u64,
}

impl Default for JobSpec {
    fn default() -> JobSpec {
        JobSpec {
            ranks: 64,
            last_seq: 18231,
            ring: 20,
            timing: false,
            hung_rank: None,
            hung_enqueued: false,
            straggler: None,
            straggler_lag_ms: 30.0,
            seed: 1,
        }
    }
}

/// A small deterministic generator (no dependency for test data).
struct Lcg(u64);

impl Lcg {
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Every rank's dump, as `(rank, bytes)`.
pub fn job_dumps(spec: &JobSpec) -> Vec<(u32, Vec<u8>)> {
    let mut rng = Lcg(spec.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..spec.ranks)
        .map(|rank| (rank, rank_dump(&rank_entries(spec, rank, &mut rng))))
        .collect()
}

fn rank_entries(spec: &JobSpec, rank: u32, rng: &mut Lcg) -> Vec<EntrySpec> {
    const T0: i64 = 1_764_000_000_000_000_000;
    const STEP_NS: i64 = 50_000_000;
    let first = (spec.last_seq - spec.ring + 1).max(1);
    let hung = spec.hung_rank == Some(rank);
    let late = spec.straggler == Some(rank);
    let mut out = Vec::new();
    for seq in first..=spec.last_seq {
        let is_last = seq == spec.last_seq;
        if is_last && hung && !spec.hung_enqueued {
            break; // never enqueued: this rank is stuck before it
        }
        let stuck = is_last && hung;
        let jitter_ns = (rng.next() * 1e6) as i64;
        let lag_ns = if late {
            (spec.straggler_lag_ms * 1e6) as i64
        } else {
            0
        };
        let created = T0 + seq * STEP_NS + jitter_ns + lag_ns;
        let started = created + 200_000;
        let waits = spec.hung_rank.is_some() && is_last;
        let base_ms = 20.0 * (1.0 + 0.05 * rng.next());
        // Everyone else waits for the straggler inside the collective.
        let duration = match spec.straggler {
            Some(s) if s != rank => base_ms + spec.straggler_lag_ms,
            _ => base_ms,
        };
        let done = created + (duration * 1e6) as i64;
        out.push(EntrySpec {
            record_id: seq - 1,
            seq,
            op: if seq % 5 == 0 {
                "nccl:all_gather"
            } else {
                "nccl:all_reduce"
            }
            .to_string(),
            created_ns: created,
            started_ns: (!stuck).then_some(started),
            completed_ns: (!waits).then_some(done),
            duration_ms: (spec.timing && !waits).then_some(duration),
            numel: 1 << 20,
        });
    }
    out
}
