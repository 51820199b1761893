//! `lemonade-epilog`: slurm.conf's `Epilog`. See the crate documentation.

fn main() -> std::process::ExitCode {
    prolog_epilog::job::main(prolog_epilog::job::Phase::Epilog)
}
