//! `graphgen-translate MODEL < sentences.txt`: one sentence per line in, one translation per line out.
//! ONNX Runtime's shared library comes from `ORT_LIBRARY`.

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use graphgen_translate::Translator;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(model), Ok(runtime)) = (args.get(1), std::env::var("ORT_LIBRARY")) else {
        eprintln!("usage: ORT_LIBRARY=libonnxruntime.so graphgen-translate MODEL < input");
        return ExitCode::from(2);
    };
    let lines: Vec<String> = io::stdin().lock().lines().map_while(Result::ok).collect();
    let texts: Vec<&str> = lines.iter().map(String::as_str).collect();
    let result = Translator::new(&PathBuf::from(model), &PathBuf::from(runtime))
        .and_then(|mut translator| translator.translate(&texts));
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
