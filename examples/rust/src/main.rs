//! `graphgen-translate MODEL < sentences.txt`: one sentence per line in, one translation per line out.
//! Lines are read as `graphgen translate -i` reads them (`input_lines`): split at `\n` only, a
//! CRLF's `\r` and a leading byte order mark dropped; a line that is not UTF-8 is refused (exit
//! code 1) before anything is translated. ONNX Runtime's shared library comes from `ORT_LIBRARY`.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use graphgen_translate::{input_lines, Translator};

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
    let result = input_lines(&data).and_then(|lines| {
        let texts: Vec<&str> = lines.iter().map(String::as_str).collect();
        Translator::new(&PathBuf::from(model), &PathBuf::from(runtime))
            .and_then(|mut translator| translator.translate(&texts))
    });
    match result {
        Ok(translations) => {
            let mut out = io::stdout().lock();
            for line in translations {
                let _ = writeln!(out, "{line}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}
