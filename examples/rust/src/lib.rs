//! Translate with a graphgen text-level ONNX file: strings in, strings out, one `session.run`.
//!
//! ONNX Runtime is loaded from a shared library at run time (`ort`'s `load-dynamic`); its path is
//! the caller's (the library inside the Python wheel or a release archive works). Nothing else is
//! needed: the file's tokenizer is built from standard ONNX ops (`graphgen export`'s default,
//! `--tokenizer onnx`). Texts go in as UTF-8 bytes (`text_utf8`, u8 `[batch, bytes]`, zero-padded),
//! which a Rust `&str` already is; a U+0000 inside a text is carried, one at its end is refused
//! (`EndsWithNul`).

use std::fmt::{self, Debug};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;
use ort::session::SessionInputValue;
use ort::value::{PrimitiveTensorElementType, Tensor};

/// What can go wrong, each with a message that names the file or the step.
#[derive(Debug)]
pub enum Error {
    /// A file that must exist does not.
    NotFound { what: &'static str, path: PathBuf },
    /// ONNX Runtime refused (loading the library, the model, or a run).
    Runtime(String),
    /// The file is not a text-level file with the portable tokenizer.
    WrongKind(PathBuf),
    /// A generation setting the search cannot honour (Python's `Translator` rules).
    Setting(String),
    /// An input line (1-based) that is not UTF-8: the first invalid byte and its offset in the line.
    NotUtf8 {
        line: usize,
        byte: u8,
        offset: usize,
    },
    /// An input line (1-based) that ends with U+0000, refused by `input_lines` before anything is
    /// translated: `translate` would refuse it anyway (`EndsWithNul`), but only when its batch is
    /// reached and naming its index in that batch, not its line.
    LineEndsWithNul { line: usize },
    /// Texts (their 0-based indices in a call of `batch` texts) that end with U+0000: `text_utf8`'s
    /// rows are padded with zero bytes, so the file would take those final zero bytes as padding and
    /// translate a different text. Nothing was run. A U+0000 inside a text is carried.
    EndsWithNul { indices: Vec<usize>, batch: usize },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFound { what, path } => write!(f, "{what} not found: {}", path.display()),
            Error::Runtime(message) => write!(f, "ONNX Runtime: {message}"),
            Error::WrongKind(path) => write!(
                f,
                "{} is not a text-level file with the portable tokenizer: export it with \
                 `graphgen export MODEL -o FILE` (the default, --tokenizer onnx); a --tokenizer \
                 extensions file needs onnxruntime-extensions",
                path.display()
            ),
            Error::Setting(message) => write!(f, "{message}"),
            Error::NotUtf8 { line, byte, offset } => write!(
                f,
                "line {line}: not valid UTF-8 (byte {byte:#04x} at offset {offset})"
            ),
            // worded as `graphgen translate`'s per-line message
            Error::LineEndsWithNul { line } => write!(
                f,
                "line {line}: ends with U+0000, which the file's bytes input cannot carry (its rows \
                 are padded with zero bytes); remove it"
            ),
            // worded as Python's `graphgen.TextInputError`
            Error::EndsWithNul { indices, batch } => {
                let listed: Vec<String> = indices.iter().map(usize::to_string).collect();
                match (batch, indices.len()) {
                    (1, _) => write!(f, "the text ")?,
                    (_, 1) => write!(f, "text {} of the batch ", listed[0])?,
                    _ => write!(f, "texts {} of the batch: each ", listed.join(", "))?,
                }
                write!(
                    f,
                    "ends with U+0000, which the file's bytes input cannot carry (its rows are \
                     padded with zero bytes); remove it"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

impl<T> From<ort::Error<T>> for Error {
    fn from(error: ort::Error<T>) -> Self {
        Error::Runtime(error.to_string())
    }
}

fn existing(path: &Path, what: &'static str) -> Result<(), Error> {
    if path.is_file() {
        Ok(())
    } else {
        Err(Error::NotFound {
            what,
            path: path.to_owned(),
        })
    }
}

/// A UTF-8 byte order mark, removed from the start of an input (as Python's `utf-8-sig`).
const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// The lines of a whole plain-text input as `graphgen translate -i` reads them (Python's
/// `runtime.bulk.text_lines`): split at `\n` only (a final line without one counts; input ending in
/// `\n` has no empty line after it), one trailing `\r` of each line dropped (CRLF files), a form
/// feed, U+0085 or U+2028 kept inside its line (Python's `str.splitlines` would end it there), and
/// a byte order mark at the start of the input removed (one anywhere else stays text). Empty input
/// gives no lines (a mark alone is one empty line, as in Python). A line that is not UTF-8 is
/// refused as `NotUtf8`, and one that ends with U+0000 (after its `\r` is dropped) as
/// `LineEndsWithNul`, naming the first such line; a U+0000 before other characters is carried, so
/// its line is kept.
pub fn input_lines(data: &[u8]) -> Result<Vec<String>, Error> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let data = data.strip_suffix(b"\n").unwrap_or(data);
    data.split(|byte| *byte == b'\n')
        .enumerate()
        .map(|(index, raw)| {
            let raw = if index == 0 {
                raw.strip_prefix(UTF8_BOM).unwrap_or(raw)
            } else {
                raw
            };
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let line = std::str::from_utf8(raw).map_err(|error| Error::NotUtf8 {
                line: index + 1,
                byte: raw[error.valid_up_to()],
                offset: error.valid_up_to(),
            })?;
            // Refused here, with its line number, rather than by `translate` once its batch is
            // reached (earlier batches already written, the text named by its index in the batch).
            if line.ends_with('\0') {
                return Err(Error::LineEndsWithNul { line: index + 1 });
            }
            Ok(line.to_owned())
        })
        .collect()
}

/// ONNX Runtime is loaded once per process; later loads reuse it (whatever library they name).
static RUNTIME: OnceLock<Result<Environment, String>> = OnceLock::new();

fn runtime(library: &Path) -> Result<&'static Environment, Error> {
    let loaded = RUNTIME.get_or_init(|| {
        let builder = ort::init_from(library).map_err(|e| e.to_string())?;
        builder
            .with_name("graphgen")
            .build()
            .map_err(|e| e.to_string())
    });
    loaded
        .as_ref()
        .map_err(|message| Error::Runtime(message.clone()))
}

/// Generation settings for one call (`None`: the file's default, from the checkpoint's
/// generation config). The C API that `ort` wraps feeds a file's optional inputs, so the exported
/// file takes them as it is; a `graphgen bake --keep` copy needs each kept one on every call.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub num_beams: Option<i32>,
    pub num_return_sequences: Option<i32>,
    pub max_length: Option<i32>,
    pub min_length: Option<i32>,
    pub length_penalty: Option<f32>,
    pub repetition_penalty: Option<f32>,
}

/// A loaded text-level file.
pub struct Translator {
    session: Session,
    /// the file's `graphgen.max_positions` metadata: the longest `max_length` (None: not recorded)
    max_positions: Option<i32>,
    /// the file's `graphgen.languages` metadata (empty for a file without language codes)
    languages: Vec<String>,
    /// the file's `graphgen.target_tags` metadata (empty for a file without target tags)
    target_tags: Vec<String>,
}

impl Translator {
    /// Load `model` with ONNX Runtime from `runtime_library` (`libonnxruntime.so`). The runtime is
    /// loaded once per process.
    pub fn new(model: &Path, runtime_library: &Path) -> Result<Self, Error> {
        existing(model, "model file")?;
        existing(runtime_library, "ONNX Runtime library")?;
        let environment = runtime(runtime_library)?;
        let session = Session::builder(environment)?
            .with_log_level(ort::logging::LogLevel::Error)?
            // as graphgen.Translator: ONNX Runtime's replay of a run's allocations would hold a
            // batch's search memory twice (README, Memory)
            .with_memory_pattern(false)?
            .commit_from_file(model)
            .map_err(|error| {
                if error.to_string().contains("ai.onnx.contrib") {
                    Error::WrongKind(model.to_owned())
                } else {
                    Error::from(error)
                }
            })?;
        if !session
            .inputs()
            .iter()
            .any(|input| input.name() == "text_utf8")
        {
            return Err(Error::WrongKind(model.to_owned()));
        }
        let metadata = session.metadata().ok();
        let custom = |key: &str| metadata.as_ref().and_then(|metadata| metadata.custom(key));
        let max_positions = custom("graphgen.max_positions").and_then(|value| value.parse().ok());
        let list = |key: &str, items: &str| match custom(key) {
            Some(list) => codes(&list).ok_or_else(|| {
                Error::Runtime(format!(
                    "{}: {key} is not a JSON list of {items}",
                    model.display()
                ))
            }),
            None => Ok(Vec::new()),
        };
        let languages = list("graphgen.languages", "codes")?;
        let target_tags = list("graphgen.target_tags", "tags")?;
        drop(metadata);
        Ok(Translator {
            session,
            max_positions,
            languages,
            target_tags,
        })
    }

    /// The language codes the file knows, from its `graphgen.languages` metadata (NLLB, M2M100 and
    /// mBART-50 files; empty for the others): for a language picker, or to check a code before a
    /// call (the file itself refuses an unknown one, naming the input).
    pub fn languages(&self) -> &[String] {
        &self.languages
    }

    /// The tokens that, typed at the start of a text, choose the target language, in id order, from
    /// the file's `graphgen.target_tags` metadata (opus-mt's `>>cmn_Hans<<`, MADLAD-400's `<2de>`;
    /// empty for the others): for a language picker, as `languages` is.
    pub fn target_tags(&self) -> &[String] {
        &self.target_tags
    }

    /// One translation per input, in order (the best hypothesis); no input gives no output.
    pub fn translate(&mut self, texts: &[&str]) -> Result<Vec<String>, Error> {
        self.run(texts, None, &Settings::default())
    }

    /// As `translate` (or `translate_languages`, with `languages`), with generation settings chosen
    /// for this call.
    pub fn translate_with(
        &mut self,
        texts: &[&str],
        languages: Option<(&[&str], &[&str])>,
        settings: &Settings,
    ) -> Result<Vec<String>, Error> {
        self.run(texts, languages, settings)
    }

    /// As `translate`, with the languages of an NLLB, M2M100 or mBART-50 file chosen for this call:
    /// `source_languages` and `target_languages` each hold one code for every text or one per text,
    /// spelled as the model's tokenizer spells them (`eng_Latn`, `fr_XX`, ...). The C API that `ort`
    /// wraps feeds a file's optional inputs, so no baked copy is needed (Java needs one). An unknown
    /// code is a `Runtime` error naming the input.
    pub fn translate_languages(
        &mut self,
        texts: &[&str],
        source_languages: &[&str],
        target_languages: &[&str],
    ) -> Result<Vec<String>, Error> {
        self.run(
            texts,
            Some((source_languages, target_languages)),
            &Settings::default(),
        )
    }

    /// The rules of Python's `graphgen.contract.generation_settings` that need no other setting
    /// (the file checks the rest itself): `max_length` 1 or past the model's positions would run.
    fn check(&self, settings: &Settings) -> Result<(), Error> {
        let wrong = |name: &str, wanted: String, value: String| {
            Err(Error::Setting(format!(
                "{name} must be {wanted}, got {value}"
            )))
        };
        for (name, value) in [
            ("num_beams", settings.num_beams),
            ("num_return_sequences", settings.num_return_sequences),
        ] {
            if let Some(value) = value.filter(|value| *value < 1) {
                return wrong(name, "at least 1".into(), value.to_string());
            }
        }
        if let Some(value) = settings.max_length {
            if value < 2 || self.max_positions.is_some_and(|limit| value > limit) {
                let limit = self
                    .max_positions
                    .map_or("its".into(), |limit| limit.to_string());
                return wrong(
                    "max_length",
                    format!("between 2 and the model's {limit} positions"),
                    value.to_string(),
                );
            }
        }
        if let Some(value) = settings.min_length.filter(|value| *value < 0) {
            return wrong("min_length", "at least 0".into(), value.to_string());
        }
        if let Some(value) = settings.length_penalty.filter(|value| !value.is_finite()) {
            return wrong("length_penalty", "finite".into(), value.to_string());
        }
        if let Some(value) = settings
            .repetition_penalty
            .filter(|value| !(value.is_finite() && *value > 0.0))
        {
            return wrong(
                "repetition_penalty",
                "positive and finite".into(),
                value.to_string(),
            );
        }
        Ok(())
    }

    fn run(
        &mut self,
        texts: &[&str],
        languages: Option<(&[&str], &[&str])>,
        settings: &Settings,
    ) -> Result<Vec<String>, Error> {
        carried(texts)?;
        self.check(settings)?;
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut inputs = ort::inputs!["text_utf8" => utf8(texts)?];
        if let Some((source, target)) = languages {
            inputs.push(("source_language".into(), strings(source)?.into()));
            inputs.push(("target_language".into(), strings(target)?.into()));
        }
        let given = [
            ("num_beams", settings.num_beams.map(scalar).transpose()?),
            (
                "num_return_sequences",
                settings.num_return_sequences.map(scalar).transpose()?,
            ),
            ("max_length", settings.max_length.map(scalar).transpose()?),
            ("min_length", settings.min_length.map(scalar).transpose()?),
            (
                "length_penalty",
                settings.length_penalty.map(scalar).transpose()?,
            ),
            (
                "repetition_penalty",
                settings.repetition_penalty.map(scalar).transpose()?,
            ),
        ];
        for (name, value) in given {
            if let Some(value) = value {
                inputs.push((name.into(), value));
            }
        }
        let outputs = self.session.run(inputs)?;
        let (shape, strings) = outputs["translation"].try_extract_strings()?;
        let returned = shape[1] as usize; // [batch, num_return_sequences]
        Ok(strings.into_iter().step_by(returned.max(1)).collect())
    }
}

/// The items of `graphgen.languages` or `graphgen.target_tags`, a JSON list of strings that hold no
/// quote or backslash (codes: ASCII letters, digits, `_`, `-`; tags: as `>>cmn_Hans<<`, `<2de>`);
/// None for anything else.
fn codes(list: &str) -> Option<Vec<String>> {
    let inner = list.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner
        .split(',')
        .map(|item| {
            let code = item.trim().strip_prefix('"')?.strip_suffix('"')?;
            let plain = !code.is_empty() && !code.contains(['"', '\\']);
            plain.then(|| code.to_owned())
        })
        .collect()
}

/// Refuses texts that end with U+0000 (as Python's `Translator` does, before running): `utf8` pads
/// each row with zero bytes, and the file takes the zero bytes after a row's last other byte as
/// padding, so a final U+0000 would be dropped and a different text translated. One before other
/// characters is carried (the file tokenizes it as HF does).
fn carried(texts: &[&str]) -> Result<(), Error> {
    let indices: Vec<usize> = texts
        .iter()
        .enumerate()
        .filter(|(_, text)| text.ends_with('\0'))
        .map(|(index, _)| index)
        .collect();
    if indices.is_empty() {
        Ok(())
    } else {
        Err(Error::EndsWithNul {
            indices,
            batch: texts.len(),
        })
    }
}

/// The texts as the `text_utf8` input: one row of UTF-8 bytes per text, zero-padded to the longest.
fn utf8(texts: &[&str]) -> Result<Tensor<u8>, Error> {
    let width = texts.iter().map(|text| text.len()).max().unwrap_or(0);
    let mut data = vec![0u8; texts.len() * width];
    for (row, text) in texts.iter().enumerate() {
        data[row * width..row * width + text.len()].copy_from_slice(text.as_bytes());
    }
    Ok(Tensor::from_array(([texts.len(), width], data))?)
}

/// One setting as a `[1]` tensor (int32 or float32, as the file's input).
fn scalar<T: PrimitiveTensorElementType + Debug + Clone + 'static>(
    value: T,
) -> Result<SessionInputValue<'static>, Error> {
    Ok(Tensor::from_array(([1usize], vec![value]))?.into())
}

fn strings(values: &[&str]) -> Result<Tensor<String>, Error> {
    let owned: Vec<String> = values.iter().map(|value| (*value).to_owned()).collect();
    Ok(Tensor::from_string_array((
        [owned.len()],
        owned.as_slice(),
    ))?)
}
