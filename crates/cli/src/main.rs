//! The `errand` binary: the command in `lib.rs`.

fn main() -> std::process::ExitCode {
    errand_cli::main()
}
