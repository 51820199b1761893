//! `lemonade-prolog`: slurm.conf's `Prolog`. See the crate documentation.

fn main() -> std::process::ExitCode {
    prolog_epilog::job::main(prolog_epilog::job::Phase::Prolog)
}
