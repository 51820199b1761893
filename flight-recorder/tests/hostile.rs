//! Hostile dumps (issue 32): code-running opcodes, deep nesting, huge
//! claims and truncation are clear errors; random damage never panics.

use flight_recorder::generate::{job_dumps, JobSpec};
use flight_recorder::pickle::{parse, Limits, Problem};
use flight_recorder::summarize_bytes;
use std::time::{Duration, Instant};

fn err_of(bytes: &[u8]) -> flight_recorder::pickle::PickleError {
    parse(bytes, &Limits::default()).unwrap_err()
}

#[test]
fn code_running_opcodes_are_refused_by_name_and_offset() {
    // What `pickle.dumps(os.system)`-style payloads start with.
    let cases: [(&[u8], &str, usize); 6] = [
        (
            b"\x80\x02cposix\nsystem\nX\x02\x00\x00\x00idq\x00\x85R.",
            "GLOBAL",
            2,
        ),
        (
            b"\x80\x04\x8c\x05posix\x8c\x06system\x93.",
            "STACK_GLOBAL",
            17,
        ),
        (b"\x80\x02N)R.", "REDUCE", 4),
        (b"\x80\x02}}b.", "BUILD", 4),
        (b"\x80\x02(i__main__\nX\n.", "INST", 3),
        (b"\x80\x02N)\x81.", "NEWOBJ", 4),
    ];
    for (bytes, name, offset) in cases {
        let e = err_of(bytes);
        assert_eq!(e.offset, offset, "{name}: {e}");
        assert!(e.to_string().contains(name), "{e}");
        assert!(e.to_string().contains("not plain data"), "{e}");
    }
    // Every other opcode that makes objects, by name.
    for (code, name) in [
        (0x92u8, "NEWOBJ_EX"),
        (b'Q', "BINPERSID"),
        (0x82, "EXT1"),
        (0x83, "EXT2"),
        (0x84, "EXT4"),
        (0x97, "NEXT_BUFFER"),
        (0x98, "READONLY_BUFFER"),
        (0x8f, "EMPTY_SET"),
        (0x91, "FROZENSET"),
    ] {
        let e = err_of(&[0x80, 4, b'N', code, b'.']);
        assert_eq!(e.offset, 3, "{name}");
        assert!(e.to_string().contains(name), "{e}");
    }
    let e = err_of(b"\x80\x02P1\n.");
    assert!(e.to_string().contains("PERSID"), "{e}");
    let e = err_of(b"\x80\x02o.");
    assert!(e.to_string().contains("OBJ"), "{e}");
    let e = err_of(b"\x80\x02\xff.");
    assert_eq!(e.problem, Problem::Unknown(0xff));
}

#[test]
fn deep_nesting_is_refused_without_exhausting_the_stack() {
    // 100 000 empty lists, each APPENDed to the one below it.
    let mut p = vec![0x80, 2];
    p.extend([b']'; 100_000]);
    p.extend([b'a'; 99_999]);
    p.push(b'.');
    let e = err_of(&p);
    assert!(matches!(e.problem, Problem::TooDeep(_)), "{e}");
    // And as many open MARKs.
    let mut p = vec![0x80, 2];
    p.extend([b'('; 100_000]);
    let e = err_of(&p);
    assert!(matches!(e.problem, Problem::TooDeep(_)), "{e}");
}

#[test]
fn huge_length_claims_are_refused_before_any_allocation() {
    let e = err_of(b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7fabc.");
    assert!(matches!(e.problem, Problem::StringTooLong(_)), "{e}");
    let e = err_of(b"\x80\x02X\x00\x00\x10\x00abc.");
    assert_eq!(
        e.problem,
        Problem::Truncated {
            need: 0x100000,
            left: 4
        }
    );
    let e = err_of(b"\x80\x04\x95\xff\xff\xff\xff\xff\xff\x00\x00N.");
    assert!(matches!(e.problem, Problem::Truncated { .. }), "{e}");
    let e = err_of(b"\x80\x02\x8b\xff\xff\xff\x7f.");
    assert_eq!(e.problem, Problem::IntTooWide);
    let limits = Limits {
        max_bytes: 10,
        ..Limits::default()
    };
    let e = parse(&[b'N'; 11], &limits).unwrap_err();
    assert!(
        matches!(e.problem, Problem::InputTooLarge { size: 11, cap: 10 }),
        "{e}"
    );
}

#[test]
fn a_memo_reference_expanded_exponentially_is_capped() {
    // l0 = [1]; l(n+1) = [ln, ln]: 2^25 values once expanded, within the
    // depth cap, from under 300 bytes.
    let mut p = vec![0x80, 2, b']', b'K', 1, b'a', b'q', 0];
    for i in 0..25u8 {
        p.extend([b'0', b']', b'(', b'h', i, b'h', i, b'e', b'q', i + 1]);
    }
    p.push(b'.');
    let started = Instant::now();
    let e = parse(&p, &Limits::default()).unwrap_err();
    assert!(matches!(e.problem, Problem::TooManyValues(_)), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_truncated_dump_is_an_error_at_every_cut() {
    let (_, dump) = job_dumps(&JobSpec {
        ranks: 1,
        ring: 3,
        ..Default::default()
    })
    .remove(0);
    for cut in 0..dump.len() {
        let r = parse(&dump[..cut], &Limits::default());
        assert!(r.is_err(), "cut at {cut} parsed");
    }
    assert!(parse(&dump, &Limits::default()).is_ok());
}

#[test]
fn random_damage_to_a_valid_dump_never_panics_and_answers_quickly() {
    let (_, torch_style) = job_dumps(&JobSpec {
        ranks: 1,
        ring: 8,
        ..Default::default()
    })
    .remove(0);
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/py4/nccl_trace_rank_0");
    // Python's protocol 4: FRAME, MEMOIZE, SHORT_BINUNICODE, TUPLE2.
    let python_style = std::fs::read(fixture).unwrap();
    for (seed, dump) in [
        (0x2545_f491_4f6c_dd1d, torch_style),
        (0x9e37_79b9_7f4a_7c15, python_style),
    ] {
        let started = Instant::now();
        let errors = mutate_and_parse(&dump, seed, 5_000);
        assert!(errors > 1_000, "most damage is caught: {errors} errors");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    }
}

/// Parses `rounds` randomly damaged copies of `dump` (1 to 4 bytes
/// changed, removed or inserted each); returns how many were errors.
fn mutate_and_parse(dump: &[u8], mut state: u64, rounds: usize) -> usize {
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut errors = 0;
    for _ in 0..rounds {
        let mut bytes = dump.to_vec();
        for _ in 0..1 + next() % 4 {
            let at = (next() % bytes.len() as u64) as usize;
            match next() % 3 {
                0 => bytes[at] = next() as u8,
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, next() as u8),
            }
        }
        if let Err(e) = summarize_bytes(0, &bytes, &Limits::default()) {
            assert!(!e.to_string().is_empty());
            errors += 1;
        }
    }
    errors
}
