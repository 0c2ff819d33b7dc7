//! `errand-crashable`: the `errand` command with the fault harness's crash
//! points (`ERRAND_FAILPOINTS`) and steppable clock
//! (`ERRAND_CLOCK_OFFSET_FILE`). See `errand_harness::crash`.

use std::process::ExitCode;

use errand_harness::crash;

fn main() -> ExitCode {
    match crash::configure_failpoints() {
        Ok(armed) if !armed.is_empty() => {
            eprintln!("errand: crash points armed: {}", armed.join(";"));
        }
        Ok(_) => {}
        Err(e) => {
            eprintln!("errand: {e}");
            return ExitCode::from(errand_cli::EXIT_INVALID);
        }
    }
    errand_cli::main_with(errand_cli::Hooks {
        clock: crash::test_clock_from_env(),
    })
}
