//! The demo test set through the text-level file: the same strings as graphgen's Python path.
//! Paths come from the environment (`make examples` sets them).

use std::path::PathBuf;

use graphgen_translate::{Error, Translator};

fn path(variable: &str) -> PathBuf {
    PathBuf::from(std::env::var(variable).unwrap_or_else(|_| panic!("set {variable}")))
}

fn fixture(name: &str) -> PathBuf {
    path("GRAPHGEN_FIXTURES").join(name)
}

fn translator() -> Translator {
    Translator::new(
        &fixture("demo-en-zh.onnx"),
        &path("ORT_LIBRARY"),
        &path("ORTX_LIBRARY"),
    )
    .expect("model loads")
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
fn missing_files_are_clear_errors() {
    let missing = PathBuf::from("no/such/file");
    let model = Translator::new(&missing, &path("ORT_LIBRARY"), &path("ORTX_LIBRARY"));
    assert!(matches!(
        model,
        Err(Error::NotFound {
            what: "model file",
            ..
        })
    ));
    let extensions = Translator::new(&fixture("demo-en-zh.onnx"), &path("ORT_LIBRARY"), &missing);
    let message = extensions.err().expect("refused").to_string();
    assert!(
        message.contains("onnxruntime-extensions library not found"),
        "{message}"
    );
}
