//! Proactive validation (issue 31, after Microsoft's Anubis): pass/fail
//! criteria learned from the fleet's own benchmark results
//! ([`criteria`]), `lemon validate judge` over a results file ([`judge`]),
//! and the choice of which idle nodes to validate now ([`selector`]).

pub mod criteria;
pub mod judge;
pub mod selector;
