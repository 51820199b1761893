//! User errors on healthy hardware: the job fails or hangs, no node is at
//! fault, and the job counts as healthy.

use super::plan::{Kind, Mode, Plan};
use super::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserKind {
    /// CUDA out of memory on one rank: memory fills, then it exits.
    Oom,
    /// A Python exception on one rank: it exits.
    Exception,
    /// NaN loss: every rank exits together.
    Nan,
    /// Mismatched collectives: every rank spins until the watchdog.
    Deadlock,
    /// One rank stuck in user code before a barrier: its GPUs idle.
    Stuck,
    /// An inference replica hangs: 100% util at low power; others serve on.
    HungReplica,
    /// An application XID (13, 31, 43) on one rank's node, then its crash.
    AppXid,
    /// The user cancels the job.
    Scancel,
    /// A "bad user" whose jobs all crash the same way on rank 0.
    BadUser,
}

impl UserKind {
    pub fn name(self) -> &'static str {
        match self {
            UserKind::Oom => "user_cuda_oom",
            UserKind::Exception => "user_python_exception",
            UserKind::Nan => "user_nan_loss",
            UserKind::Deadlock => "user_deadlock",
            UserKind::Stuck => "user_rank_stuck",
            UserKind::HungReplica => "user_hung_replica",
            UserKind::AppXid => "user_app_xid",
            UserKind::Scancel => "user_scancel",
            UserKind::BadUser => "user_bad_user_rank0",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct UserErr {
    pub kind: UserKind,
    pub node: usize,
    pub t: i64,
    pub xid: u32,
}

/// Draws a user error fitting the job's kind and applies its halt.
pub fn plant(rng: &mut Rng, p: &mut Plan, bad_user: bool) {
    use UserKind::*;
    let kind = if bad_user {
        BadUser
    } else if p.kind == Kind::Inference {
        *rng.pick(&[HungReplica, HungReplica, Oom, Scancel])
    } else if p.n() == 1 {
        *rng.pick(&[Oom, Exception, Nan, Scancel, AppXid])
    } else {
        let w = [14.0, 14.0, 10.0, 8.0, 8.0, 0.0, 6.0, 10.0];
        [
            Oom,
            Exception,
            Nan,
            Deadlock,
            Stuck,
            HungReplica,
            AppXid,
            Scancel,
        ][rng.weighted(&w)]
    };
    let node = if bad_user {
        0
    } else {
        rng.int(0, p.n() as i64 - 1) as usize
    };
    let lo = p.steady + if bad_user { 60 } else { 120 };
    let t = rng.int(lo, (p.end - 120).max(lo + 60));
    let xid = if kind == AppXid {
        *rng.pick(&[13, 31, 43])
    } else {
        0
    };
    p.user = Some(UserErr { kind, node, t, xid });
    p.label(kind.name());
    let crash = rng.int(90, 180);
    let hang = if rng.chance(0.7) { 600 } else { 1800 };
    match kind {
        Oom | Exception | BadUser => p.halt(t, Some(node), Mode::Dead, Mode::Spin, crash),
        AppXid => p.halt(
            t + rng.int(2, 20),
            Some(node),
            Mode::Dead,
            Mode::Spin,
            crash,
        ),
        Nan => p.halt(t, None, Mode::Dead, Mode::Dead, 15),
        Deadlock => p.halt(t, None, Mode::Spin, Mode::Spin, hang),
        Stuck => p.halt(t, Some(node), Mode::Stuck, Mode::Spin, hang),
        HungReplica => p.halt(t, Some(node), Mode::Hung, Mode::Run, 0),
        Scancel => p.halt(t, None, Mode::Dead, Mode::Dead, 0),
    }
}
