//! Slurm hostlist expressions: `node[001-004,010],login1,rack[1-2]-gpu[1-2]`.
//!
//! Expansion keeps zero padding (`gpu[08-10]` gives `gpu08 gpu09 gpu10`) and
//! expands several bracket groups in one name as a cartesian product, the way
//! `scontrol show hostnames` does.

use thiserror::Error;

/// Why a hostlist expression could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HostlistError {
    #[error("hostlist `{expr}`: unbalanced brackets")]
    Unbalanced { expr: String },
    #[error("hostlist `{expr}`: bad range `{range}` (expected N or N-M with N <= M)")]
    BadRange { expr: String, range: String },
    #[error("hostlist `{expr}`: expands to more than {limit} hosts")]
    TooLarge { expr: String, limit: usize },
}

/// Refuse expansions past this size: a typo like `gpu[1-99999999]` must not eat
/// the head node's memory.
pub const MAX_HOSTS: usize = 1 << 20;

/// Expands a hostlist expression into host names, in order, duplicates kept.
///
/// `None assigned` and the empty string expand to nothing (sacct prints the former
/// for jobs that never ran).
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let expr_trim = expr.trim();
    if expr_trim.is_empty() || expr_trim == "None assigned" || expr_trim == "(null)" {
        return Ok(Vec::new());
    }
    let mut hosts = Vec::new();
    for item in split_top_level(expr_trim, expr)? {
        expand_item(item, expr, &mut hosts)?;
    }
    Ok(hosts)
}

/// True when `host` is one of the hosts of `expr`, without expanding the whole list.
pub fn contains(expr: &str, host: &str) -> Result<bool, HostlistError> {
    for item in split_top_level(expr.trim(), expr)? {
        let mut hosts = Vec::new();
        expand_item(item, expr, &mut hosts)?;
        if hosts.iter().any(|h| h == host) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Splits at commas that are outside brackets.
fn split_top_level<'a>(s: &'a str, whole: &str) -> Result<Vec<&'a str>, HostlistError> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(HostlistError::Unbalanced {
                        expr: whole.to_string(),
                    });
                }
            }
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(HostlistError::Unbalanced {
            expr: whole.to_string(),
        });
    }
    items.push(&s[start..]);
    Ok(items
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect())
}

fn expand_item(item: &str, whole: &str, out: &mut Vec<String>) -> Result<(), HostlistError> {
    let Some(open) = item.find('[') else {
        out.push(item.to_string());
        return Ok(());
    };
    let close =
        item[open..]
            .find(']')
            .map(|c| c + open)
            .ok_or_else(|| HostlistError::Unbalanced {
                expr: whole.to_string(),
            })?;
    let prefix = &item[..open];
    let rest = &item[close + 1..];
    let mut tails = Vec::new();
    expand_item_or_plain(rest, whole, &mut tails)?;
    for range in item[open + 1..close].split(',') {
        for number in expand_range(range.trim(), whole)? {
            for tail in &tails {
                if out.len() >= MAX_HOSTS {
                    return Err(HostlistError::TooLarge {
                        expr: whole.to_string(),
                        limit: MAX_HOSTS,
                    });
                }
                out.push(format!("{prefix}{number}{tail}"));
            }
        }
    }
    Ok(())
}

fn expand_item_or_plain(
    rest: &str,
    whole: &str,
    out: &mut Vec<String>,
) -> Result<(), HostlistError> {
    if rest.is_empty() {
        out.push(String::new());
        Ok(())
    } else {
        expand_item(rest, whole, out)
    }
}

fn expand_range(range: &str, whole: &str) -> Result<Vec<String>, HostlistError> {
    let bad = || HostlistError::BadRange {
        expr: whole.to_string(),
        range: range.to_string(),
    };
    let (lo, hi) = match range.split_once('-') {
        Some((lo, hi)) => (lo.trim(), hi.trim()),
        None => (range, range),
    };
    if lo.is_empty()
        || !lo.bytes().all(|b| b.is_ascii_digit())
        || !hi.bytes().all(|b| b.is_ascii_digit())
        || hi.is_empty()
    {
        return Err(bad());
    }
    let width = lo.len();
    let start: u64 = lo.parse().map_err(|_| bad())?;
    let end: u64 = hi.parse().map_err(|_| bad())?;
    if end < start {
        return Err(bad());
    }
    if end - start >= MAX_HOSTS as u64 {
        return Err(HostlistError::TooLarge {
            expr: whole.to_string(),
            limit: MAX_HOSTS,
        });
    }
    Ok((start..=end).map(|n| format!("{n:0width$}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_ranges_with_padding_and_lists() {
        assert_eq!(
            expand("gpu[001-003,010]").unwrap(),
            ["gpu001", "gpu002", "gpu003", "gpu010"]
        );
        assert_eq!(expand("gpu[08-10]").unwrap(), ["gpu08", "gpu09", "gpu10"]);
        assert_eq!(
            expand("login1,node[1-2]").unwrap(),
            ["login1", "node1", "node2"]
        );
    }

    #[test]
    fn expands_several_bracket_groups_as_a_product() {
        assert_eq!(
            expand("r[1-2]-n[1-2]").unwrap(),
            ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
        );
    }

    #[test]
    fn none_assigned_is_empty() {
        assert!(expand("None assigned").unwrap().is_empty());
        assert!(expand("").unwrap().is_empty());
    }

    #[test]
    fn rejects_malformed_expressions() {
        assert!(matches!(
            expand("gpu[1-3"),
            Err(HostlistError::Unbalanced { .. })
        ));
        assert!(matches!(
            expand("gpu1-3]"),
            Err(HostlistError::Unbalanced { .. })
        ));
        assert!(matches!(
            expand("gpu[3-1]"),
            Err(HostlistError::BadRange { .. })
        ));
        assert!(matches!(
            expand("gpu[a-b]"),
            Err(HostlistError::BadRange { .. })
        ));
        assert!(matches!(
            expand("gpu[1-99999999]"),
            Err(HostlistError::TooLarge { .. })
        ));
    }

    #[test]
    fn contains_matches_without_full_expansion() {
        assert!(contains("gpu[001-128],login1", "gpu064").unwrap());
        assert!(!contains("gpu[001-128]", "gpu64").unwrap());
        assert!(contains("gpu[001-128],login1", "login1").unwrap());
    }
}

/// Random input: hosts or an error, never a panic.
#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_text_gives_hosts_or_an_error(text in any::<String>()) {
            let _ = expand(&text);
            let _ = contains(&text, "gpu1");
        }

        #[test]
        fn bracket_soup_gives_hosts_or_an_error(text in "[a-z0-9\\[\\],-]{0,40}") {
            if let Ok(hosts) = expand(&text) {
                prop_assert!(hosts.len() <= MAX_HOSTS);
            }
        }

        #[test]
        fn a_padded_range_expands_to_each_number_once(
            prefix in "[a-z]{1,6}",
            start in 0u32..500,
            len in 1u32..50,
            width in 1usize..5,
        ) {
            let end = start + len - 1;
            let expr = format!("{prefix}[{start:0width$}-{end:0width$}]");
            let hosts = expand(&expr).unwrap();
            let want: Vec<String> = (start..=end).map(|n| format!("{prefix}{n:0width$}")).collect();
            prop_assert_eq!(&hosts, &want);
            for h in &want {
                prop_assert!(contains(&expr, h).unwrap());
            }
        }

        #[test]
        fn good_items_around_a_bad_one_make_the_whole_expression_an_error(
            good in proptest::collection::vec("[a-z]{1,5}[0-9]{1,3}", 0..5),
            bad in prop_oneof![Just("n[1-"), Just("n]"), Just("n[3-1]"), Just("n[a-b]")],
        ) {
            // A hostlist names a set (config blocks, Slurm's node lists): a part
            // of it cannot be used alone, so one bad item is an error naming it.
            let mut items = good.clone();
            items.push(bad.to_string());
            let expr = items.join(",");
            let err = expand(&expr).unwrap_err();
            prop_assert!(err.to_string().contains(&expr));
        }
    }
}
