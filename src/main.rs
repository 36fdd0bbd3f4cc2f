//! The `recon` binary: parse the command line, run it through the library,
//! and exit with the code it returns (see `recon --help`).

use recon::commands::{self, EXIT_STORAGE};

fn main() {
    // A panic is a bug, but it still must not dump a backtrace on a user:
    // print one line and exit with the storage/internal code.
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        // Never a second panic: a stderr that is gone loses the line.
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!("error: internal error{location}; please report it\n"),
        );
    }));
    let cli = commands::parse();
    let code = std::panic::catch_unwind(|| commands::run(cli)).unwrap_or(EXIT_STORAGE);
    std::process::exit(code);
}
