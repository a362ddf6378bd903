use clap::Parser;

fn main() -> std::process::ExitCode {
    memkit_tools::cli::main(memkit_tools::cli::Args::parse())
}
