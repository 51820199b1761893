//! Proactive validation (issue 31, after Microsoft's Anubis): pass/fail
//! criteria learned from the fleet's own benchmark results
//! ([`criteria`], [`learn`]) and published to the nodes ([`publish`]),
//! `lemon validate judge` over a results file ([`judge`]), the choice of
//! which idle nodes to validate now ([`selector`], fed by [`nodes`]), their
//! Slurm jobs ([`jobs`]), and `lemon run`'s step that ties them ([`step`]).

pub mod criteria;
pub mod jobs;
pub mod judge;
pub mod learn;
pub mod nodes;
pub mod publish;
pub mod report;
pub mod selector;
pub mod step;
