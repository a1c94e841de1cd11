//! `graphgen-translate MODEL < sentences.txt`: one sentence per line in, one translation per line out.
//! Lines are read as `graphgen translate -i` reads them (`input_lines`): split at `\n` only, a
//! CRLF's `\r` and a leading byte order mark dropped; a line that is not UTF-8, or that ends with
//! U+0000 (which the file's zero-padded bytes input cannot carry), is refused (exit code 1) before
//! anything is translated. 16 lines per run, each batch written before the next is translated.
//! ONNX Runtime's shared library comes from `ORT_LIBRARY`.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use graphgen_translate::{input_lines, Translator};

/// Lines per run (as the C example's command line).
const BATCH: usize = 16;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(model), Ok(runtime)) = (args.get(1), std::env::var("ORT_LIBRARY")) else {
        eprintln!("usage: ORT_LIBRARY=libonnxruntime.so graphgen-translate MODEL < input");
        return ExitCode::from(2);
    };
    let mut data = Vec::new();
    if let Err(error) = io::stdin().lock().read_to_end(&mut data) {
        eprintln!("reading stdin: {error}");
        return ExitCode::FAILURE;
    }
    let lines = match input_lines(&data) {
        Ok(lines) => lines,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let mut translator = match Translator::new(&PathBuf::from(model), &PathBuf::from(runtime)) {
        Ok(translator) => translator,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    // A batch of BATCH lines per run: one run over a whole file would hold every line's search
    // (4 beams each, their caches) at once. Each batch is written before the next is translated.
    let texts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let mut out = io::stdout().lock();
    for batch in texts.chunks(BATCH) {
        match translator.translate(batch) {
            Ok(translations) => {
                for line in translations {
                    let _ = writeln!(out, "{line}");
                }
                let _ = out.flush();
            }
            Err(error) => {
                eprintln!("{error}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
