//! The demo test set through the text-level file: the same strings as graphgen's Python path.
//! Paths come from the environment (`make examples` sets them).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use graphgen_translate::{input_lines, Error, Settings, Translator};

fn path(variable: &str) -> PathBuf {
    PathBuf::from(std::env::var(variable).unwrap_or_else(|_| panic!("set {variable}")))
}

fn fixture(name: &str) -> PathBuf {
    path("GRAPHGEN_FIXTURES").join(name)
}

fn translator() -> Translator {
    Translator::new(&fixture("demo-en-zh.onnx"), &path("ORT_LIBRARY")).expect("model loads")
}

fn lines(name: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(name))
        .expect("fixture")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn all_demo_sentences_one_at_a_time_and_in_batches_of_16() {
    let sources = lines("sources.txt");
    let expected = lines("expected.txt");
    assert_eq!(sources.len(), 300);
    assert_eq!(expected.len(), 300);
    let mut translator = translator();
    for (source, want) in sources.iter().zip(&expected) {
        assert_eq!(
            &translator.translate(&[source.as_str()]).unwrap()[0],
            want,
            "{source}"
        );
    }
    let mut got = Vec::new();
    for chunk in sources.chunks(16) {
        let texts: Vec<&str> = chunk.iter().map(String::as_str).collect();
        got.extend(translator.translate(&texts).unwrap());
    }
    assert_eq!(got, expected);
}

#[test]
fn empty_batch_gives_nothing() {
    assert!(translator().translate(&[]).unwrap().is_empty());
}

#[test]
fn missing_files_and_the_other_tokenizer_kind_are_clear_errors() {
    let missing = PathBuf::from("no/such/file");
    let model = Translator::new(&missing, &path("ORT_LIBRARY"));
    assert!(matches!(
        model,
        Err(Error::NotFound {
            what: "model file",
            ..
        })
    ));
    let extensions = Translator::new(&fixture("demo-en-zh-extensions.onnx"), &path("ORT_LIBRARY"));
    let message = extensions.err().expect("refused").to_string();
    assert!(message.contains("--tokenizer onnx"), "{message}");
}

#[test]
fn a_long_source_is_an_error_naming_the_limit() {
    let long = lines("long.txt");
    let message = translator()
        .translate(&[long[0].as_str()])
        .expect_err("refused")
        .to_string();
    assert!(
        message.contains("longer than the model's limit of 512 tokens"),
        "{message}"
    );
    let mut truncating =
        Translator::new(&fixture("demo-en-zh-truncate.onnx"), &path("ORT_LIBRARY")).unwrap();
    assert_eq!(
        truncating.translate(&[long[0].as_str()]).unwrap(),
        vec![long[1].clone()]
    );
}

/// A text ending with U+0000 is refused before running, naming its index in the batch: the file
/// would take its final zero bytes for `text_utf8`'s padding and translate a different text.
#[test]
fn a_text_ending_with_u0000_is_refused_naming_it() {
    let why =
        "ends with U+0000, which the file's bytes input cannot carry (its rows are padded with \
               zero bytes); remove it";
    let mut translator = translator();
    let error = translator
        .translate(&["I have three cats.", "cats\0", "a\0b"])
        .expect_err("refused");
    assert!(
        matches!(&error, Error::EndsWithNul { indices, batch: 3 } if indices == &[1]),
        "{error:?}"
    );
    assert_eq!(error.to_string(), format!("text 1 of the batch {why}"));
    let several = translator
        .translate(&["a", "b\0", "c\0d", "\0"])
        .expect_err("refused");
    assert_eq!(
        several.to_string(),
        format!("texts 1, 3 of the batch: each {why}")
    );
    let one = translator.translate(&["cats\0"]).expect_err("refused");
    assert_eq!(one.to_string(), format!("the text {why}"));
}

/// A U+0000 before other characters is carried: the file tokenizes it (as HF does), so the text
/// translates, and not as the text without it.
#[test]
fn a_u0000_inside_a_text_is_carried() {
    let mut translator = translator();
    let inside = translator.translate(&["a\0b"]).expect("translated");
    let without = translator.translate(&["ab"]).expect("translated");
    assert_eq!(inside.len(), 1);
    assert_ne!(inside, without);
}

/// `languages.tsv`: source language, target language, text, Python's translation (NLLB file).
fn language_rows() -> Vec<[String; 4]> {
    lines("languages.tsv")
        .iter()
        .map(|line| {
            let fields: Vec<String> = line.split('\t').map(str::to_owned).collect();
            fields.try_into().expect("four fields")
        })
        .collect()
}

#[test]
fn nllb_languages_chosen_per_call_and_per_text() {
    let rows = language_rows();
    assert_eq!(rows.len(), 72);
    // The file as exported (its language inputs optional): Rust feeds them, no baked copy needed.
    let mut translator =
        Translator::new(&fixture("nllb.onnx"), &path("ORT_LIBRARY")).expect("model loads");
    for group in rows.chunks(24) {
        let texts: Vec<&str> = group.iter().map(|row| row[2].as_str()).collect();
        let want: Vec<&str> = group.iter().map(|row| row[3].as_str()).collect();
        let got = translator
            .translate_languages(&texts, &[group[0][0].as_str()], &[group[0][1].as_str()])
            .unwrap();
        assert_eq!(got, want, "target {}", group[0][1]);
    }
    // One batch mixing the three targets, one code per text.
    let mixed: Vec<&[String; 4]> = (0..8).map(|i| &rows[(i % 3) * 24 + i]).collect();
    let texts: Vec<&str> = mixed.iter().map(|row| row[2].as_str()).collect();
    let targets: Vec<&str> = mixed.iter().map(|row| row[1].as_str()).collect();
    let got = translator
        .translate_languages(&texts, &["eng_Latn"], &targets)
        .unwrap();
    let want: Vec<&str> = mixed.iter().map(|row| row[3].as_str()).collect();
    assert_eq!(got, want);
    let unknown = translator.translate_languages(&["Hello."], &["eng_Latn"], &["xx_Nope"]);
    let message = unknown.expect_err("refused").to_string();
    assert!(message.contains("unknown target_language"), "{message}");
}

#[test]
fn settings_chosen_per_call() {
    // The exported file (its settings optional inputs, which Rust feeds) and a
    // `graphgen bake --keep num_beams,max_length` copy (required ones): Python's strings.
    let sources = lines("sources.txt");
    let texts: Vec<&str> = sources[..16].iter().map(String::as_str).collect();
    let want = lines("expected-settings.txt");
    let settings = Settings {
        num_beams: Some(2),
        max_length: Some(8),
        ..Settings::default()
    };
    for name in ["demo-en-zh.onnx", "demo-en-zh-settings.onnx"] {
        let mut translator =
            Translator::new(&fixture(name), &path("ORT_LIBRARY")).expect("model loads");
        let got = translator.translate_with(&texts, None, &settings).unwrap();
        assert_eq!(got, want, "{name}");
    }
    // The kept copy's inputs are required: leaving one out is ONNX Runtime's error naming it.
    let mut kept = Translator::new(&fixture("demo-en-zh-settings.onnx"), &path("ORT_LIBRARY"))
        .expect("model loads");
    let missing = kept
        .translate(&texts[..1])
        .expect_err("refused")
        .to_string();
    assert!(
        missing.contains("num_beams") || missing.contains("max_length"),
        "{missing}"
    );
    // Values by Python's rules, refused before running.
    for (bad, want) in [
        (
            Settings {
                num_beams: Some(0),
                max_length: Some(8),
                ..Settings::default()
            },
            "num_beams must be at least 1",
        ),
        (
            Settings {
                num_beams: Some(2),
                max_length: Some(1),
                ..Settings::default()
            },
            "max_length must be between 2",
        ),
        (
            Settings {
                num_beams: Some(2),
                max_length: Some(100_000),
                ..Settings::default()
            },
            "max_length must be between 2 and the model's 512 positions",
        ),
        (
            Settings {
                repetition_penalty: Some(f32::NAN),
                ..settings.clone()
            },
            "repetition_penalty must be",
        ),
    ] {
        let error = kept
            .translate_with(&texts[..1], None, &bad)
            .expect_err("refused")
            .to_string();
        assert!(error.contains(want), "{error}");
    }
}

/// The codes come from the file's metadata: the list Python reads (nllb-codes.txt), NLLB's 202;
/// none for a Marian file. The target tags too: the demo file's are HF's
/// `MarianTokenizer.supported_language_codes`; none for NLLB.
#[test]
fn languages_from_the_metadata() {
    let want = lines("nllb-codes.txt");
    assert_eq!(want.len(), 202);
    let nllb = Translator::new(&fixture("nllb.onnx"), &path("ORT_LIBRARY")).expect("model loads");
    assert_eq!(nllb.languages(), want.as_slice());
    assert!(nllb.target_tags().is_empty());
    let demo = translator();
    assert!(demo.languages().is_empty());
    assert_eq!(demo.target_tags(), [">>cmn_Hans<<", ">>cmn_Hant<<"]);
}

/// `input_lines` splits as `graphgen translate -i` does (Python's `runtime.bulk.text_lines`).
#[test]
fn input_lines_as_the_python_cli_reads_them() {
    let read = |data: &[u8]| input_lines(data).unwrap();
    assert!(read(b"").is_empty());
    assert_eq!(read(b"\n"), [""]);
    assert_eq!(read(b"a"), ["a"]);
    assert_eq!(read(b"a\n"), ["a"]);
    assert_eq!(read(b"a\n\nb"), ["a", "", "b"]);
    assert_eq!(read(b"a\n\n"), ["a", ""]);
    // CRLF: one `\r` dropped per line, the last line's too; a lone `\r` inside a line stays.
    assert_eq!(read(b"a\r\n\r\nb\r"), ["a", "", "b"]);
    assert_eq!(read(b"a\r\r\nb\rc\n"), ["a\r", "b\rc"]);
    // Form feed, U+0085 and U+2028 stay inside their line (str.splitlines would split there).
    assert_eq!(
        read("a\x0cb\u{85}c\u{2028}d\n".as_bytes()),
        ["a\x0cb\u{85}c\u{2028}d"]
    );
    // A byte order mark at the start is removed; one anywhere else stays text.
    assert_eq!(read(b"\xef\xbb\xbfa\r\nb"), ["a", "b"]);
    assert_eq!(read(b"\xef\xbb\xbfa\n\xef\xbb\xbfb"), ["a", "\u{feff}b"]);
    assert_eq!(read(b"a\xef\xbb\xbf"), ["a\u{feff}"]);
    assert_eq!(read(b"\xef\xbb\xbf"), [""]);
}

#[test]
fn a_line_that_is_not_utf8_is_refused_naming_it() {
    let refused = |data: &[u8]| input_lines(data).expect_err("refused");
    let error = refused(b"ok\nab\xffc\nnext\n");
    assert!(
        matches!(
            error,
            Error::NotUtf8 {
                line: 2,
                byte: 0xff,
                offset: 2
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "line 2: not valid UTF-8 (byte 0xff at offset 2)"
    );
    // A cut-off sequence before the CRLF; the first bad line is named, offsets within the line.
    let cut = refused(b"ok\r\nx\xe4\xb8\r\n\xff\n");
    assert_eq!(
        cut.to_string(),
        "line 2: not valid UTF-8 (byte 0xe4 at offset 1)"
    );
    // Line 1's offset counts after the byte order mark.
    let first = refused(b"\xef\xbb\xbf\xc3(");
    assert_eq!(
        first.to_string(),
        "line 1: not valid UTF-8 (byte 0xc3 at offset 0)"
    );
}

/// A line ending with U+0000 is refused by its number before anything is translated (`text_utf8`'s
/// zero padding cannot carry it); one with U+0000 before other characters is kept.
#[test]
fn a_line_ending_with_u0000_is_refused_naming_it() {
    let why = "ends with U+0000, which the file's bytes input cannot carry (its rows are padded \
               with zero bytes); remove it";
    let refused = |data: &[u8]| input_lines(data).expect_err("refused");
    let error = refused(b"I have three cats.\ncats\0\na\0b\n");
    assert!(
        matches!(error, Error::LineEndsWithNul { line: 2 }),
        "{error:?}"
    );
    assert_eq!(error.to_string(), format!("line 2: {why}"));
    // The CRLF's `\r` is dropped first, so the U+0000 before it ends the line.
    let crlf = refused(b"ok\r\ncats\0\r\nnext\r\n");
    assert_eq!(crlf.to_string(), format!("line 2: {why}"));
    // A last line without a newline counts too.
    let last = refused(b"one\ntwo\nthree\0");
    assert_eq!(last.to_string(), format!("line 3: {why}"));
    assert_eq!(refused(b"\0").to_string(), format!("line 1: {why}"));
    // The first bad line is named, whichever way it is bad.
    assert_eq!(
        refused(b"x\0\n\xff\n").to_string(),
        format!("line 1: {why}")
    );
    assert_eq!(
        refused(b"\xff\nx\0\n").to_string(),
        "line 1: not valid UTF-8 (byte 0xff at offset 0)"
    );
}

#[test]
fn a_u0000_inside_a_line_is_kept() {
    let read = |data: &[u8]| input_lines(data).unwrap();
    assert_eq!(
        read(b"I have three cats.\na\0b\n\0\0c\n"),
        ["I have three cats.", "a\0b", "\0\0c"]
    );
    // One `\r` dropped: the line ends with `\r`, not U+0000.
    assert_eq!(read(b"a\0\r\r\n"), ["a\0\r"]);
}

/// The built command line on the demo file, `input` on its stdin.
fn run_binary(input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_graphgen-translate"))
        .arg(fixture("demo-en-zh.onnx"))
        .env("ORT_LIBRARY", path("ORT_LIBRARY"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    // The binary reads all of stdin before it writes anything, so this cannot block on its output.
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("stdin written");
    drop(stdin);
    child.wait_with_output().expect("binary runs")
}

#[test]
fn the_command_line_reads_a_crlf_file_with_a_byte_order_mark() {
    let sources = lines("sources.txt");
    let expected = lines("expected.txt");
    let mut input = b"\xef\xbb\xbf".to_vec();
    input.extend_from_slice(sources[..40].join("\r\n").as_bytes());
    let output = run_binary(&input);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let want: String = expected[..40]
        .iter()
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(String::from_utf8(output.stdout).unwrap(), want);
}

#[test]
fn the_command_line_refuses_a_line_that_is_not_utf8() {
    let output = run_binary(b"I have three cats.\nab\xffc\nThe end.\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(
        stderr.contains("line 2: not valid UTF-8 (byte 0xff at offset 2)"),
        "{stderr}"
    );
}

/// A line ending with U+0000 stops the command line before any batch is translated (the 20th line,
/// in the second batch of 16), naming the line rather than its index in the batch.
#[test]
fn the_command_line_refuses_a_line_ending_with_u0000() {
    let mut input = "I have three cats.\n".repeat(19);
    input.push_str("cats\0\na\0b\n");
    let output = run_binary(input.as_bytes());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(
        stderr.contains("line 20: ends with U+0000, which the file's bytes input cannot carry"),
        "{stderr}"
    );
}
