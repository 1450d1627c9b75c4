//! Writing the command's output to stdout.
//!
//! Why not `println!`? It panics when stdout is closed, and `parkway parked
//! list | head` closes it early; a closed pipe simply ends the command here.

use std::{
    fmt,
    io::{ErrorKind, Write},
};

/// Writes `args` to stdout. A closed pipe ends the process quietly (exit 0:
/// the reader had what it wanted); any other write error ends it with exit 1.
pub(crate) fn write(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write the output: {e}");
        std::process::exit(i32::from(crate::exit::USAGE));
    }
}
